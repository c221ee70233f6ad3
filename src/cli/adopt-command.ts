import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { Option, type Command } from 'commander';
import { Adoption, type AdoptionSummary } from '../app/adopt.js';
import { loadConfig } from '../config/load.js';
import { createLogger, SecretScrubber, type Logger } from '../log.js';
import { CommandExit, ExitCodes } from './exit.js';
// The input kinds, before this command reads a configuration (its `inputs` are checked by them).
import '../inputs/registry.js';

export interface AdoptIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: Record<string, string | undefined>;
  cwd: string;
  /** Resolves when the process is asked to stop (SIGTERM, SIGINT): the adoption stops cleanly. */
  stopSignal?: Promise<string>;
  logger?: Logger;
}

interface AdoptOptions {
  config: string;
  timeout: string;
  json?: boolean;
  logLevel?: string;
}

/**
 * `scan-gateway adopt <buffer.db>`: delivers the backlog of a dead node's buffer (its disk moved to
 * this node, or a copy of the file with its `-wal`) with this node's configuration, then exits
 * (src/app/adopt.ts). Progress is logged to stderr; the summary goes to stdout.
 *
 * Exit codes (cli/exit.ts): 0 nothing left to deliver or follow; 1 stopped (timeout, signal) with
 * something left, or a part failed to stop; 2 usage or configuration error (no such file among
 * them); 4 the buffer cannot be adopted: open by another process, a newer schema, not a database, not a
 * gateway buffer (an empty file, another program's database: refused before a byte of it is written).
 */
export function registerAdoptCommand(program: Command, io: AdoptIo): void {
  program
    .command('adopt')
    .description(
      "deliver the backlog of another node's buffer file (a dead node's disk), then exit",
    )
    .argument('<buffer.db>', "the other node's buffer file (its -wal beside it)")
    .option(
      '-c, --config <file>',
      'configuration file: its upstream and delivery settings are used',
      '/etc/scan-gateway/config.yaml',
    )
    .option(
      '--timeout <seconds>',
      'give up after this long with something left (exit 1); 0: until done',
      '0',
    )
    .option('--json', 'print the summary as JSON')
    .addOption(
      new Option('--log-level <level>', 'override log.level of the configuration').choices([
        'fatal',
        'error',
        'warn',
        'info',
        'debug',
        'trace',
      ]),
    )
    .addHelpText(
      'after',
      '\nExample:\n  scan-gateway adopt /mnt/dead-node/var/lib/scan-gateway/buffer.db --config /etc/scan-gateway/config.yaml\n\n' +
        'Runs the buffer, upstream and delivery parts of a gateway on the file, nothing else: no input, no HTTP\n' +
        "server, no status events (status is polled). It may run beside this node's own gateway, which keeps\n" +
        'its own buffer. Scans not yet sent are batched and sent; a batch the service may already have is\n' +
        'asked about and followed under its own requestId, never sent again under a new one (in direct mode, a\n' +
        'POST in flight at the death is sent again and counted as a possible duplicate, as after any crash).\n' +
        'The file is opened exclusively: refused while any process has it open, and no gateway can open it\n' +
        'while adopt runs. A buffer of an older schema is migrated forward (as `run` does); a newer one is\n' +
        'refused. Copy the -wal file with the buffer: it holds the latest commits. What the service refused:\n' +
        'scan-gateway failures --buffer FILE once adopt is done.\n\n' +
        'Exit codes: 0 nothing left to deliver or follow, 1 stopped with something left (--timeout, a signal),\n' +
        '2 usage or configuration error, 4 the buffer cannot be adopted (open by another process, newer schema, not a database, not a gateway buffer:\n' +
        "an empty file or another program's database, left as it was).\n" +
        'Runbook: docs/high-availability.md, "Adopt a dead node\'s disk".',
    )
    .action(async (file: string, opts: AdoptOptions) => {
      const timeoutS = Number(opts.timeout);
      if (!Number.isFinite(timeoutS) || timeoutS < 0) {
        io.stderr.write(
          `scan-gateway adopt: --timeout must be a number of seconds (0: no limit), not "${opts.timeout}"\n`,
        );
        throw new CommandExit(ExitCodes.USAGE);
      }
      const path = resolve(io.cwd, file);
      if (!existsSync(path)) {
        io.stderr.write(`scan-gateway adopt: no such file: ${path}\n`);
        throw new CommandExit(ExitCodes.USAGE);
      }
      const loaded = loadConfig(opts.config, { baseDir: io.cwd, env: io.env });
      // The log goes to stderr: stdout carries the summary (`--json` for scripts).
      const logger =
        io.logger ??
        createLogger({
          level: opts.logLevel ?? loaded.config.log.level,
          format: loaded.config.log.format,
          destination: io.stderr,
          scrubber: new SecretScrubber([loaded.clientSecret]),
        });
      const adoption = new Adoption(path, loaded, { logger, env: io.env });
      let finished: boolean;
      let summary: AdoptionSummary;
      try {
        await adoption.start();
        const stopped = io.stopSignal?.then(() => false);
        finished = await Promise.race([
          adoption.untilDone(timeoutS * 1000),
          ...(stopped ? [stopped] : []),
        ]);
        summary = adoption.summary();
      } catch (err) {
        await adoption.stop().catch(() => {});
        throw err;
      }
      await adoption.stop();
      io.stdout.write(
        opts.json
          ? `${JSON.stringify({ file: path, ...summary })}\n`
          : formatSummary(path, summary),
      );
      if (!finished) throw new CommandExit(ExitCodes.FAILED);
    });
}

function formatSummary(path: string, s: AdoptionSummary): string {
  const lines = [
    `adopt ${path}: ${s.finished ? 'done' : 'stopped with something left'}`,
    `  delivered: ${s.delivered} scans`,
    `  failed (dead letters): ${s.failed} scans${s.failed > 0 ? ` (scan-gateway failures --buffer ${path})` : ''}`,
    `  held: ${s.held} scans${s.held > 0 ? ` (scan-gateway failures --buffer ${path})` : ''}`,
  ];
  if (!s.finished)
    lines.push(
      `  left: ${s.left.pendingScans} scans not yet in a batch, ${s.left.openBatches} batches to send or follow (${s.left.followedBatches} awaiting their status); run adopt again`,
    );
  return `${lines.join('\n')}\n`;
}
