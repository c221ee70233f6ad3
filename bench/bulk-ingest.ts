import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { buildApp } from '../src/app.js';
import { parseConfigText } from '../src/config/load.js';
import { silentLogger } from '../src/log.js';
import { judge, type BenchResult } from './lib/report.js';
import { freePort, median, sleep } from './lib/system.js';
import { acceptingUpstream } from './lib/accepting-upstream.js';

export interface BulkIngestBenchOptions {
  /** Seconds of probes alone (the ceiling), then the same with the bulk clients posting. */
  seconds: number;
  /** Clients posting bodies back to back. */
  clients: number;
  /** Reads in each body. */
  readsPerBody: number;
}

export const BULK_INGEST_DEFAULTS: BulkIngestBenchOptions = {
  seconds: 10,
  clients: 2,
  readsPerBody: 10_000,
};

/** The target: /healthz and a TCP reader's read-to-ACK within this at p99 beside the bulk posts, in ms. */
export const BULK_PROBE_TARGET_MS = 100;

const INGEST = 'bench-bulk-ingest-token-0123456789';
/** Between two probes (one /healthz and one TCP read each), ms. */
const PROBE_EVERY_MS = 10;

const api = acceptingUpstream;

/**
 * The probe and the bulk clients, each in a thread of its own: a client sharing the gateway's
 * event loop could neither send nor time an answer while the gateway holds the loop. The probe is
 * open loop on a fixed clock (a stall is counted in every probe it held) and plays two parts: a
 * monitor asking /healthz on a kept-alive connection, and a TCP reader (the gateway connects to it,
 * `mode: client`) that sends one read and times the ACK byte the gateway writes after its commit.
 */
const CLIENT_SCRIPT = `
const http = require('node:http');
const net = require('node:net');
const { parentPort, workerData: w } = require('node:worker_threads');
// The probe keeps up to 16 connections (within its address's share of 64), each probe a
// monitor's: one due while all 16 wait for answers waits in the agent, and that wait counts (its
// clock starts when it was due). One connection would measure a queue of probes due every 10 ms
// behind each answer, not the wait of one probe.
const agent = new http.Agent({ keepAlive: true, maxSockets: w.role === 'probe' ? 16 : Infinity });
const call = (path, method = 'GET', headers = {}, body) => new Promise((resolve) => {
  const started = performance.now();
  const req = http.request({ host: '127.0.0.1', port: w.port, path, method, agent, localAddress: w.from, headers: { host: '127.0.0.1:' + w.port, ...headers } }, (res) => {
    res.resume();
    res.on('end', () => resolve({ status: res.statusCode, ms: performance.now() - started }));
  });
  // A monitor gives up at last; the figure then holds the 60 s, and the note the failure.
  req.setTimeout(60000, () => req.destroy());
  req.on('error', () => resolve({ status: 0, ms: performance.now() - started }));
  req.end(body);
});
let stop = false;
parentPort.on('message', (m) => {
  if (m === 'stop') stop = true;
  else if (m && m.port) w.port = m.port;
});
if (w.role === 'probe') {
  // One reader for both phases: the gateway stays connected to it.
  let health = [];
  let acks = [];
  let failed = [];
  let socket;
  let sent = [];
  let n = 0;
  let timer;
  const server = net.createServer((s) => {
    socket = s;
    s.on('data', (chunk) => {
      for (const byte of chunk) {
        const at = sent.shift();
        if (at === undefined) continue;
        if (byte === 0x06) acks.push(performance.now() - at);
        else failed.push('tcp nak');
      }
    });
    s.on('error', () => {});
  });
  server.listen(w.tcpPort, '127.0.0.1', () => parentPort.postMessage({ listening: true }));
  const pending = new Set();
  parentPort.on('message', (m) => {
    if (m === 'connected?') parentPort.postMessage({ connected: socket !== undefined });
    if (m === 'start')
      timer = setInterval(() => {
        const h = call('/healthz').then((a) => {
          // A probe given up on (timed out) counts with its wait; a refused one only in the note.
          if (a.status === 200 || a.ms >= 59000) health.push(a.ms);
          if (a.status !== 200) failed.push('healthz ' + a.status);
        });
        pending.add(h);
        h.finally(() => pending.delete(h));
        if (socket) {
          sent.push(performance.now());
          socket.write('TCP-' + w.run + '-' + n++ + '\\r');
        } else failed.push('tcp not connected');
      }, w.everyMs);
    if (m === 'collect') {
      clearInterval(timer);
      const until = performance.now() + 30000;
      const wait = () => {
        if (sent.length > 0 && performance.now() < until) return void setTimeout(wait, 20);
        void Promise.all(pending).then(() => {
          failed.push(...sent.map(() => 'tcp read not acknowledged'));
          parentPort.postMessage({ health, acks, failed });
          health = []; acks = []; failed = []; sent = [];
        });
      };
      wait();
    }
  });
} else {
  const posts = [];
  const failed = [];
  let n = 0;
  const body = () => {
    const reads = [];
    for (let i = 0; i < w.reads; i++) reads.push({ code: 'BULK-' + w.run + '-' + w.client + '-' + n + '-' + i });
    n++;
    return JSON.stringify(reads);
  };
  (async () => {
    while (!stop) {
      const a = await call('/api/v1/reads', 'POST', { authorization: 'Bearer ' + w.token, 'content-type': 'application/json' }, body());
      if (a.status === 202) posts.push(a.ms);
      else { failed.push('post ' + a.status); await new Promise((r) => setTimeout(r, 1000)); }
    }
    parentPort.postMessage({ posts, failed });
    agent.destroy();
  })();
}
`;

interface ProbeResult {
  health: number[];
  acks: number[];
  failed: string[];
}

interface PosterResult {
  posts: number[];
  failed: string[];
}

/** A client thread: its next message, and its end (a poster's results once told to stop). */
function startWorker(data: Record<string, unknown>): {
  worker: Worker;
  next: <T>() => Promise<T>;
  stop: <T>() => Promise<T>;
} {
  const worker = new Worker(CLIENT_SCRIPT, { eval: true, workerData: data });
  const failed = new Promise<never>((_, reject) => worker.once('error', reject));
  failed.catch(() => {});
  const next = <T>() =>
    Promise.race([new Promise<T>((resolve) => worker.once('message', resolve)), failed]);
  return {
    worker,
    next,
    stop: async <T>() => {
      const result = next<T>();
      worker.postMessage('stop');
      try {
        return await result;
      } finally {
        await worker.terminate();
      }
    },
  };
}

const p99 = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0
    ? NaN
    : sorted[Math.min(sorted.length - 1, Math.ceil(0.99 * sorted.length) - 1)]!;
};

/**
 * Benchmark `bulk-ingest`: the real app (buildApp, HTTP ingest, a TCP input in client mode) while
 * `clients` clients post bodies of `readsPerBody` reads back to back, each again once answered.
 * Figures: `/healthz` p99 and a TCP reader's read-to-ACK p99 (a real socket, one read every 10 ms)
 * with the posts running; ceiling: the same probes with no post running, measured first in the same
 * run. Also the process RSS before and at its highest meanwhile.
 */
export async function benchBulkIngest(
  opts: BulkIngestBenchOptions = BULK_INGEST_DEFAULTS,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-bulk-'));
  const file = join(dir, 'config.yaml');
  const tcpPort = await freePort();
  const run = Date.now().toString(36);
  // The probe comes from another loopback address, as a monitor is another machine than the
  // posting MES: the posts' connections do not count against its share (maxConnectionsPerClient).
  const probe = startWorker({
    role: 'probe',
    from: '127.0.0.2',
    tcpPort,
    everyMs: PROBE_EVERY_MS,
    run,
  });
  await probe.next();
  const yaml = `site: { id: bench, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${join(dir, 'gw.db')} }
delivery: { mode: direct, maxBatchDelayMs: 20, statusPollMs: 30, statusPollMaxMs: 60 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A, duplicateWindowMs: 0 }
inputs:
  - { id: mes, type: http, dcp: EOL-3 }
  - { id: reader, type: tcp, mode: client, host: 127.0.0.1, port: ${tcpPort}, dcp: EOL-3, ackBytes: "\\x06", nakBytes: "\\x15" }
`;
  const app = buildApp(
    { file, config: parseConfigText(yaml, file), clientSecret: 'x' },
    { logger: silentLogger(), api, env: { SCAN_GATEWAY_INGEST_TOKEN: INGEST } },
  );
  await app.start();
  try {
    const port = Number(new URL(app.httpUrl!).port);
    probe.worker.postMessage({ port });
    for (let connected = false, tries = 0; !connected; tries++) {
      if (tries > 100) throw new Error('the gateway did not connect to the TCP reader within 10 s');
      await sleep(100);
      probe.worker.postMessage('connected?');
      connected = (await probe.next<{ connected: boolean }>()).connected;
    }
    const phase = async (): Promise<ProbeResult> => {
      probe.worker.postMessage('start');
      await sleep(opts.seconds * 1000);
      const result = probe.next<ProbeResult>();
      probe.worker.postMessage('collect');
      return result;
    };

    const rss = () => process.memoryUsage().rss / 2 ** 20;
    const rssBefore = rss();
    const ceiling = await phase();

    const posters = Array.from({ length: opts.clients }, (_, client) =>
      startWorker({
        role: 'post',
        from: '127.0.0.1',
        port,
        token: INGEST,
        reads: opts.readsPerBody,
        client,
        run,
      }),
    );
    // The posters' first bodies are on their way before the probes start.
    await sleep(500);
    const loop = monitorEventLoopDelay({ resolution: 1 });
    loop.enable();
    let rssPeak = rss();
    const peak = setInterval(() => (rssPeak = Math.max(rssPeak, rss())), 100);
    const under = await phase();
    loop.disable();
    clearInterval(peak);
    const bulk = await Promise.all(posters.map((p) => p.stop<PosterResult>()));
    await probe.worker.terminate();
    const posts = bulk.flatMap((b) => b.posts);

    const failures = [...ceiling.failed, ...under.failed, ...bulk.flatMap((b) => b.failed)];
    const note = (ms: number[], alone: number[]) =>
      `${ms.length} probes with the posts running (median ${median(ms).toFixed(1)} ms, max ${Math.max(...ms).toFixed(0)} ms), ${alone.length} alone (median ${median(alone).toFixed(1)} ms)`;
    const what = 'the same probes with no post running (same run)';
    return {
      id: 'bulk-ingest',
      title: `Probes and TCP reads beside ${opts.clients} clients posting ${opts.readsPerBody}-read bodies`,
      figures: [
        judge({
          name: `/healthz p99 while ${opts.clients} clients post ${opts.readsPerBody}-read bodies`,
          value: p99(under.health),
          unit: 'ms',
          ceiling: { value: p99(ceiling.health), what },
          targets: [{ kind: 'max', of: 'value', value: BULK_PROBE_TARGET_MS }],
          note: note(under.health, ceiling.health),
        }),
        judge({
          name: `TCP read-to-ACK p99 while ${opts.clients} clients post ${opts.readsPerBody}-read bodies`,
          value: p99(under.acks),
          unit: 'ms',
          ceiling: { value: p99(ceiling.acks), what },
          targets: [{ kind: 'max', of: 'value', value: BULK_PROBE_TARGET_MS }],
          note: note(under.acks, ceiling.acks),
        }),
      ],
      notes: [
        `${posts.length} bodies answered 202 in the run (median ${median(posts).toFixed(0)} ms, max ${Math.max(...posts).toFixed(0)} ms each)`,
        `the gateway's event loop delay while the posts ran: p99 ${(loop.percentile(99) / 1e6).toFixed(1)} ms, max ${(loop.max / 1e6).toFixed(1)} ms`,
        `RSS of the process (gateway and bench clients): ${rssBefore.toFixed(0)} MiB before, at most ${rssPeak.toFixed(0)} MiB while the posts ran`,
        ...(failures.length > 0
          ? [
              `probes not answered as expected: ${failures.slice(0, 5).join(', ')}${failures.length > 5 ? ` and ${failures.length - 5} more` : ''}`,
            ]
          : []),
      ],
    };
  } finally {
    await app.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
