import { Option, type Command } from 'commander';
import { buildApp, type App } from '../app.js';
import { loadConfig } from '../config/load.js';
import { ConfigReloader } from '../config/reload.js';
import { resolveSecrets, secretValues } from '../config/secrets.js';
import { inputKind } from '../inputs/registry.js';
import { SystemdNotifier } from './sd-notify.js';
import type { GatewayStatus } from '../health/status.js';
import { createLogger, SecretScrubber, type Logger } from '../log.js';
import { ErrorCodes, GatewayError } from '../errors.js';
import { MARK_BUILD, MARK_CONFIG } from '../paths.js';

export interface RunIo {
  stderr: NodeJS.WritableStream;
  env: Record<string, string | undefined>;
  cwd: string;
  /** Resolves when the process is asked to stop (SIGTERM, SIGINT). */
  stopSignal: Promise<string>;
  /** This process's id (for systemd's `WATCHDOG_PID`). */
  pid?: number;
  /** Called once the gateway is up, after systemd was told READY=1. */
  onReady?: () => void;
  logger?: Logger;
  /** The sd_notify helper for an abstract `NOTIFY_SOCKET` address only (tests); default `systemd-notify`. */
  notifyCommand?: string;
  /** Registers what to do on SIGHUP (reload the configuration); main.ts owns the signal. */
  onHangup?: (listener: () => void) => void;
}

/**
 * Longest a stop may take, in ms: below the unit's `TimeoutStopSec` (45 s), so the gateway closes
 * its buffer itself before systemd would kill it.
 */
export const STOP_DEADLINE_MS = 30_000;

/** One line for `systemctl status` (STATUS=). */
export function statusLine(s: GatewayStatus): string {
  const up = s.inputs.filter((i) => i.state === 'up').length;
  const parts = [
    `${s.state}`,
    `inputs ${up}/${s.inputs.length} up`,
    `${s.buffer.undeliveredScans} scans waiting`,
    `delivery ${s.delivery.paused ? 'paused' : (s.delivery.circuit ?? 'unknown')}`,
  ];
  // The worst problem, with its code: `systemctl status` then names what to look up in docs/errors.md.
  const worst = s.healthProblems?.find((p) => p.severity !== 'info');
  if (worst) parts.push(`${worst.sentence} (${worst.code})`);
  else if (s.reasons.length > 0) parts.push(s.reasons[0]!);
  return parts.join(', ');
}

/**
 * `scan-gateway run`: the daemon. Exits 0 after a clean stop; 1 when a part failed to stop or the
 * stop took longer than {@link STOP_DEADLINE_MS}; 2 for a configuration or secret problem.
 *
 * Start: configuration and secrets are read (both secrets are then cut out of every log line),
 * the parts start in order, and systemd is told READY=1 (with `Type=notify`), then WATCHDOG=1 at
 * half of `WatchdogSec`. Stop (SIGTERM, SIGINT): STOPPING=1, then the parts stop in reverse order:
 * the HTTP server, the inputs (a file being read is committed and moved), delivery (an upload in
 * flight is finished, or abandoned after a grace period and recovered at the next start), the
 * intake (whatever is queued is committed), the buffer.
 */
export function registerRunCommand(program: Command, io: RunIo): void {
  program
    .command('run')
    .description('run the gateway: take reads from the configured inputs and deliver them upstream')
    .option('-c, --config <file>', 'configuration file', '/etc/scan-gateway/config.yaml')
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
      '\nExample:\n  scan-gateway run --config /etc/scan-gateway/config.yaml\n  npm start    # the demo: config/demo.yaml with the embedded sandbox\n\n' +
        'Stops cleanly on SIGTERM or SIGINT. Exit codes: 0 stopped cleanly, 1 a part failed (or the stop took too long), 2 configuration or secret error, 4 the buffer cannot be opened (corrupt, newer schema, no permission).',
    )
    .action(async (opts: { config: string; logLevel?: string }) => {
      performance.mark(MARK_CONFIG);
      const loaded = loadConfig(opts.config, { baseDir: io.cwd, env: io.env });
      const secrets = await resolveSecrets(loaded, io.env, io.cwd);
      const { adminToken, readToken } = secrets;
      const scrubber = new SecretScrubber(secretValues(secrets));
      const logger =
        io.logger ??
        createLogger({
          level: opts.logLevel ?? loaded.config.log.level,
          format: loaded.config.log.format,
          scrubber,
        });
      const log = logger.child({ component: 'app' });
      const notifier = new SystemdNotifier({
        env: io.env,
        pid: io.pid ?? 0,
        logger: logger.child({ component: 'systemd' }),
        ...(io.notifyCommand ? { command: io.notifyCommand } : {}),
      });
      let app: App | undefined;
      try {
        // Building can refuse the configuration (an upstream address the client will not use); starting does the I/O.
        performance.mark(MARK_BUILD);
        app = buildApp(loaded, {
          logger,
          env: io.env,
          scrub: (text) => scrubber.scrub(text),
          ...(adminToken ? { adminToken } : {}),
          ...(readToken ? { readToken } : {}),
        });
        await app.start();
      } catch (err) {
        log.fatal({ err }, 'start failed');
        await app?.stop().catch(() => {});
        throw err;
      }
      await notifier.ready(statusLine(app.status()));
      notifier.startWatchdog(() => statusLine(app.status()));
      // Reload on SIGHUP and when the file changes: checked first; a bad file leaves the running one.
      const reloader = new ConfigReloader({
        file: opts.config,
        load: () => loadConfig(opts.config, { baseDir: io.cwd, env: io.env }),
        // Every secret read again: a new one is added to the scrubber before anything can log it.
        apply: async (next) => {
          const fresh = await resolveSecrets(next, io.env, io.cwd);
          for (const value of secretValues(fresh)) scrubber.add(value);
          return app.reload(next, { adminToken: fresh.adminToken, readToken: fresh.readToken });
        },
        refused: (err) => app.reloadRefused(err),
        logger: logger.child({ component: 'config' }),
      });
      reloader.start();
      io.onHangup?.(() => void reloader.trigger('SIGHUP'));
      io.onReady?.();
      // Hints for a person at a terminal; under systemd stderr goes to the journal, where only the
      // JSON log lines belong (jq recipes read every line as JSON).
      if (
        loaded.config.log.format === 'pretty' ||
        (io.stderr as { isTTY?: boolean }).isTTY === true
      ) {
        for (const input of loaded.config.inputs) {
          const hint = inputKind(input).runHint?.(input);
          if (hint !== undefined) io.stderr.write(`scan-gateway: ${hint}\n`);
        }
        io.stderr.write(
          `scan-gateway: health at ${app.httpUrl}/healthz${loaded.config.sandbox.enabled ? `; sandbox scans at http://${loaded.config.sandbox.listen}/_sandbox/scans` : ''}\n`,
        );
      }
      if (adminToken === undefined) log.info('no admin token configured: admin actions are off');

      const signal = await io.stopSignal;
      reloader.stop();
      await reloader.settled();
      log.info({ signal, deadlineMs: STOP_DEADLINE_MS }, 'stopping');
      await notifier.stopping(`stopping on ${signal}`);
      const started = Date.now();
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new GatewayError(ErrorCodes.STOP, `stop took longer than ${STOP_DEADLINE_MS} ms`),
            ),
          STOP_DEADLINE_MS,
        );
      });
      try {
        await Promise.race([app.stop(), deadline]);
      } catch (err) {
        log.error({ err, ms: Date.now() - started }, 'stop failed');
        throw err;
      } finally {
        clearTimeout(timer);
      }
      log.info({ ms: Date.now() - started }, 'stopped');
    });
}
