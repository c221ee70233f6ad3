import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import type { Logger } from '../log.js';

export interface SystemdNotifierOptions {
  /** The process environment: `NOTIFY_SOCKET`, `WATCHDOG_USEC`, `WATCHDOG_PID` are read from it. */
  env: Record<string, string | undefined>;
  /** This process's id, to tell whether the watchdog is meant for it (`WATCHDOG_PID`). */
  pid: number;
  logger: Logger;
  /**
   * The helper for an abstract socket address (`NOTIFY_SOCKET=@…`) only, which the datagram writer
   * cannot address (see {@link SystemdNotifier}). Default `systemd-notify`.
   */
  command?: string;
  /** Longest one notification by the helper may take before it is killed, in ms. Default 5000. */
  timeoutMs?: number;
}

/** The part of the `unix-dgram` package used here (a native addon: AF_UNIX datagram sockets). */
interface UnixDgram {
  createSocket(type: 'unix_dgram'): {
    on(event: 'error', listener: (err: Error) => void): void;
    send(
      buf: Buffer,
      offset: number,
      length: number,
      path: string,
      callback: (err?: Error) => void,
    ): void;
    close(): void;
  };
}

/** `sun_path` of `struct sockaddr_un` on Linux holds 108 bytes, the terminating NUL included. */
const SUN_PATH_MAX = 107;

let unixDgram: UnixDgram | undefined;
function loadUnixDgram(): UnixDgram {
  unixDgram ??= createRequire(import.meta.url)('unix-dgram') as UnixDgram;
  return unixDgram;
}

/**
 * `sd_notify` for a `Type=notify` unit (systemd.service(5), sd_notify(3)): READY=1 once intake and
 * delivery are up, WATCHDOG=1 at half of `WatchdogSec`, STOPPING=1 when a stop begins, and a STATUS=
 * line that `systemctl status` shows.
 *
 * Each notification is one datagram that this process writes to the socket `NOTIFY_SOCKET` names
 * (Node.js has no AF_UNIX datagram sockets of its own, so the small native `unix-dgram` package
 * sends it). It comes from the main PID, so the unit needs only `NotifyAccess=main`, and no process
 * is started per message. A socket is opened per message and closed at once: nothing keeps the
 * event loop alive, and a socket that systemd replaced is found again.
 *
 * An abstract address (`@name`, sd_notify(3)) cannot be written to by `unix-dgram`: it copies the
 * address as a C string and sends the whole `sockaddr_un` as its length, so neither the leading NUL
 * nor the exact length of an abstract name survives. For such an address (systemd's own services
 * get the path `/run/systemd/notify`) the message goes through `systemd-notify` as before, which
 * needs `NotifyAccess=all`; this is said once in the log. Without `NOTIFY_SOCKET` (not run by
 * systemd) every call does nothing.
 */
export class SystemdNotifier {
  /** Whether systemd asked for notifications (`NOTIFY_SOCKET` set). */
  readonly enabled: boolean;
  /** How often to send WATCHDOG=1 (half of `WatchdogSec`), in ms; undefined when no watchdog is set. */
  readonly watchdogIntervalMs: number | undefined;
  /** `datagram`: written by this process; `helper`: an abstract address, sent by `systemd-notify`. */
  readonly transport: 'datagram' | 'helper' | undefined;
  private readonly socket: string;
  private readonly command: string;
  private readonly timeoutMs: number;
  private watchdog: NodeJS.Timeout | undefined;
  private watchdogBusy = false;
  private warned = false;
  private helperSaid = false;

  constructor(private readonly options: SystemdNotifierOptions) {
    this.socket = options.env.NOTIFY_SOCKET ?? '';
    this.enabled = this.socket !== '';
    this.transport = !this.enabled
      ? undefined
      : this.socket.startsWith('@')
        ? 'helper'
        : 'datagram';
    this.command = options.command ?? 'systemd-notify';
    this.timeoutMs = options.timeoutMs ?? 5000;
    const usec = Number(options.env.WATCHDOG_USEC);
    const forPid =
      options.env.WATCHDOG_PID === undefined || Number(options.env.WATCHDOG_PID) === options.pid;
    this.watchdogIntervalMs =
      this.enabled && forPid && Number.isFinite(usec) && usec > 0
        ? Math.max(100, Math.floor(usec / 2000))
        : undefined;
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

  /** Sends one notification; resolves true when it was sent. Never rejects: a failure is logged. */
  private send(fields: string[]): Promise<boolean> {
    if (!this.enabled) return Promise.resolve(false);
    // One VAR=VALUE per line (sd_notify(3)): a line break inside a value would start a new variable.
    const clean = fields.map((f) => f.replace(/[\r\n]+/g, ' '));
    return this.transport === 'helper'
      ? this.sendByHelper(clean)
      : Promise.resolve(this.sendDatagram(clean));
  }

  private sendDatagram(fields: string[]): boolean {
    const message = Buffer.from(`${fields.join('\n')}\n`, 'utf8');
    if (Buffer.byteLength(this.socket) > SUN_PATH_MAX) {
      this.fail(
        fields[0] ?? '',
        `NOTIFY_SOCKET is longer than ${SUN_PATH_MAX} bytes: ${this.socket}`,
      );
      return false;
    }
    let sock: ReturnType<UnixDgram['createSocket']>;
    try {
      sock = loadUnixDgram().createSocket('unix_dgram');
    } catch (err) {
      this.fail(
        fields[0] ?? '',
        `no AF_UNIX datagram socket (unix-dgram): ${(err as Error).message}`,
      );
      return false;
    }
    let error: Error | undefined;
    sock.on('error', (err) => (error ??= err));
    try {
      // unix-dgram's sendto is synchronous: the callback has run when send returns.
      sock.send(message, 0, message.length, this.socket, (err) => (error ??= err));
    } catch (err) {
      error ??= err as Error;
    } finally {
      sock.close();
    }
    if (error) this.fail(fields[0] ?? '', `sending to ${this.socket} failed: ${error.message}`);
    return error === undefined;
  }

  /** Runs `systemd-notify VAR=VALUE…` once (abstract addresses only); resolves true when it exited 0. */
  private sendByHelper(fields: string[]): Promise<boolean> {
    if (!this.helperSaid) {
      this.helperSaid = true;
      this.options.logger.warn(
        { socket: this.socket },
        'NOTIFY_SOCKET is an abstract address, which the gateway cannot write to itself: notifications go through systemd-notify, which needs NotifyAccess=all',
      );
    }
    return new Promise((resolve) => {
      let stderr = '';
      let settled = false;
      const done = (ok: boolean, why?: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (!ok) this.fail(fields[0] ?? '', why ?? 'failed');
        resolve(ok);
      };
      const child = spawn(this.command, fields, {
        env: this.options.env as NodeJS.ProcessEnv,
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        done(false, `no answer within ${this.timeoutMs} ms`);
      }, this.timeoutMs);
      child.stderr
        .setEncoding('utf8')
        .on('data', (d: string) => (stderr = (stderr + d).slice(-500)));
      child.once('error', (err) => done(false, `${this.command} could not be run: ${err.message}`));
      child.once('exit', (code) =>
        done(code === 0, `${this.command} exited with ${code}: ${stderr.trim()}`),
      );
    });
  }

  private fail(what: string, why: string): void {
    // READY and STOPPING matter every time; a failing watchdog ping is said once, not every few seconds.
    if (what === 'WATCHDOG=1' && this.warned) return;
    if (what === 'WATCHDOG=1') this.warned = true;
    this.options.logger.error({ notification: what, reason: why }, 'systemd notification failed');
  }
}
