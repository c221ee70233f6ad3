import { originWords } from '../format/origin.js';
import { existsSync, realpathSync, renameSync, rmSync, statSync, type Stats } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { loadConfig } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import { checkBufferCopy } from '../buffer/backup-check.js';
import { BufferReader } from '../queries/reader.js';
import type { FailuresReport, QueueReport, StatsReport } from '../queries/ops-reports.js';
import { inertOutput, printableDeep, printableRaw } from '../format/printable.js';
import { fmtBytes, fmtDuration, fmtTime } from '../health/page-render.js';
import { SecretScrubber } from '../log.js';
import { ErrorCodes, isBufferUnopenable, isGatewayError } from '../errors.js';
import { CommandExit, ExitCodes } from './exit.js';
import { bestEffortScrubber } from './known-secrets.js';
import { registerBufferPruneCommand } from './buffer-prune-command.js';
import type { Clock } from '../clock.js';
// The input kinds, before this command reads a configuration (its `inputs` are checked by them).
import '../inputs/registry.js';

/** What the operations commands need from the process edge. */
export interface OpsIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  cwd: string;
  env: Record<string, string | undefined>;
  /** Effective user id (refuses, as root, to create files in the service's buffer folder). */
  uid?: number;
  now?: Clock;
}

export interface BufferOptions {
  /** Unset when not given: the default applies unless `--buffer` names the file. */
  config?: string;
  buffer?: string;
  json?: boolean;
}

const DEFAULT_CONFIG = '/etc/scan-gateway/config.yaml';
const EXIT_HELP =
  '\nExit codes: 0 done, 1 the buffer cannot be read now (missing, locked, a disk error) or the backup failed, 2 usage or configuration error,\n' +
  "4 the file is no gateway buffer (empty, another program's database), is damaged or has a newer schema: it is left as it was.\n" +
  'Run as the service user (sudo -u scan-gateway …) so no file in the buffer folder ends up owned by root.';

/**
 * `queue`, `failures`, `buffer stats` and `buffer backup <file>`: what is waiting, what failed,
 * how big the buffer is, and an online copy of it. They open the SQLite buffer read-only beside
 * the running daemon (WAL lets readers work during writes) and never change it. The buffer is the
 * one of `--config` (`buffer.path`), or the file given with `--buffer` (a backup, say). Human
 * output by default, `--json` for scripts. What they print of the buffer's data is inert on a
 * terminal (src/format/printable.ts): an ingest client's escape sequences and bidirectional
 * overrides are shown as `<ESC>`, `\u202e`, never passed on.
 */
export function registerOpsCommands(program: Command, io: OpsIo): void {
  const now = io.now ?? Date.now;

  withBuffer(
    program
      .command('queue')
      .description('scans waiting for delivery: by DCP, by age, and the batches not yet finished'),
  )
    .addHelpText(
      'after',
      `\nExample:\n  sudo -u scan-gateway scan-gateway queue --config /etc/scan-gateway/config.yaml\n${EXIT_HELP}`,
    )
    .action((opts: BufferOptions) => {
      const { db, timezone } = open(io, opts, 'queue');
      try {
        const report = db.reports.queue(now());
        io.stdout.write(
          inertOutput(
            opts.json
              ? `${JSON.stringify(report)}\n`
              : formatQueue(printableDeep(report), timezone, now()),
          ),
        );
      } finally {
        db.close();
      }
      throw new CommandExit(ExitCodes.OK);
    });

  withBuffer(
    program
      .command('failures')
      .description(
        'the latest scans the service refused and reads the gateway rejected, with their reasons and raw reads',
      ),
  )
    .option('-n, --limit <count>', 'how many of the latest to list', '20')
    .option(
      '--batch <id>',
      'only the scans of this gateway batch (the id on the health page and in queue), refused or held',
    )
    .addHelpText(
      'after',
      `\nExamples:\n  sudo -u scan-gateway scan-gateway failures --limit 50 --config /etc/scan-gateway/config.yaml\n  sudo -u scan-gateway scan-gateway failures --batch 42 --config /etc/scan-gateway/config.yaml\n\nIn raw reads, <GS> is the GS1 separator byte 0x1D; \\xNN a byte that is not UTF-8.${EXIT_HELP}`,
    )
    .action(async (opts: BufferOptions & { limit: string; batch?: string }) => {
      const limit = Number(opts.limit);
      if (!Number.isInteger(limit) || limit < 1)
        fail(
          io,
          'failures',
          `--limit must be a positive whole number, got "${opts.limit}"`,
          ExitCodes.USAGE,
        );
      if (opts.batch !== undefined && !/^\d+$/.test(opts.batch))
        fail(
          io,
          'failures',
          `--batch must be a batch id (a number), got "${opts.batch}"`,
          ExitCodes.USAGE,
        );
      const batchId = opts.batch === undefined ? undefined : Number(opts.batch);
      const { db, timezone, config } = open(io, opts, 'failures');
      // Reasons and raw reads may quote a secret that landed in an input: cut it out.
      const scrubber = config
        ? await bestEffortScrubber(config, io.env, io.cwd)
        : new SecretScrubber();
      try {
        const report = scrubber.scrubDeep(
          db.reports.failures({ limit, ...(batchId !== undefined ? { batchId } : {}) }),
        );
        io.stdout.write(
          inertOutput(
            opts.json
              ? `${JSON.stringify(report)}\n`
              : formatFailures(printableDeep(report), timezone, batchId),
          ),
        );
      } finally {
        db.close();
      }
      throw new CommandExit(ExitCodes.OK);
    });

  const buffer = program
    .command('buffer')
    .description('the SQLite buffer: size and content, backup while running, prune by hand');
  registerBufferPruneCommand(buffer, io);

  withBuffer(buffer.command('stats').description('size of the buffer on disk and what it holds'))
    .addHelpText(
      'after',
      `\nExample:\n  sudo -u scan-gateway scan-gateway buffer stats --config /etc/scan-gateway/config.yaml\n  scan-gateway buffer stats --buffer /root/buffer-2026-11-18.db   # a backup${EXIT_HELP}`,
    )
    .action((opts: BufferOptions) => {
      const { db } = open(io, opts, 'buffer stats');
      try {
        const report = db.reports.stats();
        io.stdout.write(
          inertOutput(
            opts.json ? `${JSON.stringify(report)}\n` : formatStats(printableDeep(report)),
          ),
        );
      } finally {
        db.close();
      }
      throw new CommandExit(ExitCodes.OK);
    });

  withBuffer(
    buffer
      .command('backup')
      .description(
        'copy the buffer to <file> while the gateway runs (one consistent snapshot, VACUUM INTO), then check the copy',
      ),
  )
    .argument('<file>', 'where to write the copy (one self-contained SQLite file)')
    .option('--force', 'replace <file> if it exists')
    .addHelpText(
      'after',
      `\nExample:\n  sudo -u scan-gateway scan-gateway buffer backup /var/lib/scan-gateway/backup-$(date +%F).db --config /etc/scan-gateway/config.yaml\n\n` +
        `The copy is consistent (one snapshot), checked with PRAGMA quick_check, and written under a temporary name first. Restore: docs/operations.md.${EXIT_HELP}`,
    )
    .action(async (file: string, opts: BufferOptions & { force?: boolean }) => {
      const target = resolve(io.cwd, file);
      // Before anything is written: the copy goes to <file>.partial first, and a folder (or a
      // device, a FIFO) can never be replaced by it, --force or not.
      const existing = statOrUndefined(target);
      if (existing && !existing.isFile())
        fail(
          io,
          'buffer backup',
          `${target} is ${existing.isDirectory() ? 'a directory' : 'not a regular file'}; give the name of the copy's file (e.g. ${join(target, 'buffer-backup.db')})`,
          ExitCodes.USAGE,
        );
      const { db, path } = open(io, opts, 'buffer backup');
      if (isBufferFile(target, path)) {
        db.close();
        fail(
          io,
          'buffer backup',
          `${target} is the buffer itself (or its -wal/-shm); write the copy somewhere else`,
          ExitCodes.USAGE,
        );
      }
      if (existsSync(target) && !opts.force) {
        db.close();
        fail(io, 'buffer backup', `${target} exists; use --force to replace it`, ExitCodes.USAGE);
      }
      const started = now();
      const temp = `${target}.partial`;
      try {
        rmSync(temp, { force: true });
        db.copyTo(temp);
      } catch (err) {
        rmSync(temp, { force: true });
        fail(
          io,
          'buffer backup',
          `copying ${path} to ${target} failed: ${(err as Error).message}`,
          ExitCodes.FAILED,
        );
      } finally {
        db.close();
      }
      let summary: { integrity: string; reads: number; scans: number; batches: number };
      try {
        summary = checkBufferCopy(temp);
      } catch (err) {
        rmSync(temp, { force: true });
        fail(
          io,
          'buffer backup',
          `the copy failed its check: ${(err as Error).message}`,
          ExitCodes.FAILED,
        );
      }
      renameSync(temp, target);
      const result = {
        source: path,
        file: target,
        bytes: statSync(target).size,
        ms: now() - started,
        ...summary,
      };
      io.stdout.write(
        opts.json
          ? `${JSON.stringify(result)}\n`
          : `Backed up ${path} to ${target}: ${fmtBytes(result.bytes)}, ${result.reads} reads, ${result.scans} scans, ${result.batches} batches, check ${result.integrity} (${result.ms} ms)\n`,
      );
      throw new CommandExit(ExitCodes.OK);
    });
}

function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

/**
 * Whether `target` is the buffer at `buffer` or one of its SQLite companions, by real path, so
 * that `--force` can never replace the live database under the running gateway.
 */
function isBufferFile(target: string, buffer: string): boolean {
  const real = (p: string): string => {
    try {
      return realpathSync(p);
    } catch {
      // Not there (yet): its folder's real path and its name.
      try {
        return join(realpathSync(dirname(p)), basename(p));
      } catch {
        return resolve(p);
      }
    }
  };
  const t = real(target);
  const b = real(buffer);
  return [b, `${b}-wal`, `${b}-shm`, `${b}-journal`].includes(t);
}

export function withBuffer(command: Command): Command {
  return command
    .option(
      '-c, --config <file>',
      `gateway configuration: its buffer.path, or with --buffer only its site.timezone and secrets (default: "${DEFAULT_CONFIG}" without --buffer)`,
    )
    .option(
      '--buffer <file>',
      'use this SQLite file instead of the configured buffer (a backup, say)',
    )
    .option('--json', 'print the result as JSON');
}

/**
 * Opens the buffer read-only. Exit 2 for a bad configuration; 1 when the file is missing, locked
 * or the disk fails; 4 when it is no gateway buffer (empty, another program's database), damaged
 * or of a newer schema: it is never written then.
 */
export function open(
  io: OpsIo,
  opts: BufferOptions,
  command: string,
): { db: BufferReader; path: string; timezone: string; config?: GatewayConfig } {
  let timezone = 'UTC';
  let config: GatewayConfig | undefined;
  // A file given with --buffer (a backup, another node's disk) is read with the site's time zone
  // and secrets when --config names the configuration too; without it, in UTC.
  const file = opts.config ?? (opts.buffer ? undefined : DEFAULT_CONFIG);
  if (file !== undefined) {
    let loaded: ReturnType<typeof loadConfig>;
    try {
      loaded = loadConfig(file, { baseDir: io.cwd, env: io.env, skipSecret: true });
    } catch (err) {
      fail(io, command, (err as Error).message, ExitCodes.USAGE);
    }
    timezone = loaded.config.site.timezone;
    config = loaded.config;
  }
  const path = opts.buffer ? resolve(io.cwd, opts.buffer) : config?.buffer.path;
  if (path === undefined) fail(io, command, 'no configuration and no --buffer', ExitCodes.USAGE);
  if (!existsSync(path))
    fail(
      io,
      command,
      `no buffer at ${path} (has the gateway run with this configuration?)`,
      ExitCodes.FAILED,
    );
  if (
    io.uid === 0 &&
    statSync(path).uid !== 0 &&
    !(existsSync(`${path}-wal`) && existsSync(`${path}-shm`))
  ) {
    // Opening would create ${path}-wal and -shm owned by root, which the service user then cannot open.
    fail(
      io,
      command,
      `${path} belongs to uid ${statSync(path).uid}; run this as that user (e.g. sudo -u scan-gateway scan-gateway ${command} …)`,
      ExitCodes.USAGE,
    );
  }
  try {
    const db = new BufferReader(path);
    return { db, path, timezone, ...(config ? { config } : {}) };
  } catch (err) {
    // Not a buffer, empty, damaged, a newer schema: a person must look (4); a lock or the disk: 1.
    fail(
      io,
      command,
      (err as Error).message,
      isBufferUnopenable(err) || isGatewayError(err, ErrorCodes.BUFFER_DAMAGED)
        ? ExitCodes.BUFFER_UNUSABLE
        : ExitCodes.FAILED,
    );
  }
}

export function fail(io: OpsIo, command: string, message: string, code: number): never {
  io.stderr.write(`scan-gateway ${command}: ${message}\n`);
  throw new CommandExit(code, message);
}

/** Left-aligned text columns, right-aligned numbers, two spaces apart. */
function table(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map((c) => String(c)))];
  const numeric = headers.map(
    (_, i) => rows.length > 0 && rows.every((r) => typeof r[i] === 'number'),
  );
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => [...(r[i] ?? '')].length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

function formatQueue(r: QueueReport, timezone: string, nowMs: number): string {
  const lines: string[] = [];
  const { waiting, inFlight, oldestAgeMs } = r.totals;
  lines.push(
    waiting + inFlight === 0
      ? 'Nothing waiting: every scan in the buffer is delivered.'
      : `${waiting + inFlight} scans waiting for delivery (${waiting} not yet in a batch, ${inFlight} in batches not finished); oldest ${fmtDuration(oldestAgeMs)}.`,
  );
  if (r.byDcp.length > 0) {
    lines.push(
      '',
      'By DCP:',
      table(
        ['DCP', 'not in a batch', 'in a batch', 'oldest'],
        r.byDcp.map((d) => [d.dcp, d.waiting, d.inFlight, fmtDuration(d.oldestAgeMs)]),
      ),
    );
    lines.push(
      '',
      'By age:',
      table(
        ['age', 'scans'],
        r.byAge.map((b) => [b.label, b.scans]),
      ),
    );
  }
  if (r.batches.length > 0) {
    lines.push(
      '',
      'Batches not finished:',
      table(
        [
          'batch',
          'mode',
          'state',
          'scans',
          'bytes',
          'request id',
          'tries',
          'next try',
          'last error',
        ],
        r.batches.map((b) => [
          b.id,
          b.mode,
          b.state,
          b.scans,
          fmtBytes(b.bytes),
          b.requestId ?? '-',
          b.attempts,
          b.state === 'held'
            ? 'held (see failures)'
            : b.nextAttemptAt <= nowMs
              ? 'now'
              : `in ${fmtDuration(b.nextAttemptAt - nowMs)}`,
          (b.lastError ?? '').slice(0, 80),
        ]),
      ),
    );
  }
  lines.push('', `Times in ${timezone}.`);
  return `${lines.join('\n')}\n`;
}

function formatFailures(r: FailuresReport, timezone: string, batchId?: number): string {
  if (r.latest.length === 0)
    return batchId === undefined
      ? 'No failed scans and no rejected reads in the buffer.\n'
      : `No failed or held scans of batch ${batchId} in the buffer (replayed ones are not listed).\n`;
  const lines = [
    'By reason:',
    table(
      ['kind', 'count', 'reason'],
      r.reasons.map((x) => [x.kind, x.count, x.reason]),
    ),
    '',
    `Latest (times in ${timezone}):`,
  ];
  for (const f of r.latest) {
    lines.push(
      `${fmtTime(f.at, timezone)}  ${f.kind.padEnd(8)}  input ${f.inputId}${f.dcp ? `  DCP ${f.dcp}` : ''}${f.product !== null ? `  product ${printableRaw(f.product)}` : ''}${f.requestId ? `  request ${f.requestId}` : ''}`,
      `    reason: ${f.reason}`,
      `    read:   ${f.raw}${f.origin ? `   (${originWords(f.origin)})` : ''}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

function formatStats(r: StatsReport): string {
  const counts = (o: Record<string, number>) =>
    Object.keys(o).length === 0
      ? 'none'
      : Object.entries(o)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ');
  return `${[
    `Buffer ${r.path}`,
    `  on disk:   ${fmtBytes(r.files.total)} (database ${fmtBytes(r.files.db)}, write-ahead log ${fmtBytes(r.files.wal)}, index ${fmtBytes(r.files.shm)})`,
    `  pages:     ${r.pages} of ${fmtBytes(r.pageSize)}, ${r.freePages} free; journal ${r.journalMode}; schema version ${r.schemaVersion}`,
    `  reads:     ${counts(r.reads)}`,
    `  scans:     ${counts(r.scans)}`,
    `  batches:   ${counts(r.batches)}`,
    `  reads from ${r.oldestReadAt ?? '-'} to ${r.newestReadAt ?? '-'} (UTC)`,
  ].join('\n')}\n`;
}
