import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { replayDeadLetters, type ReplayResult, type ReplaySelection } from '../buffer/replay.js';
import { withBufferFailures } from '../buffer/sqlite-errors.js';
import { BufferStore } from '../buffer/store.js';
import { loadConfig } from '../config/load.js';
import { ErrorCodes, GatewayError } from '../errors.js';
import { printableRaw } from '../format/printable.js';
import { mappingContext, mapRead } from '../mapping/map-read.js';
import { CommandExit, ExitCodes } from './exit.js';
import type { Clock } from '../clock.js';
import { inertOutput, printableDeep } from '../format/printable.js';
// The input kinds, before this command reads a configuration (its `inputs` are checked by them).
import '../inputs/registry.js';

export interface ReplayIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  cwd: string;
  env: Record<string, string | undefined>;
  now?: Clock;
}

interface ReplayOptions {
  config: string;
  batch?: string;
  dcp?: string;
  reason?: string;
  all?: boolean;
  rejected?: boolean;
  dryRun?: boolean;
  json?: boolean;
}

/** Item lines printed in human output; the rest are summed up. `--json` has them all. */
const SHOWN = 50;

/**
 * `scan-gateway replay`: maps the original reads of dead letters (scans the service refused, or
 * held batches) again with the current configuration and queues the new scans for delivery.
 * Works on the buffer file directly, also while the daemon runs (WAL, busy timeout): the daemon's
 * delivery picks the new scans up within a second or so. Exit 0 when every selected dead letter was
 * queued (or none matched), 1 when some still do not map, 2 for a usage or configuration error.
 */
export function registerReplayCommand(program: Command, io: ReplayIo): void {
  program
    .command('replay')
    .description(
      'map failed scans (dead letters) again with the current configuration and queue them for delivery',
    )
    .option('-c, --config <file>', 'configuration file', '/etc/scan-gateway/config.yaml')
    .option('--batch <id>', 'only scans of this gateway batch (the id on the health page)')
    .option('--dcp <key>', 'only scans of this DCP')
    .option(
      '--reason <text>',
      'only scans whose failure reason contains this text (case-insensitive)',
    )
    .option('--all', 'every dead letter (needed when no other filter is given)')
    .option('--rejected', 'also reads the mapping rejected (e.g. after adding a missing DCP)')
    .option('--dry-run', 'show what would be queued; change nothing')
    .option('--json', 'print the result as JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  scan-gateway replay --reason "Invalid DCP" --config /etc/scan-gateway/config.yaml\n' +
        '  scan-gateway replay --batch 42 --dry-run --config /etc/scan-gateway/config.yaml\n' +
        '  scan-gateway replay --all --rejected --json --config /etc/scan-gateway/config.yaml\n\n' +
        'Exit codes: 0 all selected queued (or none matched), 1 some still do not map, 2 usage or configuration error.',
    )
    .action((opts: ReplayOptions) => {
      let selection: ReplaySelection;
      try {
        selection = toSelection(opts);
      } catch (err) {
        io.stderr.write(`scan-gateway replay: ${(err as Error).message}\n`);
        throw new CommandExit(ExitCodes.USAGE);
      }
      const { config } = loadConfig(opts.config, {
        baseDir: io.cwd,
        env: io.env,
        skipSecret: true,
      });
      if (!existsSync(config.buffer.path)) {
        throw new GatewayError(
          ErrorCodes.BUFFER,
          `the buffer ${config.buffer.path} does not exist (nothing to replay)`,
        );
      }
      // No migration from here: an older gateway may still run on this buffer (after a package
      // upgrade whose restart waits for the configuration), and could not write a newer schema.
      const store = BufferStore.openAt(config.buffer.path, { fileMustExist: true, migrate: false });
      let result: ReplayResult;
      try {
        const mapper = mappingContext(config);
        result = replayDeadLetters(
          // SQLite's failures on the way (a disk error, a damaged buffer) as errors with what to do.
          withBufferFailures(
            store.deadLetters,
            config.buffer.path,
            'cannot replay from the buffer',
          ),
          (read) => mapRead(read, mapper),
          selection,
          (io.now ?? Date.now)(),
        );
      } finally {
        store.close();
      }
      io.stdout.write(
        inertOutput(
          opts.json ? `${JSON.stringify(result)}\n` : formatResult(printableDeep(result)),
        ),
      );
      throw new CommandExit(result.notQueued > 0 ? ExitCodes.FAILED : ExitCodes.OK);
    });
}

function toSelection(opts: ReplayOptions): ReplaySelection {
  const selection: ReplaySelection = {};
  if (opts.batch !== undefined) {
    if (!/^\d+$/.test(opts.batch))
      throw new GatewayError(
        ErrorCodes.USAGE,
        `--batch must be a batch id (a number), not "${opts.batch}"`,
      );
    selection.batchId = Number(opts.batch);
  }
  if (opts.dcp !== undefined) selection.dcpKey = opts.dcp;
  if (opts.reason !== undefined) selection.reason = opts.reason;
  if (opts.all) selection.all = true;
  if (opts.rejected) selection.rejected = true;
  if (opts.dryRun) selection.dryRun = true;
  if (
    selection.batchId === undefined &&
    selection.dcpKey === undefined &&
    selection.reason === undefined &&
    !selection.all
  ) {
    throw new GatewayError(
      ErrorCodes.USAGE,
      'replay needs a selection: --batch, --dcp, --reason, or --all',
    );
  }
  return selection;
}

/** A stored value on a terminal: control characters by name, as `failures` prints reads. */
function shown(value: string | null): string {
  return value === null ? '(none)' : printableRaw(value);
}

function formatResult(r: ReplayResult): string {
  const verb = r.dryRun ? 'would be queued' : 'queued';
  const lines = [
    `replay${r.dryRun ? ' (dry run)' : ''}: ${r.selected} selected, ${r.queued} ${verb}, ${r.notQueued} not queued`,
  ];
  if (r.notReplayable) {
    lines.push(
      `  ${r.notReplayable} more rejection(s) never were a read (no barcode could be framed or parsed: an empty cell, line noise): nothing to map again; see failures`,
    );
  }
  for (const item of r.items.slice(0, SHOWN)) {
    const what =
      item.scanId !== undefined
        ? `scan ${item.scanId} (${item.reference ?? ''})`
        : `rejected read ${item.readId}`;
    lines.push(
      item.result.queued
        ? `  ${what}: ${verb}${item.result.newScanId !== undefined ? ` as scan ${item.result.newScanId}` : ''} at DCP ${item.result.dcpKey}; was: ${item.previousReason}`
        : `  ${what}: not queued: ${item.result.why}`,
    );
    // Every field that changes, old → new: what a person checks before letting a dry run loose.
    if (item.result.queued)
      for (const c of item.result.changes)
        lines.push(`      ${c.field}: ${shown(c.from)} → ${shown(c.to)}`);
  }
  if (r.items.length > SHOWN)
    lines.push(`  … and ${r.items.length - SHOWN} more (--json lists all)`);
  return `${lines.join('\n')}\n`;
}
