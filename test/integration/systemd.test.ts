import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ExitCodes } from '../../src/cli/exit.js';
import { STOP_DEADLINE_MS } from '../../src/cli/run-command.js';
import { SystemdNotifier } from '../../src/cli/sd-notify.js';
import { createLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { waitFor } from '../helpers/wait.js';
import { startNotifyReceiver, type NotifyReceiver } from '../helpers/systemd-notify-receiver.js';

const UNIT = join(PACKAGE_ROOT, 'systemd/scan-gateway.service');
const unitText = readFileSync(UNIT, 'utf8');

function systemdAnalyze(args: string[], cwd: string): { status: number | null; out: string } {
  const r = spawnSync('systemd-analyze', args, { cwd, encoding: 'utf8' });
  if (r.error)
    throw new Error(
      `systemd-analyze is required for this test but could not be run (${r.error.message}); install it: apt-get install systemd`,
    );
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

/**
 * A copy of the unit whose ExecStart points at this machine's node and this checkout's daemon, so
 * `verify` (which checks that the binary exists) works wherever the tests run.
 */
function localCopy(): { dir: string; file: string } {
  const dir = mkdtempSync(join(tmpdir(), 'sg-unit-'));
  const file = join(dir, 'scan-gateway.service');
  const text = unitText.replace(
    /^ExecStart=\S+ ((?:--\S+ )*)\S+main\.js/m,
    `ExecStart=${process.execPath} $1${join(PACKAGE_ROOT, 'dist/src/main.js')}`,
  );
  expect(text).not.toBe(unitText);
  writeFileSync(file, text);
  return { dir, file };
}

const setting = (key: string) =>
  [...unitText.matchAll(new RegExp(`^${key}=(.*)$`, 'gm'))].map((m) => m[1]!.trim());

describe('systemd unit', () => {
  it('passes systemd-analyze verify', () => {
    const { dir, file } = localCopy();
    const r = systemdAnalyze(['verify', file], dir);
    expect(r.out.trim()).toBe('');
    expect(r.status).toBe(0);
  });

  it('has an exposure score of 1.6 or lower, and explains every remaining exposure', () => {
    const { dir, file } = localCopy();
    const r = systemdAnalyze(['security', '--offline=yes', '--no-pager', file], dir);
    const score = /Overall exposure level for scan-gateway\.service: (\d+\.\d)/.exec(r.out);
    expect(score, r.out).not.toBeNull();
    expect(Number(score![1])).toBeLessThanOrEqual(1.6);
    // The score the unit's comments state is the score systemd computes.
    expect(unitText).toContain(`rates this unit ${score![1]}`);
    const comments = unitText
      .split('\n')
      .filter((l) => l.startsWith('#'))
      .join('\n');
    const exposed = [...r.out.matchAll(/^✗ (\S+?)=/gm)].map((m) => m[1]!);
    expect(exposed.length).toBeGreaterThan(0);
    for (const name of exposed) {
      const key =
        name === 'RestrictAddressFamilies'
          ? /AF_UNIX|AF_INET/
          : name === 'RootDirectory'
            ? /RootDirectory/
            : new RegExp(name);
      expect(comments, `the unit should say why ${name} stays exposed`).toMatch(key);
    }
  });

  it('is a notify service with a watchdog, its own user, credentials and its hardening settings', () => {
    expect(setting('Type')).toEqual(['notify']);
    expect(setting('NotifyAccess')).toEqual(['main']);
    expect(setting('WatchdogSec')).toEqual(['30s']);
    // A daemon's young generation, V8 thread pool and malloc arenas (docs/performance.md "Footprint"), the same as `npm start`'s.
    const startScript = (
      JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as {
        scripts: Record<string, string>;
      }
    ).scripts['start'];
    expect(setting('ExecStart')[0]).toMatch(
      /^\/usr\/bin\/node --max-semi-space-size=2 --v8-pool-size=1 --heap-growing-percent=20 \S+main\.js run /,
    );
    expect(setting('Environment')).toEqual(['MALLOC_ARENA_MAX=2']);
    expect(startScript).toMatch(
      /^exec env MALLOC_ARENA_MAX=2 node --max-semi-space-size=2 --v8-pool-size=1 --heap-growing-percent=20 dist\/src\/main\.js run /,
    );
    expect(setting('User')).toEqual(['scan-gateway']);
    expect(setting('SupplementaryGroups')).toEqual(['dialout']);
    expect(setting('StateDirectory')).toEqual(['scan-gateway']);
    expect(setting('ConfigurationDirectory')).toEqual(['scan-gateway']);
    // The compile cache's home ($CACHE_DIRECTORY, read by src/main.ts).
    expect(setting('CacheDirectory')).toEqual(['scan-gateway']);
    expect(setting('LoadCredential')).toEqual([
      'client-secret:/etc/scan-gateway/client-secret',
      'admin-token:/etc/scan-gateway/admin-token',
    ]);
    // The gateway's own stop deadline is below systemd's.
    const stopSec = Number(/^(\d+)s$/.exec(setting('TimeoutStopSec')[0] ?? '')?.[1]);
    expect(stopSec * 1000).toBeGreaterThan(STOP_DEADLINE_MS);
    for (const [k, v] of [
      ['ProtectSystem', 'strict'],
      ['ProtectHome', 'yes'],
      ['PrivateTmp', 'yes'],
      ['NoNewPrivileges', 'yes'],
      ['RestrictAddressFamilies', 'AF_UNIX AF_INET AF_INET6'],
      ['DevicePolicy', 'closed'],
    ]) {
      expect(setting(k!), k).toEqual([v]);
    }
    expect(setting('SystemCallFilter')[0]).toBe('@system-service');
  });

  it('bounds files, tasks and memory, and does not restart into a loop on a bad config or an unusable buffer', () => {
    expect(setting('LimitNOFILE')).toEqual(['8192']);
    expect(setting('TasksMax')).toEqual(['64']);
    expect(setting('MemoryMax')).toEqual(['1G']);
    expect(setting('Restart')).toEqual(['on-failure']);
    // The exit codes of docs/cli.md that a restart cannot fix.
    expect(setting('RestartPreventExitStatus')).toEqual([
      `${ExitCodes.USAGE} ${ExitCodes.BUFFER_UNUSABLE} ${ExitCodes.UNSUPPORTED_RUNTIME}`,
    ]);
    const cli = readFileSync(join(PACKAGE_ROOT, 'docs/cli.md'), 'utf8');
    expect(cli).toMatch(/^\| 4 \| `run`: the buffer cannot be opened/m);
    expect(setting('DeviceAllow')).toEqual(['char-ttyUSB rw', 'char-ttyACM rw', 'char-ttyS rw']);
  });
});

describe('sd_notify over the notify socket', () => {
  let receiver: NotifyReceiver | undefined;
  afterEach(async () => {
    await receiver?.close();
    receiver = undefined;
  });

  const logs = () => {
    const lines: string[] = [];
    const stream = new Writable({
      write(c: Buffer, _e, done) {
        lines.push(c.toString());
        done();
      },
    });
    return { logger: createLogger({ destination: stream, format: 'json' }), lines };
  };

  it('sends READY, STATUS, WATCHDOG at half of WATCHDOG_USEC, and STOPPING as datagrams from this process, no helper started', async () => {
    receiver = await startNotifyReceiver(mkdtempSync(join(tmpdir(), 'sg-notify-')));
    const { logger, lines } = logs();
    // A helper that cannot run: the datagrams must not need it.
    const notifier = new SystemdNotifier({
      env: { NOTIFY_SOCKET: receiver.socket, WATCHDOG_USEC: '400000', WATCHDOG_PID: '4242' },
      pid: 4242,
      logger,
      command: '/nonexistent/systemd-notify',
    });
    expect(notifier.transport).toBe('datagram');
    expect(notifier.watchdogIntervalMs).toBe(200);
    expect(await notifier.ready('ok, inputs 2/2 up')).toBe(true);
    let n = 0;
    notifier.startWatchdog(() => `tick ${++n}\nsecond line`);
    await waitFor(
      () => receiver!.messages().filter((m) => m.startsWith('WATCHDOG=1')).length >= 2,
      { timeoutMs: 30_000 },
    );
    expect(await notifier.stopping('stopping on SIGTERM')).toBe(true);
    await waitFor(() => receiver!.messages().some((m) => m.startsWith('STOPPING=1')), {
      timeoutMs: 30_000,
    });
    const messages = receiver.messages();
    expect(messages[0]).toBe('READY=1|STATUS=ok, inputs 2/2 up');
    // A line break in a value would start a new variable: it is sent as a space.
    expect(messages).toContain('WATCHDOG=1|STATUS=tick 1 second line');
    expect(messages[messages.length - 1]).toBe('STOPPING=1|STATUS=stopping on SIGTERM');
    // The kernel says who sent each datagram: this process, the unit's main PID (NotifyAccess=main).
    expect(new Set(receiver.entries().map((e) => e.pid))).toEqual(new Set([process.pid]));
    const count = receiver.messages().length;
    await new Promise((r) => setTimeout(r, 500));
    expect(receiver.messages()).toHaveLength(count); // no watchdog after STOPPING
    expect(lines).toEqual([]);
  });

  it('reaches an abstract address (@name) through systemd-notify, and says once that this needs NotifyAccess=all', async () => {
    if (spawnSync('systemd-notify', ['--version'], { stdio: 'ignore' }).error) {
      throw new Error(
        'systemd-notify is required for this test but could not be run; install it: apt-get install systemd',
      );
    }
    receiver = await startNotifyReceiver('', `sg-notify-${process.pid}-${Date.now()}`);
    const { logger, lines } = logs();
    const notifier = new SystemdNotifier({
      env: { ...process.env, NOTIFY_SOCKET: receiver.socket },
      pid: 1,
      logger,
    });
    expect(notifier.transport).toBe('helper');
    expect(await notifier.ready('ok')).toBe(true);
    expect(await notifier.status('still ok')).toBe(true);
    const messages = receiver.messages().filter((m) => m !== 'BARRIER=1');
    expect(messages).toEqual(['READY=1|STATUS=ok', 'STATUS=still ok']);
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 40, socket: receiver.socket });
  });

  it('does nothing outside systemd, and keeps the watchdog for the main process only', async () => {
    const { logger, lines } = logs();
    const outside = new SystemdNotifier({
      env: { WATCHDOG_USEC: '400000' },
      pid: 1,
      logger,
      command: '/nonexistent/systemd-notify',
    });
    expect(outside.enabled).toBe(false);
    expect(outside.watchdogIntervalMs).toBeUndefined();
    expect(await outside.ready('x')).toBe(false);
    const otherPid = new SystemdNotifier({
      env: { NOTIFY_SOCKET: '/run/x', WATCHDOG_USEC: '400000', WATCHDOG_PID: '99' },
      pid: 1,
      logger,
    });
    expect(otherPid.watchdogIntervalMs).toBeUndefined();
    expect(lines).toEqual([]);
  });

  it('says so in the log when the notification cannot be sent', async () => {
    const { logger, lines } = logs();
    const broken = new SystemdNotifier({
      env: { NOTIFY_SOCKET: '/nonexistent/notify.sock' },
      pid: 1,
      logger,
    });
    expect(await broken.ready('x')).toBe(false);
    expect(lines.join('')).toContain('systemd notification failed');
    expect(JSON.parse(lines[0]!)).toMatchObject({
      notification: 'READY=1',
      reason: expect.stringContaining('/nonexistent/notify.sock'),
    });
    const tooLong = new SystemdNotifier({
      env: { NOTIFY_SOCKET: `/tmp/${'x'.repeat(120)}` },
      pid: 1,
      logger,
    });
    expect(await tooLong.ready('x')).toBe(false);
    expect(JSON.parse(lines[1]!)).toMatchObject({
      reason: expect.stringContaining('longer than 107 bytes'),
    });
  });
});
