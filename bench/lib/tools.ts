import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { track } from './child.js';
import { freePort, sleep } from './system.js';

/**
 * System tools some benchmarks drive for real: socat (a pseudo-terminal pair per serial scanner of
 * the example configuration) and mosquitto (the MQTT broker). A missing tool is an error with the
 * package to install, never a silent skip.
 */

/** A running helper process that the benchmark stops. */
export interface Tool {
  /** The process, when the tool is one (a server in this process has none). */
  child: ChildProcess | undefined;
  stop(): Promise<void>;
}

export function requireTool(
  command: string,
  args: string[],
  pkg: string,
  candidates: string[] = [],
): string {
  for (const path of [command, ...candidates]) {
    const probe = spawnSync(path, args, { stdio: 'ignore' });
    if (!probe.error) return path;
  }
  throw new Error(
    `${command} is required by this benchmark but could not be run; install it: apt-get install ${pkg}`,
  );
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
  await exited;
  clearTimeout(timer);
}

/** A pty pair: the gateway opens `device`; the other end stays open in socat. */
export async function startPty(dir: string, name: string): Promise<Tool & { device: string }> {
  requireTool('socat', ['-V'], 'socat');
  const device = join(dir, `${name}-dev`);
  const peer = join(dir, `${name}-peer`);
  const child = track(
    spawn('socat', [`pty,raw,echo=0,link=${device}`, `pty,raw,echo=0,link=${peer}`], {
      stdio: 'ignore',
    }),
  );
  const deadline = Date.now() + 5000;
  while (!(existsSync(device) && existsSync(peer))) {
    if (child.exitCode !== null)
      throw new Error(`socat exited with ${child.exitCode} before creating ${device}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`socat did not create ${device} within 5 s`);
    }
    await sleep(20);
  }
  return { child, device, stop: () => stopChild(child) };
}

/**
 * mosquitto on a free port of 127.0.0.1 with a temp configuration. `max_queued_messages 0` and
 * `max_inflight_messages 0` lift the per-client limits, without which mosquitto silently drops
 * QoS 1 messages under load.
 */
export async function startMosquitto(dir: string): Promise<Tool & { url: string; port: number }> {
  const binary = requireTool('mosquitto', ['-h'], 'mosquitto', ['/usr/sbin/mosquitto']);
  const port = await freePort();
  const conf = join(dir, 'mosquitto.conf');
  writeFileSync(
    conf,
    [
      `listener ${port} 127.0.0.1`,
      'allow_anonymous true',
      'persistence false',
      'max_queued_messages 0',
      'max_inflight_messages 0',
      'log_type error',
      '',
    ].join('\n'),
  );
  const child = track(spawn(binary, ['-c', conf], { stdio: ['ignore', 'ignore', 'pipe'] }));
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (t: string) => (stderr = (stderr + t).slice(-4000)));
  const deadline = Date.now() + 5000;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`mosquitto exited with ${child.exitCode}: ${stderr}`);
    const up = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (up) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`mosquitto did not listen on ${port} within 5 s: ${stderr}`);
    }
    await sleep(20);
  }
  return { child, port, url: `mqtt://127.0.0.1:${port}`, stop: () => stopChild(child) };
}
