import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { spawn, type ChildProcess } from 'node:child_process';
import { buildApp } from '../src/app.js';
import { parseConfigText } from '../src/config/load.js';
import { silentLogger } from '../src/log.js';
import { acceptingUpstream } from './lib/accepting-upstream.js';
import { judge, type BenchResult, type Figure } from './lib/report.js';
import { freePort, percentile, sleep } from './lib/system.js';
import { requireTool } from './lib/tools.js';

export interface VerdictBenchOptions {
  /** Reads each scanner sends, one at a time (each after the answer to the one before). */
  reads: number;
  /** Pause between an answer and the next read, in ms (an operator takes about a second). */
  gapMs: number;
}

export const VERDICT_DEFAULTS: VerdictBenchOptions = { reads: 600, gapMs: 5 };

/** The target: a read's last byte to its ACK or NAK on the scanner's wire, at p99, in ms. */
export const VERDICT_TARGET_MS = 50;

/**
 * The scanners, in a thread of their own so that their clock runs while the gateway holds its
 * loop: a TCP reader connecting to the gateway (server mode), and handhelds on real ptys (socat
 * `pty,link=… STDIO`: what the thread writes to socat's stdin arrives at the pty, what is written
 * to the pty comes out of socat's stdout). Each read is sent whole, terminator included, and timed
 * from that write to the first answer byte.
 */
const SCANNER_SCRIPT = `
const net = require('node:net');
const { spawn } = require('node:child_process');
const { parentPort, workerData: w } = require('node:worker_threads');
const ptys = {};
// wait-slave: socat relays only once the port is opened (a socat left a while with nobody on the
// pty held back the first answer after it was).
const listeners = {};
for (const name of w.ptys) {
  const child = spawn('socat', ['pty,raw,echo=0,wait-slave,link=' + w.dir + '/' + name, 'STDIO'], { stdio: ['pipe', 'pipe', 'ignore'] });
  ptys[name] = child;
  child.stdout.on('data', (c) => { const l = listeners[name]; listeners[name] = undefined; if (l) l(c); });
}
async function timed(write, on, frames, gapMs) {
  const ms = [];
  const answers = {};
  for (const frame of frames) {
    const answer = new Promise((resolve) => on((chunk) => resolve(chunk)));
    const started = performance.now();
    write(Buffer.from(frame, 'latin1'));
    const chunk = await Promise.race([answer, new Promise((r) => setTimeout(() => r(null), 10000))]);
    if (chunk === null) throw new Error('no answer within 10 s to ' + JSON.stringify(frame));
    ms.push(performance.now() - started);
    const a = chunk.toString('latin1').slice(0, 1) === '\\x06' ? 'ack' : 'nak';
    answers[a] = (answers[a] || 0) + 1;
    await new Promise((r) => setTimeout(r, gapMs));
  }
  return { ms, answers };
}
parentPort.on('message', async (m) => {
  try {
    if (m.kind === 'tcp') {
      const socket = net.createConnection({ host: '127.0.0.1', port: m.port });
      await new Promise((resolve, reject) => { socket.once('connect', resolve); socket.once('error', reject); });
      socket.setNoDelay(true);
      let listener;
      socket.on('data', (c) => { const l = listener; listener = undefined; if (l) l(c); });
      const result = await timed((b) => socket.write(b), (l) => (listener = l), m.frames, w.gapMs);
      socket.destroy();
      parentPort.postMessage(result);
    } else if (m.kind === 'pty') {
      const child = ptys[m.name];
      const result = await timed((b) => child.stdin.write(b), (l) => (listeners[m.name] = l), m.frames, w.gapMs);
      parentPort.postMessage(result);
    } else if (m.kind === 'stop') {
      for (const c of Object.values(ptys)) c.kill('SIGTERM');
      parentPort.postMessage({ stopped: true });
    }
  } catch (err) {
    parentPort.postMessage({ error: String(err && err.message || err) });
  }
});
parentPort.postMessage({ ready: true });
`;

interface Timed {
  ms: number[];
  answers: Record<string, number>;
  error?: string;
}

/**
 * What a station scans: a module label, then its 12 cells, with a cell scanned before any module
 * and one with a wrong check digit now and then: answers are ACKs and NAKs as on the line.
 */
function stationFrames(n: number, wrap: (code: string) => string, station: string): string[] {
  const frames: string[] = [];
  for (let i = 0; frames.length < n; i++) {
    frames.push(wrap(`]d20104012345678904${'21'}${station}-BAD-${i}`)); // wrong check digit: NAK
    frames.push(wrap(`MOD-${station}-${i}`)); // the module: ACK
    for (let c = 0; c < 12; c++)
      frames.push(wrap(`]d20104012345678901${'21'}${station}-${i}-${c}`));
    frames.push(wrap(`]d20104012345678901${'21'}${station}-${i}-LATE`)); // module closed (closeAfter 12): NAK
  }
  return frames.slice(0, n);
}

/**
 * Benchmark `verdict`: the time from a read's last byte to the ACK or NAK on the scanner's wire,
 * with `ackOn: verdict`, through the real app (buildApp, SQLite buffer, mapping with containers):
 * a TCP reader connected to a server-mode input, and a handheld on a real pty. Ceiling: the same
 * reads answered by an echo with no gateway processing (a TCP server and a serial port on a pty
 * that write the ACK at the terminator), measured in the same run.
 */
export async function benchVerdict(
  opts: VerdictBenchOptions = VERDICT_DEFAULTS,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  requireTool('socat', ['-V'], 'socat');
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-verdict-'));
  const worker = new Worker(SCANNER_SCRIPT, {
    eval: true,
    workerData: { dir, ptys: ['gw', 'echo'], gapMs: opts.gapMs },
  });
  const next = <T>(): Promise<T & { error?: string }> =>
    new Promise((resolve) => worker.once('message', resolve));
  const ask = async (message: unknown): Promise<Timed> => {
    const answer = next<Timed>();
    worker.postMessage(message);
    const result = await answer;
    if (result.error) throw new Error(result.error);
    return result;
  };
  await next();
  await waitForPath(join(dir, 'gw'));
  await waitForPath(join(dir, 'echo'));
  const tcpPort = await freePort();
  const echoPort = await freePort();
  const yaml = `site: { id: bench, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${join(dir, 'gw.db')} }
delivery: { mode: direct, maxBatchDelayMs: 20, statusPollMs: 30, statusPollMaxMs: 60 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: ST-10, kind: endOfProcess, productModelKey: MOD-A }
  - { key: ST-20, kind: endOfProcess, productModelKey: MOD-A }
inputs:
  - { id: st10, type: tcp, mode: server, host: 127.0.0.1, port: ${tcpPort}, dcp: ST-10, framing: stxEtx, etx: "\\r", ackOn: verdict, ackBytes: "\\x06", nakBytes: "\\x15" }
  - { id: st20, type: serial, path: ${join(dir, 'gw')}, dcp: ST-20, ackOn: verdict, ackBytes: "\\x06", nakBytes: "\\x15" }
containers:
  - { name: module, open: { regex: "^MOD-" }, closeAfter: 12 }
rules:
  - { name: modules, match: { regex: "^MOD-" } }
  - { name: cells, match: { gs1: true }, requireContainer: module }
`;
  const file = join(dir, 'config.yaml');
  const app = buildApp(
    { file, config: parseConfigText(yaml, file), clientSecret: 'x' },
    { logger: silentLogger(), api: acceptingUpstream },
  );
  let echoServer: Server | undefined;
  let echoChild: ChildProcess | undefined;
  try {
    // The ceilings first, with the gateway not started: an echo that answers at the terminator.
    // The pty's echo: a shell loop on the port's side, answering each CR at once (socat relays it).
    const script = join(dir, 'echo.sh');
    writeFileSync(
      script,
      `#!/bin/bash\nwhile IFS= read -r -d $'\\r' line; do printf '\\006'; done\n`,
      {
        mode: 0o755,
      },
    );
    echoChild = spawn('socat', [`OPEN:${join(dir, 'echo')},raw,echo=0`, `EXEC:${script}`], {
      stdio: 'ignore',
    });
    // socat (wait-slave) looks for its pty opened once a second, and opening it flushes the line.
    await sleep(1500);
    echoServer = createServer((s) => {
      s.setNoDelay(true);
      s.on('data', (c: Buffer) => {
        if (c.includes(0x0d)) s.write('\x06');
      });
    });
    await new Promise<void>((resolve) => echoServer!.listen(echoPort, '127.0.0.1', resolve));
    const stx = (code: string) => `\x02${code}\r\n`;
    const cr = (code: string) => `${code}\r`;
    const tcpEcho = await ask({
      kind: 'tcp',
      port: echoPort,
      frames: stationFrames(opts.reads, stx, 'E10'),
    });
    const ptyEcho = await ask({
      kind: 'pty',
      name: 'echo',
      frames: stationFrames(opts.reads, cr, 'E20'),
    });

    await app.start();
    await sleep(1500);
    const tcp = await ask({
      kind: 'tcp',
      port: tcpPort,
      frames: stationFrames(opts.reads, stx, 'ST10'),
    });
    const pty = await ask({
      kind: 'pty',
      name: 'gw',
      frames: stationFrames(opts.reads, cr, 'ST20'),
    });

    const figures = (what: string, r: Timed, ceiling: Timed): Figure[] => {
      const sorted = [...r.ms].sort((a, b) => a - b);
      const c = [...ceiling.ms].sort((a, b) => a - b);
      const round = (x: number) => Math.round(x * 100) / 100;
      return [
        judge({
          name: `${what}: read to verdict, p50`,
          value: round(percentile(sorted, 50)),
          unit: 'ms',
          ceiling: {
            value: round(percentile(c, 50)),
            what: `an echo on the same ${what} (no gateway)`,
          },
        }),
        judge({
          name: `${what}: read to verdict, p99`,
          value: round(percentile(sorted, 99)),
          unit: 'ms',
          ceiling: {
            value: round(percentile(c, 99)),
            what: `an echo on the same ${what} (no gateway)`,
          },
          targets: [{ kind: 'max', of: 'value', value: VERDICT_TARGET_MS }],
          note: `${r.ms.length} reads (${r.answers.ack ?? 0} ACK, ${r.answers.nak ?? 0} NAK), max ${round(sorted[sorted.length - 1] ?? NaN)} ms`,
        }),
      ];
    };
    return {
      id: 'verdict',
      title: 'The scanner hears the verdict: read to ACK/NAK (ackOn: verdict)',
      figures: [...figures('TCP socket', tcp, tcpEcho), ...figures('pty', pty, ptyEcho)],
      notes: [
        `one read at a time, ${opts.gapMs} ms after the answer to the one before; module labels, cells, wrong check digits and cells after the module closed, so both ACKs and NAKs are timed`,
      ],
    };
  } finally {
    await app.stop().catch(() => undefined);
    echoServer?.close();
    echoChild?.kill('SIGTERM');
    worker.postMessage({ kind: 'stop' });
    await next().catch(() => undefined);
    await worker.terminate();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function waitForPath(path: string): Promise<void> {
  const { existsSync } = await import('node:fs');
  const deadline = Date.now() + 10_000;
  while (!existsSync(path)) {
    if (Date.now() > deadline) throw new Error(`socat did not create ${path} within 10 s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
