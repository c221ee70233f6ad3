import type { Command } from 'commander';
import { buildApp } from '../app.js';
import { loadConfig } from '../config/load.js';
import { createLogger, type Logger } from '../log.js';

export interface RunIo {
  stderr: NodeJS.WritableStream;
  env: Record<string, string | undefined>;
  cwd: string;
  /** Resolves when the process is asked to stop (SIGTERM, SIGINT). */
  stopSignal: Promise<string>;
  /** Called once the gateway is up (sd_notify READY in the future). */
  onReady?: () => void;
  logger?: Logger;
}

/** Longest a stop may take; below systemd's default TimeoutStopSec of 90 s. */
export const STOP_DEADLINE_MS = 30_000;

/** `scan-gateway run`: the daemon. Exits 0 after a clean stop, 1 when a part failed to stop. */
export function registerRunCommand(program: Command, io: RunIo): void {
  program
    .command('run')
    .description('run the gateway: take reads from the configured inputs and deliver them upstream')
    .option('-c, --config <file>', 'configuration file', '/etc/scan-gateway/config.yaml')
    .addHelpText('after', '\nExample:\n  scan-gateway run --config /etc/scan-gateway/config.yaml\n  npm start    # the demo: config/demo.yaml with the embedded sandbox')
    .action(async (opts: { config: string }) => {
      const loaded = loadConfig(opts.config, { baseDir: io.cwd, env: io.env });
      const logger = io.logger ?? createLogger({ level: loaded.config.log.level });
      const app = buildApp(loaded, { logger });
      try {
        await app.start();
      } catch (err) {
        logger.fatal({ component: 'app', err }, 'start failed');
        await app.stop().catch(() => {});
        throw err;
      }
      io.onReady?.();
      for (const input of loaded.config.inputs) {
        if (input.type === 'files') io.stderr.write(`scan-gateway: drop ${input.format} files for DCP ${input.dcp} into ${input.dir}\n`);
      }
      io.stderr.write(`scan-gateway: health at ${app.httpUrl}/healthz${loaded.config.sandbox.enabled ? `; sandbox scans at http://${loaded.config.sandbox.listen}/_sandbox/scans` : ''}\n`);
      const signal = await io.stopSignal;
      logger.info({ component: 'app', signal }, 'stopping');
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`stop took longer than ${STOP_DEADLINE_MS} ms`)), STOP_DEADLINE_MS);
      });
      try {
        await Promise.race([app.stop(), deadline]);
      } finally {
        clearTimeout(timer);
      }
      logger.info({ component: 'app' }, 'stopped');
    });
}
