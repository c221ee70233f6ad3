import type { Command } from 'commander';
import { inertOutput, printableDeep } from '../format/printable.js';
import { SecretScrubber } from '../log.js';
import { CommandExit, ExitCodes } from './exit.js';
import { bestEffortScrubber } from './known-secrets.js';
import { registerBufferBackupCommand } from './buffer-backup-command.js';
import { registerBufferPruneCommand } from './buffer-prune-command.js';
import { formatFailures, formatQueue, formatStats } from './ops-format.js';
import { EXIT_HELP, fail, open, withBuffer, type BufferOptions, type OpsIo } from './ops-open.js';
// The input kinds, before this command reads a configuration (its `inputs` are checked by them).
import '../inputs/registry.js';

export { fail, open, withBuffer, type BufferOptions, type OpsIo } from './ops-open.js';

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
  registerBufferBackupCommand(buffer, io, now);

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
}
