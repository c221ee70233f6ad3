import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { buildApp } from '../src/app.js';
import { BufferStore } from '../src/buffer/store.js';
import { parseConfigText } from '../src/config/load.js';
import { silentLogger } from '../src/log.js';
import { freePort } from '../test/helpers/ports.js';
import { makeCa } from '../test/helpers/tls-ca.js';
import { judge, type BenchResult } from './lib/report.js';
import { median, sleep } from './lib/system.js';
import { fillBuffer } from './status.js';
import { acceptingUpstream } from './lib/accepting-upstream.js';

export interface ProbesBenchOptions {
  /** Seconds of probes and reads alone (the ceiling), then the same with the flood. */
  seconds: number;
  /** Connections that pipeline probes as fast as they can. */
  connections: number;
  /** Delivered scans in the buffer: what makes a status gather cost (about 8 ms a query at 380k). */
  scans: number;
}

export const PROBES_DEFAULTS: ProbesBenchOptions = { seconds: 10, connections: 8, scans: 380_000 };

/** The target: /healthz answers within this at p99 while the flood runs, in ms. */
export const PROBES_TARGET_MS = 100;

/** Between two probes of the monitor, and between two reads of the scanner, ms. */
const EVERY_MS = 20;

const api = acceptingUpstream;

/**
 * The clients, each a process of its own (the gateway's RSS is then this process's alone), started
 * with their settings in `W` and told to stop by a line on stdin; each prints its result as one
 * JSON line. The monitor probes /healthz on kept-alive TLS connections on a fixed clock (open
 * loop: a stall is counted in every probe it held; a probe never waits for a connection another
 * probe holds, so the wait measured is the gateway's, not the client's queue); the scanner sends a read over TCP on a fixed
 * clock and times each acknowledgement (sent after the commit); the flood keeps `connections`
 * TLS connections each pipelining /healthz, /readyz and /api/v1/ha/leader as fast as the server
 * reads them, connecting again whenever the server closes one.
 */
/**
 * Where the flood comes from: an address nobody listed (a client on the plant network, the
 * issue's attacker), then the loopback, which is trusted (its connections are never refused for a
 * cooldown: the gateway's own probes may share it).
 */
const FLOOD_FROM = [
  { phase: 'flood', from: '127.0.0.3', what: 'from an unlisted address' },
  { phase: 'flood-loopback', from: '127.0.0.1', what: 'from the loopback (trusted)' },
] as const;

const CLIENT_SCRIPT = `
const w = JSON.parse(process.env.W);
const tls = require('node:tls');
const https = require('node:https');
const net = require('node:net');
let stop = false;
const done = [];
process.stdin.on('data', () => { stop = true; Promise.all(done.map((f) => f())).then((r) => { process.stdout.write(JSON.stringify(Object.assign({}, ...r)) + '\\n'); process.exit(0); }); });
if (w.role === 'monitor') {
  const agent = new https.Agent({ keepAlive: true, maxSockets: Infinity, ca: w.ca, servername: 'localhost' });
  const ms = [], failed = [], fresh = [];
  const pending = new Set();
  const timer = setInterval(() => {
    if (stop) return;
    const started = performance.now();
    const p = new Promise((resolve) => {
      const req = https.request({ host: '127.0.0.1', localAddress: '127.0.0.2', port: w.port, path: '/healthz', agent, headers: { host: '127.0.0.1:' + w.port } }, (res) => {
        res.resume();
        res.on('end', () => { if (res.statusCode === 200) { ms.push(performance.now() - started); fresh.push(!req.reusedSocket); } else failed.push(String(res.statusCode)); resolve(); });
      });
      req.on('error', (e) => { failed.push(e.code || e.message); resolve(); });
      req.end();
    });
    pending.add(p); p.finally(() => pending.delete(p));
  }, w.everyMs);
  done.push(async () => { clearInterval(timer); await Promise.all(pending); return { ms, failed, fresh }; });
} else if (w.role === 'scanner') {
  const ms = [], failed = [];
  const sent = [];
  let n = 0;
  const s = net.connect(w.port, '127.0.0.1');
  s.on('data', (d) => { for (const b of d) if (b === 6) { const t = sent.shift(); if (t !== undefined) ms.push(performance.now() - t); } else failed.push('byte ' + b); });
  s.on('error', (e) => failed.push(e.code || e.message));
  const timer = setInterval(() => { if (stop) return; sent.push(performance.now()); s.write('PROBE-' + w.phase + '-' + n++ + '\\r'); }, w.everyMs);
  done.push(async () => { clearInterval(timer); const until = Date.now() + 5000; while (sent.length > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20)); s.destroy(); return { ms, failed, unacked: sent.length }; });
} else {
  try { require('node:os').setPriority(0, 19); } catch {}
  const counts = { ok: 0, refused: 0, other: 0, connections: 0, handshakes: 0 };
  const paths = ['/healthz', '/readyz', '/api/v1/ha/leader'];
  const batch = (k) => { let t = ''; for (let i = 0; i < k; i++) t += 'GET ' + paths[i % 3] + ' HTTP/1.1\\r\\nHost: 127.0.0.1:' + w.port + '\\r\\n\\r\\n'; return t; };
  const chunk = batch(500);
  const open = () => {
    if (stop) return;
    counts.connections++;
    let sent = 0, answered = 0, carry = '';
    const s = tls.connect({ host: '127.0.0.1', localAddress: w.from, port: w.port, ca: w.ca, servername: 'localhost' }, () => { counts.handshakes++; s.write(batch(1000)); sent += 1000; });
    s.on('data', (d) => {
      const text = carry + d.toString('latin1');
      for (const m of text.matchAll(/HTTP\\/1\\.1 (\\d{3}) /g)) { answered++; m[1] === '200' || m[1] === '503' ? counts.ok++ : m[1] === '429' ? counts.refused++ : counts.other++; }
      carry = text.slice(-16);
      if (!stop && sent - answered < 500) { s.write(chunk); sent += 500; }
    });
    s.on('error', () => {});
    s.on('close', () => setImmediate(open));
  };
  for (let i = 0; i < w.connections; i++) open();
  done.push(async () => counts);
}
`;

function startClient<T>(data: Record<string, unknown>): { stop: () => Promise<T> } {
  const child: ChildProcess = spawn(process.execPath, ['-e', CLIENT_SCRIPT], {
    env: { ...process.env, W: JSON.stringify(data) },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    stop: async () => {
      child.stdin!.write('stop\n');
      await exited;
      return JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as T;
    },
  };
}

const p99 = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0
    ? NaN
    : sorted[Math.min(sorted.length - 1, Math.ceil(0.99 * sorted.length) - 1)]!;
};
const mib = (bytes: number) => Math.round(bytes / 1024 / 1024);

interface FloodCounts {
  ok: number;
  refused: number;
  other: number;
  /** Connections tried, each one TCP connect. */
  connections: number;
  /** Of them, TLS handshakes finished (the rest were closed at accept). */
  handshakes: number;
}

interface Timed {
  ms: number[];
  failed: string[];
  /** Monitor: whether each probe of `ms` opened a new connection (its TLS handshake inside). */
  fresh?: boolean[];
  unacked?: number;
}

/**
 * Where a probe's tail comes from: of the slowest 1 %, how many opened a new connection (a probe
 * due while the others are in flight opens one, and its handshake takes several turns of the
 * gateway's loop), and the p99 of the probes on kept-alive connections.
 */
function tailNote(t: Timed): string {
  const all = t.ms.map((ms, i) => ({ ms, fresh: t.fresh?.[i] ?? false }));
  const slowest = [...all].sort((a, b) => b.ms - a.ms).slice(0, Math.ceil(all.length / 100));
  const kept = all.filter((p) => !p.fresh).map((p) => p.ms);
  return `${all.length - kept.length} of ${all.length} probes on a new connection, ${slowest.filter((p) => p.fresh).length} of the slowest ${slowest.length}; p99 on kept-alive connections ${p99(kept).toFixed(1)} ms`;
}

/**
 * Benchmark `probes`: the real app (buildApp) over TLS on a buffer of `scans` delivered scans, with
 * a TCP input that acknowledges each read after its commit. A monitor probes /healthz every 20 ms
 * and a scanner sends a read every 20 ms, first alone (the ceiling), then while `connections` TLS
 * connections pipeline probes as fast as they can: from an unlisted address, then from the
 * loopback ({@link FLOOD_FROM}). Figures: /healthz p99 and read-to-commit p99
 * (the scanner's send to its acknowledgement) under each flood; notes: the flood's answers and
 * refusals, the event loop delay, the gateway's RSS (this process: the clients run apart).
 */
export async function benchProbes(
  opts: ProbesBenchOptions = PROBES_DEFAULTS,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-probes-'));
  const ca = makeCa(dir, 'bench');
  const leaf = ca.issue('gw', { serial: 0x42, kind: 'server', days: 3 });
  const buffer = join(dir, 'gw.db');
  const store = BufferStore.openAt(buffer);
  try {
    fillBuffer(store, { scans: opts.scans, batchScans: 100, rejected: 1000, calls: 0 });
  } finally {
    store.close();
  }
  const tcpPort = await freePort();
  const file = join(dir, 'config.yaml');
  const yaml = `site: { id: bench, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${buffer}, retentionDays: 3650 }
delivery: { mode: direct, maxBatchDelayMs: 20, statusPollMs: 30, statusPollMaxMs: 60 }
http:
  listen: 127.0.0.1:0
  tls: { certFile: ${leaf.certFile}, keyFile: ${leaf.keyFile} }
dcps:
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A, duplicateWindowMs: 0 }
inputs:
  - { id: scanner, type: tcp, mode: server, host: 127.0.0.1, port: ${tcpPort}, dcp: EOL-3, ackBytes: "\\x06" }
`;
  const app = buildApp(
    { file, config: parseConfigText(yaml, file), clientSecret: 'x' },
    { logger: silentLogger(), api },
  );
  await app.start();
  try {
    const port = Number(new URL(app.httpUrl!).port);
    const phase = async (name: string, floodFrom?: string) => {
      const flooders = floodFrom
        ? startClient<FloodCounts>({
            role: 'flood',
            port,
            ca: ca.pem,
            connections: opts.connections,
            from: floodFrom,
          })
        : undefined;
      if (flooders) await sleep(500);
      const rssBefore = process.memoryUsage().rss;
      const loop = monitorEventLoopDelay({ resolution: 1 });
      loop.enable();
      const monitor = startClient<Timed>({ role: 'monitor', port, ca: ca.pem, everyMs: EVERY_MS });
      const scanner = startClient<Timed>({
        role: 'scanner',
        port: tcpPort,
        everyMs: EVERY_MS,
        phase: name,
      });
      let rssMax = rssBefore;
      const until = Date.now() + opts.seconds * 1000;
      while (Date.now() < until) {
        await sleep(250);
        rssMax = Math.max(rssMax, process.memoryUsage().rss);
      }
      const [health, reads] = [await monitor.stop(), await scanner.stop()];
      const floodCounts = await flooders?.stop();
      loop.disable();
      return {
        health,
        reads,
        floodCounts,
        loopP99: loop.percentile(99) / 1e6,
        loopMax: loop.max / 1e6,
        rssBefore,
        rssMax,
        rssAfter: process.memoryUsage().rss,
      };
    };
    const alone = await phase('alone');
    const floods = [];
    for (const f of FLOOD_FROM) floods.push({ ...f, result: await phase(f.phase, f.from) });
    const failures = [alone, ...floods.map((f) => f.result)].flatMap((r) => [
      ...r.health.failed,
      ...r.reads.failed,
    ]);
    const unacked = floods.reduce((a, f) => a + (f.result.reads.unacked ?? 0), 0);
    const note = (ms: number[], base: number[]) =>
      `${ms.length} with the flood (median ${median(ms).toFixed(1)} ms, max ${Math.max(...ms).toFixed(0)} ms), ${base.length} alone (median ${median(base).toFixed(1)} ms)`;
    return {
      id: 'probes',
      title: `Probes and intake while ${opts.connections} connections pipeline probes`,
      figures: floods.flatMap(({ what, result }) => [
        judge({
          name: `/healthz p99 while ${opts.connections} TLS connections pipeline probes ${what}`,
          value: p99(result.health.ms),
          unit: 'ms',
          ceiling: {
            value: p99(alone.health.ms),
            what: 'the same probes with no flood (same run)',
          },
          targets: [{ kind: 'max', of: 'value', value: PROBES_TARGET_MS }],
          note: `${note(result.health.ms, alone.health.ms)}; ${tailNote(result.health)} (alone: ${tailNote(alone.health)})`,
        }),
        judge({
          name: `read-to-commit p99 (TCP read to its ack) while ${opts.connections} connections pipeline probes ${what}`,
          value: p99(result.reads.ms),
          unit: 'ms',
          ceiling: { value: p99(alone.reads.ms), what: 'the same reads with no flood (same run)' },
          targets: [{ kind: 'max', of: 'value', value: PROBES_TARGET_MS }],
          note: note(result.reads.ms, alone.reads.ms),
        }),
      ]),
      notes: [
        `buffer of ${opts.scans.toLocaleString('en-US')} delivered scans; default http.limits (maxRequestsPerConnectionPerSecond 100); the flood's clients run at niceness 19 in a process of their own; ${opts.seconds} s per phase`,
        ...floods.flatMap(({ what, result: r }) => {
          const f = r.floodCounts ?? { ok: 0, refused: 0, other: 0, connections: 0, handshakes: 0 };
          return [
            `flood ${what}: ${f.ok} probes answered, ${f.refused} connections cut with 429, ${f.other} other answers; ${f.connections} TLS connections tried, ${f.handshakes} handshakes finished; the gateway's event loop delay p99 ${r.loopP99.toFixed(1)} ms, max ${r.loopMax.toFixed(0)} ms (alone: p99 ${alone.loopP99.toFixed(1)} ms)`,
            `RSS of the gateway's process, flood ${what}: ${mib(r.rssBefore)} MiB as it began, at most ${mib(r.rssMax)} MiB during it, ${mib(r.rssAfter)} MiB after (${mib(alone.rssBefore)} MiB before any flood)`,
          ];
        }),
        ...(failures.length > 0 || unacked > 0
          ? [
              `not answered as expected: ${failures.slice(0, 5).join(', ')}${failures.length > 5 ? ` and ${failures.length - 5} more` : ''}; reads unacknowledged at the end: ${unacked}`,
            ]
          : []),
      ],
    };
  } finally {
    await app.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
