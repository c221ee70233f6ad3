import { spawn } from 'node:child_process';
import type { Logger } from '../log.js';

export interface SystemdNotifierOptions {
  /** The process environment: `NOTIFY_SOCKET`, `WATCHDOG_USEC`, `WATCHDOG_PID` are read from it. */
  env: Record<string, string | undefined>;
  /** This process's id, to tell whether the watchdog is meant for it (`WATCHDOG_PID`). */
  pid: number;
  logger: Logger;
  /** The helper that sends one notification. Default `systemd-notify` (from the systemd package). */
  command?: string;
  /** Longest one notification may take before the helper is killed, in ms. Default 5000. */
  timeoutMs?: number;
}

/**
 * `sd_notify` for a `Type=notify` unit (systemd.service(5), sd_notify(3)): READY=1 once intake and
 * delivery are up, WATCHDOG=1 at half of `WatchdogSec`, STOPPING=1 when a stop begins, and a STATUS=
 * line that `systemctl status` shows.
 *
 * Node.js has no AF_UNIX datagram sockets, so each notification is sent by running
 * `systemd-notify VAR=VALUE…`. Its messages come from the helper's PID, which systemd accepts only
 * with `NotifyAccess=all` in the unit. systemd-notify (v246+) waits until systemd has processed the
 * message (a barrier), so the helper exiting early cannot make systemd drop it. Without
 * `NOTIFY_SOCKET` (not run by systemd) every call does nothing.
 */
export class SystemdNotifier {
  /** Whether systemd asked for notifications (`NOTIFY_SOCKET` set). */
  readonly enabled: boolean;
  /** How often to send WATCHDOG=1 (half of `WatchdogSec`), in ms; undefined when no watchdog is set. */
  readonly watchdogIntervalMs: number | undefined;
  private readonly command: string;
  private readonly timeoutMs: number;
  private watchdog: NodeJS.Timeout | undefined;
  private watchdogBusy = false;
  private warned = false;

  constructor(private readonly options: SystemdNotifierOptions) {
    this.enabled = Boolean(options.env.NOTIFY_SOCKET);
    this.command = options.command ?? 'systemd-notify';
    this.timeoutMs = options.timeoutMs ?? 5000;
    const usec = Number(options.env.WATCHDOG_USEC);
    const forPid = options.env.WATCHDOG_PID === undefined || Number(options.env.WATCHDOG_PID) === options.pid;
    this.watchdogIntervalMs = this.enabled && forPid && Number.isFinite(usec) && usec > 0 ? Math.max(100, Math.floor(usec / 2000)) : undefined;
  }

  /** READY=1 with a status line. */
  ready(status: string): Promise<boolean> {
    return this.send(['READY=1', `STATUS=${status}`]);
  }

  /** STOPPING=1 with a status line. Stops the watchdog pings. */
  stopping(status: string): Promise<boolean> {
    this.stopWatchdog();
    return this.send(['STOPPING=1', `STATUS=${status}`]);
  }

  /** Updates the status line. */
  status(status: string): Promise<boolean> {
    return this.send([`STATUS=${status}`]);
  }

  /**
   * Sends WATCHDOG=1 (and the current status line) every {@link watchdogIntervalMs}. The pings come
   * from a timer on the event loop, so a blocked loop stops them and systemd restarts the gateway.
   */
  startWatchdog(status: () => string): void {
    if (this.watchdogIntervalMs === undefined || this.watchdog) return;
    this.watchdog = setInterval(() => {
      if (this.watchdogBusy) return;
      this.watchdogBusy = true;
      let line: string;
      try {
        line = status();
      } catch (err) {
        line = `status unavailable: ${(err as Error).message}`;
      }
      void this.send(['WATCHDOG=1', `STATUS=${line}`]).finally(() => {
        this.watchdogBusy = false;
      });
    }, this.watchdogIntervalMs);
    this.watchdog.unref();
  }

  stopWatchdog(): void {
    if (this.watchdog) clearInterval(this.watchdog);
    this.watchdog = undefined;
  }

  /** Runs the helper once; resolves true when it exited 0. Never rejects: a failed notification is logged. */
  private send(fields: string[]): Promise<boolean> {
    if (!this.enabled) return Promise.resolve(false);
    const clean = fields.map((f) => f.replace(/[\r\n]+/g, ' '));
    return new Promise((resolve) => {
      let stderr = '';
      let settled = false;
      const done = (ok: boolean, why?: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (!ok) this.fail(clean[0] ?? '', why ?? 'failed');
        resolve(ok);
      };
      const child = spawn(this.command, clean, { env: this.options.env as NodeJS.ProcessEnv, stdio: ['ignore', 'ignore', 'pipe'] });
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        done(false, `no answer within ${this.timeoutMs} ms`);
      }, this.timeoutMs);
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-500)));
      child.once('error', (err) => done(false, `${this.command} could not be run: ${err.message}`));
      child.once('exit', (code) => done(code === 0, `${this.command} exited with ${code}: ${stderr.trim()}`));
    });
  }

  private fail(what: string, why: string): void {
    // READY and STOPPING matter every time; a failing watchdog ping is said once, not every few seconds.
    if (what === 'WATCHDOG=1' && this.warned) return;
    if (what === 'WATCHDOG=1') this.warned = true;
    this.options.logger.error({ notification: what, reason: why }, 'systemd notification failed (is NotifyAccess=all set in the unit?)');
  }
}
