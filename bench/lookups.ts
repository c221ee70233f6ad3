import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { buildApp } from '../src/app.js';
import { parseConfigText } from '../src/config/load.js';
import { silentLogger } from '../src/log.js';
import { judge, type BenchResult } from './lib/report.js';
import { median, nowMs, sleep } from './lib/system.js';
import { acceptingUpstream } from './lib/accepting-upstream.js';

export interface LookupsBenchOptions {
  /** Seconds of probes alone (the ceiling), then the same with the lookups running. */
  seconds: number;
  /**
   * Clients asking for the wide item at once, each again as soon as answered; when refused, after
   * Retry-After and up to as long again at random, as people and scripts retry: refused together,
   * all would otherwise come back in the same millisecond each second, a herd that measures the
   * clients' clock, not the lookups.
   */
  clients: number;
}

export const LOOKUPS_DEFAULTS: LookupsBenchOptions = { seconds: 10, clients: 100 };

/** The target: /healthz and ingest answer within this at p99 while the lookups run, in ms. */
export const PROBE_TARGET_MS = 50;

const INGEST = 'bench-lookups-ingest-token-0123456789';
const MODULES = 200;
const CELLS = 45;
/** Between two probes (one /healthz and one ingest POST each), ms. */
const PROBE_EVERY_MS = 10;

const api = acceptingUpstream;

/**
 * The probe and the lookup clients, each in a thread of its own: a client sharing the gateway's
 * event loop could not send, nor time an answer, while the gateway holds the loop. The probe fires
 * on a fixed clock (open loop: a slow answer does not delay the next probe, so a stall is counted
 * in every probe it held, not once), each on a kept-alive connection as a monitor's would be. The
 * probe comes from another loopback address (127.0.0.2), as a monitor and a line's MES are other
 * machines than a person's browser: the lookups' 100 connections are over their address's share
 * (`maxConnectionsPerClient`), and the share, not the lookups, would then decide the probes' wait.
 */
const CLIENT_SCRIPT = `
const http = require('node:http');
const { parentPort, workerData: w } = require('node:worker_threads');
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
const call = (path, method = 'GET', headers = {}, body) => new Promise((resolve) => {
  const started = performance.now();
  const req = http.request({ host: '127.0.0.1', port: w.port, path, method, agent, localAddress: w.from, headers: { host: '127.0.0.1:' + w.port, ...headers } }, (res) => {
    let bytes = 0;
    res.on('data', (c) => (bytes += c.length));
    res.on('end', () => resolve({ status: res.statusCode, ms: performance.now() - started, bytes, retryAfter: Number(res.headers['retry-after'] ?? 0) }));
  });
  req.on('error', () => resolve({ status: 0, ms: performance.now() - started, bytes: 0, retryAfter: 1 }));
  req.end(body);
});
let stop = false;
parentPort.once('message', () => (stop = true));
if (w.role === 'probe') {
  const health = [];
  const ingest = [];
  const failed = [];
  let n = 0;
  const pending = new Set();
  const timer = setInterval(() => {
    if (stop) {
      clearInterval(timer);
      Promise.all(pending).then(() => { parentPort.postMessage({ health, ingest, failed }); agent.destroy(); });
      return;
    }
    const h = call('/healthz').then((a) => (a.status === 200 ? health.push(a.ms) : failed.push('healthz ' + a.status)));
    const body = JSON.stringify([{ code: 'PROBE-' + w.phase + '-' + n++ }]);
    const p = call('/api/v1/reads', 'POST', { authorization: 'Bearer ' + w.token, 'content-type': 'application/json' }, body)
      .then((a) => (a.status === 202 ? ingest.push(a.ms) : failed.push('ingest ' + a.status)));
    for (const x of [h, p]) { pending.add(x); x.finally(() => pending.delete(x)); }
  }, w.everyMs);
} else {
  // The lookups' clients stand for other machines (browsers, scripts): here they share the
  // gateway's two cores, so they yield them to it, or the bench would measure its own clients.
  try { require('node:os').setPriority(0, 19); } catch {}
  const counts = { ok: 0, busy: 0, other: 0, okMs: [] };
  const client = async () => {
    while (!stop) {
      const a = await call('/api/v1/items/' + w.item);
      if (a.status === 200) { counts.ok++; counts.okMs.push(a.ms); }
      else if (a.status === 429) { counts.busy++; await new Promise((r) => setTimeout(r, (a.retryAfter || 1) * 1000 * (1 + Math.random()))); }
      else { counts.other++; await new Promise((r) => setTimeout(r, 1000 * (1 + Math.random()))); }
    }
  };
  Promise.all(Array.from({ length: w.clients }, client)).then(() => { parentPort.postMessage(counts); agent.destroy(); });
}
`;

interface ProbeResult {
  health: number[];
  ingest: number[];
  failed: string[];
}

interface LookupCounts {
  ok: number;
  busy: number;
  other: number;
  okMs: number[];
}

function startClient<T>(data: Record<string, unknown>): { stop: () => Promise<T> } {
  const worker = new Worker(CLIENT_SCRIPT, { eval: true, workerData: data });
  const result = new Promise<T>((resolve, reject) => {
    worker.once('message', (m: T) => resolve(m));
    worker.once('error', reject);
  });
  return {
    stop: async () => {
      worker.postMessage('stop');
      try {
        return await result;
      } finally {
        await worker.terminate();
      }
    },
  };
}

/** One request from this thread (the fill and the single lookups, when nothing else runs). */
function call(
  port: number,
  path: string,
  method = 'GET',
  body?: string,
): Promise<{ status: number; ms: number; bytes: number }> {
  const started = nowMs();
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${INGEST}` },
      },
      (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => (bytes += c.length));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: nowMs() - started, bytes }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const p99 = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0
    ? NaN
    : sorted[Math.min(sorted.length - 1, Math.ceil(0.99 * sorted.length) - 1)]!;
};

/**
 * Benchmark `lookups`: the real app (buildApp, HTTP ingest, default `http.limits`) with one wide
 * item (W0: 200 modules of 45 cells, 9,201 reads through ingest); `clients` clients ask for its
 * trace at once and again as soon as answered, while a probe sends a /healthz and an ingest POST
 * every 10 ms. Figures: the probes' p99 with the lookups running; ceiling: the same probes with
 * no lookup running, measured first in the same run.
 */
export async function benchLookups(
  opts: LookupsBenchOptions = LOOKUPS_DEFAULTS,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-lookups-'));
  const file = join(dir, 'config.yaml');
  const yaml = `site: { id: bench, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${join(dir, 'gw.db')} }
delivery: { mode: direct, maxBatchDelayMs: 20, statusPollMs: 30, statusPollMaxMs: 60 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A, duplicateWindowMs: 0 }
inputs:
  - { id: mes, type: http, dcp: EOL-3 }
`;
  const app = buildApp(
    { file, config: parseConfigText(yaml, file), clientSecret: 'x' },
    { logger: silentLogger(), api, env: { SCAN_GATEWAY_INGEST_TOKEN: INGEST } },
  );
  await app.start();
  try {
    const port = Number(new URL(app.httpUrl!).port);
    const reads: { code: string; parents?: string[] }[] = [{ code: 'W0' }];
    for (let m = 0; m < MODULES; m++) {
      reads.push({ code: `M-${m}`, parents: ['W0'] });
      for (let c = 0; c < CELLS; c++) reads.push({ code: `C-${m}-${c}`, parents: [`M-${m}`] });
    }
    for (let i = 0; i < reads.length; i += 2000) {
      const a = await call(port, '/api/v1/reads', 'POST', JSON.stringify(reads.slice(i, i + 2000)));
      if (a.status !== 202) throw new Error(`the fill's ingest answered ${a.status}`);
    }
    const deadline = nowMs() + 60_000;
    while (app.status().buffer.undeliveredScans > 0) {
      if (nowMs() > deadline) throw new Error('the fill was not delivered within 60 s');
      await sleep(50);
    }
    const singles: number[] = [];
    let answerBytes = 0;
    for (let i = 0; i < 5; i++) {
      const a = await call(port, '/api/v1/items/W0');
      if (a.status !== 200) throw new Error(`a single lookup answered ${a.status}`);
      singles.push(a.ms);
      answerBytes = a.bytes;
    }

    const loop = monitorEventLoopDelay({ resolution: 1 });
    const probe = (phase: string) =>
      startClient<ProbeResult>({
        role: 'probe',
        from: '127.0.0.2',
        port,
        token: INGEST,
        everyMs: PROBE_EVERY_MS,
        phase,
      });
    const alone = probe('alone');
    await sleep(opts.seconds * 1000);
    const ceiling = await alone.stop();

    const lookups = startClient<LookupCounts>({
      role: 'lookups',
      from: '127.0.0.1',
      port,
      clients: opts.clients,
      item: 'W0',
    });
    // The clients' first burst lands before the probes start: they meet a full queue from the first one.
    await sleep(200);
    loop.enable();
    const loaded = probe('loaded');
    await sleep(opts.seconds * 1000);
    const under = await loaded.stop();
    loop.disable();
    const counts = await lookups.stop();

    const failures = [...ceiling.failed, ...under.failed];
    const walKiB = (() => {
      try {
        return Math.round(statSync(join(dir, 'gw.db-wal')).size / 1024);
      } catch {
        return 0;
      }
    })();
    const probeNote = (ms: number[], alone: number[]) =>
      `${ms.length} probes with the lookups running (median ${median(ms).toFixed(1)} ms, max ${Math.max(...ms).toFixed(0)} ms), ${alone.length} alone (median ${median(alone).toFixed(1)} ms)`;
    return {
      id: 'lookups',
      title: 'Probes and ingest beside 100 wide item lookups',
      figures: [
        judge({
          name: '/healthz p99 while 100 clients look up a wide item',
          value: p99(under.health),
          unit: 'ms',
          ceiling: {
            value: p99(ceiling.health),
            what: 'the same probes with no lookup running (same run)',
          },
          targets: [{ kind: 'max', of: 'value', value: PROBE_TARGET_MS }],
          note: probeNote(under.health, ceiling.health),
        }),
        judge({
          name: 'ingest POST p99 while 100 clients look up a wide item',
          value: p99(under.ingest),
          unit: 'ms',
          ceiling: {
            value: p99(ceiling.ingest),
            what: 'the same probes with no lookup running (same run)',
          },
          targets: [{ kind: 'max', of: 'value', value: PROBE_TARGET_MS }],
          note: probeNote(under.ingest, ceiling.ingest),
        }),
      ],
      notes: [
        `wide item W0: ${MODULES} modules of ${CELLS} cells (${reads.length} reads through ingest); its trace is ${Math.round(answerBytes / 1000)} kB; a single lookup alone took ${singles.map((s) => s.toFixed(0)).join(', ')} ms`,
        `in ${opts.seconds} s under load: ${counts.ok} lookups answered (median ${median(counts.okMs).toFixed(0)} ms from the call, queue wait included), ${counts.busy} refused 429 (the clients wait Retry-After to twice it), ${counts.other} other answers; default http.limits (1 lookup thread, 16 waiting)`,
        `the gateway's event loop delay while the lookups ran: p99 ${(loop.percentile(99) / 1e6).toFixed(1)} ms, max ${(loop.max / 1e6).toFixed(1)} ms; the write-ahead log was ${walKiB} KiB at the end (the lookup thread's reads beside the writer)`,
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
