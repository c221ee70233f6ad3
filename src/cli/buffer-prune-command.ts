import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { Retention, type PruneResult } from '../buffer/retention.js';
import { BufferStore } from '../buffer/store.js';
import { loadConfig } from '../config/load.js';
import { ErrorCodes, isBufferUnopenable, isGatewayError } from '../errors.js';
import { silentLogger } from '../log.js';
import { CommandExit, ExitCodes } from './exit.js';
import { fail, type OpsIo } from './ops-open.js';
// The input kinds, before this command reads a configuration (its `inputs` are checked by them).
import '../inputs/registry.js';

const DEFAULT_CONFIG = '/etc/scan-gateway/config.yaml';

/** What `buffer prune` did (`--json`). */
export interface BufferPruneResult {
  /** The buffer file. */
  buffer: string;
  /** ISO 8601: delivered scans read before this instant were deleted. */
  before: string;
  /** Delivered scans deleted. */
  scans: number;
  /** Replayed dead letters deleted with the delivered scans that replaced them (not in `scans`); 0 when none. */
  deadLetters: number;
  /** Reads left without a scan, deleted. */
  reads: number;
  /** Finished batches left empty, deleted. */
  batches: number;
  /** Read times (ISO 8601) of the first and last scan deleted, when any were. */
  firstReadAt?: string;
  lastReadAt?: string;
}

/**
 * `scan-gateway buffer prune --before DATE`: plant IT deletes by hand the delivered scans read
 * before DATE (their reads and emptied batches with them), to free a filling disk without waiting
 * for `buffer.retentionDays`. Undelivered scans (pending, in an unfinished batch, dead letters not
 * replayed, held) are never deleted. Works beside the running daemon like `replay` (WAL, busy
 * timeout, short transactions), on a buffer of this gateway's schema only. The prune is remembered
 * as an early one (table `early_prunes`), so `trace` of a deleted item says when and why; the
 * running daemon's page shows it from its next start. Freed pages go back to the disk
 * (`incremental_vacuum`) when the daemon's readers let the log be checkpointed.
 */
export function registerBufferPruneCommand(buffer: Command, io: OpsIo): void {
  buffer
    .command('prune')
    .description(
      'delete the delivered scans read before a date (never undelivered ones), to free the disk now',
    )
    .requiredOption(
      '--before <date>',
      'ISO 8601 date or instant (2026-11-01, 2026-11-01T06:00:00Z); not in the future',
    )
    .option('-c, --config <file>', 'gateway configuration (its buffer.path)', DEFAULT_CONFIG)
    .option('--buffer <file>', 'use this SQLite file instead of the configured buffer')
    .option('--json', 'print the result as JSON')
    .addHelpText(
      'after',
      '\nExample:\n  sudo -u scan-gateway scan-gateway buffer prune --before 2026-11-01 --config /etc/scan-gateway/config.yaml\n\n' +
        'Exit codes: 0 done (also when nothing was old enough), 1 the buffer cannot be written now, 2 usage or configuration error, 4 the file is no gateway buffer or of another schema.\n' +
        'Run as the service user so no file in the buffer folder ends up owned by root.',
    )
    .action(async (opts: { before: string; config: string; buffer?: string; json?: boolean }) => {
      const now = (io.now ?? Date.now)();
      const beforeMs = Date.parse(opts.before);
      if (!/^\d{4}-\d{2}-\d{2}/.test(opts.before) || Number.isNaN(beforeMs))
        fail(
          io,
          'buffer prune',
          `--before must be an ISO 8601 date or instant, got "${opts.before}"`,
          ExitCodes.USAGE,
        );
      if (beforeMs > now)
        fail(
          io,
          'buffer prune',
          `--before ${opts.before} is in the future; give a past date`,
          ExitCodes.USAGE,
        );
      const path = bufferPath(io, opts);
      let store: BufferStore;
      try {
        // No migration: the daemon (perhaps an older one) owns the schema.
        store = BufferStore.openAt(path, { fileMustExist: true, migrate: false });
      } catch (err) {
        fail(
          io,
          'buffer prune',
          (err as Error).message,
          isBufferUnopenable(err) || isGatewayError(err, ErrorCodes.BUFFER_DAMAGED)
            ? ExitCodes.BUFFER_UNUSABLE
            : ExitCodes.FAILED,
        );
      }
      const before = new Date(beforeMs).toISOString();
      const at = new Date(now).toISOString();
      let r: PruneResult;
      try {
        const retention = new Retention({
          store,
          retentionDays: Number.MAX_SAFE_INTEGER,
          logger: silentLogger(),
          now: () => now,
        });
        r = await retention.pruneDeliveredReadBefore(before, at);
        if (r.scans > 0)
          store.pruning.early.record({
            at,
            reason: `plant IT pruned by hand the delivered scans read before ${before} (scan-gateway buffer prune)`,
            scans: r.scans,
            ...(r.firstReadAt ? { firstReadAt: r.firstReadAt } : {}),
            ...(r.lastReadAt ? { lastReadAt: r.lastReadAt } : {}),
          });
        returnPages(store);
      } catch (err) {
        fail(
          io,
          'buffer prune',
          `pruning ${path} failed: ${(err as Error).message}`,
          ExitCodes.FAILED,
        );
      } finally {
        store.close();
      }
      const result: BufferPruneResult = {
        buffer: path,
        before,
        scans: r.scans,
        deadLetters: r.deadLetters ?? 0,
        reads: r.reads,
        batches: r.batches,
        ...(r.firstReadAt ? { firstReadAt: r.firstReadAt } : {}),
        ...(r.lastReadAt ? { lastReadAt: r.lastReadAt } : {}),
      };
      io.stdout.write(
        opts.json
          ? `${JSON.stringify(result)}\n`
          : r.scans === 0
            ? `No delivered scans read before ${before} in ${path}; nothing pruned.\n`
            : `Pruned ${r.scans} delivered scan${r.scans === 1 ? '' : 's'} read before ${before} from ${path}` +
              ` (read between ${r.firstReadAt} and ${r.lastReadAt})${r.deadLetters ? `, ${r.deadLetters} replayed dead letter${r.deadLetters === 1 ? '' : 's'} they replaced` : ''}, ${r.reads} reads and ${r.batches} emptied batches. Undelivered scans are kept.\n`,
      );
      throw new CommandExit(ExitCodes.OK);
    });
}

/** The buffer file of `--buffer`, or of the configuration's `buffer.path`. */
function bufferPath(io: OpsIo, opts: { config: string; buffer?: string }): string {
  let path: string;
  if (opts.buffer) path = resolve(io.cwd, opts.buffer);
  else {
    try {
      path = loadConfig(opts.config, { baseDir: io.cwd, env: io.env, skipSecret: true }).config
        .buffer.path;
    } catch (err) {
      fail(io, 'buffer prune', (err as Error).message, ExitCodes.USAGE);
    }
  }
  if (!existsSync(path)) fail(io, 'buffer prune', `no buffer at ${path}`, ExitCodes.FAILED);
  if (
    io.uid === 0 &&
    statSync(path).uid !== 0 &&
    !(existsSync(`${path}-wal`) && existsSync(`${path}-shm`))
  )
    fail(
      io,
      'buffer prune',
      `${path} belongs to uid ${statSync(path).uid}; run this as that user (e.g. sudo -u scan-gateway scan-gateway buffer prune …)`,
      ExitCodes.USAGE,
    );
  return path;
}

/** Gives the freed pages back to the disk; skipped while the daemon's readers hold the log (it does so itself). */
function returnPages(store: BufferStore): void {
  try {
    store.space.checkpointTruncate();
    while (store.space.freePages() > 0) {
      store.space.incrementalVacuum(64);
      store.space.checkpointTruncate();
    }
  } catch {
    // A reader of the daemon holds the log: its disk guard returns the pages at its next check.
  }
}
