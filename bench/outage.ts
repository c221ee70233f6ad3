import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { BufferStore } from '../src/buffer/store.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import { bareUndici, prefill } from './drain.js';
import { ENV_WORD, unitEnvironment, unitNodeArgs } from './footprint.js';
import { startJsonChild, track } from './lib/child.js';
import { backlogReference } from './lib/reads.js';
import { judge, type BenchResult, type Figure } from './lib/report.js';
import {
  epochMs,
  freePort,
  median,
  nowMs,
  percentile,
  processMemory,
  sleep,
} from './lib/system.js';

/**
 * The `outage` row: a weekend without the cloud. A backlog of `scans` pending scans is written
 * through the store's intake at full speed (the fast-forward of the outage), then the compiled
 * daemon starts on it, as the unit starts it, with its upstream unreachable (a TCP relay in front
 * of the sandbox refuses every connection) while a line posts reads at its rate (40 a second, a
 * tenfold burst every half minute), a monitor probes /healthz and people look items up. Then the
 * relay lets the upstream through, and the backlog drains while all that goes on. The ceiling is
 * the same batches' bodies sent with bare undici through the same relay to the same sandbox,
 * measured in the same run after the drain.
 */

export interface OutageOptions {
  /** Pending scans the outage leaves. */
  scans: number;
  /** Seconds the daemon runs on the backlog with the upstream unreachable before it comes back. */
  outageSec: number;
  /** Seconds of line, probes and lookups after the last backlog scan was accepted (settled RSS). */
  settleSec: number;
  /** Longest the drain may take, in s (then the row fails). */
  timeoutSec: number;
  /** Scans of the ceiling's sample (the first batches of the backlog, bodies held in memory). */
  ceilingScans: number;
}

export const OUTAGE_DEFAULTS: OutageOptions = {
  scans: 10_000_000,
  outageSec: 20,
  settleSec: 20,
  timeoutSec: 1200,
  ceilingScans: 500_000,
};

/** The line: reads a second, and the burst's factor, length and period. */
const LINE_RATE = 40;
const BURST_FACTOR = 10;
const BURST_SEC = 3;
const BURST_EVERY_SEC = 30;
const PROBE_EVERY_MS = 50;
const LOOKUP_EVERY_MS = 250;
const TARGET_MS = 50;
const INGEST_TOKEN = 'bench-outage-ingest-token-0123456789';

/**
 * The line, the monitor and the people, in a thread of their own (a client sharing the bench's
 * loop could not time answers while the bench reads the database): each request's epoch time, its
 * duration and status. Reads are posted one per request, as a line's scanners send them; 202 comes
 * only after the read is committed, so its duration is the read-to-commit latency.
 */
const CLIENT_SCRIPT = `
const http = require('node:http');
const { parentPort, workerData: w } = require('node:worker_threads');
const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
const probeAgent = new http.Agent({ keepAlive: true, maxSockets: 4 });
const call = (path, method, headers, body, from, ag) => new Promise((resolve) => {
  const started = performance.now();
  const at = performance.timeOrigin + started;
  const req = http.request({ host: '127.0.0.1', port: w.port, path, method, agent: ag, localAddress: from, headers: { host: '127.0.0.1:' + w.port, ...headers } }, (res) => {
    res.resume();
    res.on('end', () => resolve([at, performance.now() - started, res.statusCode]));
  });
  req.on('error', () => resolve([at, performance.now() - started, 0]));
  req.end(body);
});
const ingest = [], health = [], lookups = [];
const pending = new Set();
const track = (p, sink) => { pending.add(p); p.then((s) => sink.push(s)).finally(() => pending.delete(p)); };
let n = 0;
const t0 = performance.now();
const line = setInterval(() => {
  const sec = (performance.now() - t0) / 1000;
  const k = sec % w.burstEverySec < w.burstSec ? w.burstFactor : 1;
  for (let i = 0; i < k; i++) {
    const body = JSON.stringify([{ code: 'LINE-' + w.run + '-' + n++ }]);
    track(call('/api/v1/reads', 'POST', { authorization: 'Bearer ' + w.token, 'content-type': 'application/json' }, body, '127.0.0.1', agent), ingest);
  }
}, 1000 / w.lineRate);
const probe = setInterval(() => track(call('/healthz', 'GET', {}, undefined, '127.0.0.2', probeAgent), health), w.probeEveryMs);
const lookup = setInterval(() => {
  const ref = w.refs[Math.floor(Math.random() * w.refs.length)];
  track(call('/api/v1/items/' + encodeURIComponent(ref), 'GET', { accept: 'application/json' }, undefined, '127.0.0.3', agent), lookups);
}, w.lookupEveryMs);
parentPort.once('message', () => {
  clearInterval(line); clearInterval(probe); clearInterval(lookup);
  Promise.all(pending).then(() => { parentPort.postMessage({ ingest, health, lookups, reads: n }); agent.destroy(); probeAgent.destroy(); });
});
`;

type Sample = [atEpochMs: number, ms: number, status: number];
interface ClientResult {
  ingest: Sample[];
  health: Sample[];
  lookups: Sample[];
  reads: number;
}

/** A TCP relay to `target` that refuses every connection while down (the WAN is out). */
async function startRelay(target: number): Promise<{
  port: number;
  up(): void;
  stop(): Promise<void>;
}> {
  let isUp = false;
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    if (!isUp) {
      socket.resetAndDestroy();
      return;
    }
    const out = connect(target, '127.0.0.1');
    sockets.add(out);
    out.on('close', () => sockets.delete(out));
    out.on('error', () => socket.destroy());
    socket.on('error', () => out.destroy());
    socket.pipe(out).pipe(socket);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port,
    up: () => (isUp = true),
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Bytes of each table and index of the buffer (SQLite's dbstat), largest first. */
function bufferObjects(path: string): { name: string; bytes: number }[] {
  const db = new Database(path, { readonly: true });
  try {
    return (
      db
        .prepare('SELECT name, sum(pgsize) AS bytes FROM dbstat GROUP BY name ORDER BY bytes DESC')
        .all() as { name: string; bytes: number }[]
    ).filter((o) => o.bytes > 4096);
  } finally {
    db.close();
  }
}

const within = (samples: Sample[], from: number, to: number) =>
  samples.filter(([at]) => at >= from && at <= to);
const okMs = (samples: Sample[], ok: number) =>
  samples.filter(([, , s]) => s === ok).map(([, ms]) => ms);
const pct = (values: number[], p: number) =>
  values.length === 0
    ? NaN
    : percentile(
        [...values].sort((a, b) => a - b),
        p,
      );
const mib = (bytes: number) => bytes / 2 ** 20;

/** Runs the `outage` row. */
export async function benchOutage(
  opts: OutageOptions = OUTAGE_DEFAULTS,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-outage-'));
  const sandbox = startJsonChild('sandbox-child.js', [JSON.stringify({ processingDelayMs: 200 })]);
  let relay: Awaited<ReturnType<typeof startRelay>> | undefined;
  let stopDaemon = async () => {};
  try {
    const { url } = await sandbox.next<{ url: string }>(20_000, 'the sandbox to listen');
    relay = await startRelay(Number(new URL(url).port));
    const relayUrl = `http://127.0.0.1:${relay.port}`;

    // The outage, fast-forwarded: the backlog through the store's intake at full speed.
    const dbPath = join(dir, 'buffer.db');
    const prefillSec = prefill(dbPath, opts.scans);
    const fileBytes = statSync(dbPath).size;
    const objects = bufferObjects(dbPath);
    const meta = new Database(dbPath, { readonly: true });
    const { lastId, jsonBytes } = meta
      .prepare('SELECT max(id) AS lastId, sum(bytes) AS jsonBytes FROM scan_rows')
      .get() as { lastId: number; jsonBytes: number };
    meta.close();

    const tokenFile = join(dir, 'ingest-token');
    writeFileSync(tokenFile, `${INGEST_TOKEN}\n`);
    const httpPort = await freePort();
    const configFile = join(dir, 'config.yaml');
    writeFileSync(
      configFile,
      [
        'site: { id: plant-1-hall-3, timezone: Europe/Berlin }',
        'upstream:',
        `  baseUrl: ${relayUrl}`,
        `  authUrl: ${relayUrl}`,
        '  clientId: demo-client',
        `  clientSecretFile: ${join(PACKAGE_ROOT, 'config/demo-client-secret')}`,
        // Quotas above the backlog whatever --scans asks for: the defaults (20,000,000 scans, at
        // most 16 GiB of JSON derived from the disk) hold the 10 M of a weekend, not any backlog.
        `buffer: { path: ${dbPath}, maxPendingScans: ${opts.scans * 2 + 1_000_000}, maxBytes: ${Math.ceil(jsonBytes * 2 + 256 * 2 ** 20)} }`,
        `http: { listen: 127.0.0.1:${httpPort} }`,
        'dcps:',
        '  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A, duplicateWindowMs: 0 }',
        'inputs:',
        `  - { id: line, type: http, dcp: EOL-3, tokenFile: ${tokenFile} }`,
        '',
      ].join('\n'),
    );
    const words = unitNodeArgs();
    const nodeArgs = words.filter((w) => !ENV_WORD.test(w));
    const daemon = track(
      spawn(
        process.execPath,
        [
          ...nodeArgs,
          // SG_BENCH_CPU_PROF_DIR: a CPU profile of the daemon, written when it stops (for
          // dist/bench/cpuprofile-stalls.js; the profiler slows it, so not for the figures).
          ...(process.env.SG_BENCH_CPU_PROF_DIR
            ? ['--cpu-prof', `--cpu-prof-dir=${process.env.SG_BENCH_CPU_PROF_DIR}`]
            : []),
          join(PACKAGE_ROOT, 'dist/src/main.js'),
          'run',
          '--config',
          configFile,
        ],
        {
          cwd: dir,
          env: { ...unitEnvironment(), PATH: process.env.PATH ?? '' },
          stdio: ['ignore', 'ignore', 'pipe'],
        },
      ),
    );
    let stderr = '';
    daemon.stderr!.setEncoding('utf8').on('data', (t: string) => {
      stderr = (stderr + t).slice(-4000);
    });
    const exited = new Promise<void>((resolve) => daemon.once('exit', () => resolve()));
    stopDaemon = async () => {
      if (daemon.exitCode !== null || daemon.signalCode !== null) return;
      daemon.kill('SIGTERM');
      const timer = setTimeout(() => daemon.kill('SIGKILL'), 40_000);
      await exited;
      clearTimeout(timer);
    };
    const pid = daemon.pid!;
    const startedAt = nowMs();
    for (;;) {
      if (daemon.exitCode !== null)
        throw new Error(`the daemon exited with ${daemon.exitCode}: ${stderr}`);
      if (nowMs() - startedAt > 120_000) throw new Error(`the daemon did not answer: ${stderr}`);
      const ok = await fetch(`http://127.0.0.1:${httpPort}/healthz`).then(
        async (r) => (await r.arrayBuffer(), true),
        () => false,
      );
      if (ok) break;
      await sleep(50);
    }
    const readySec = (nowMs() - startedAt) / 1000;

    const rss: { at: number; mib: number }[] = [];
    const sampler = setInterval(() => {
      const m = processMemory(pid);
      if (m) rss.push({ at: epochMs(), mib: m.rssMiB });
    }, 250);
    const refs = Array.from({ length: 2000 }, () =>
      backlogReference(Math.floor(Math.random() * opts.scans)),
    );
    const worker = new Worker(CLIENT_SCRIPT, {
      eval: true,
      workerData: {
        port: httpPort,
        token: INGEST_TOKEN,
        run: Date.now().toString(36),
        lineRate: LINE_RATE,
        burstFactor: BURST_FACTOR,
        burstSec: BURST_SEC,
        burstEverySec: BURST_EVERY_SEC,
        probeEveryMs: PROBE_EVERY_MS,
        lookupEveryMs: LOOKUP_EVERY_MS,
        refs,
      },
    });
    const clientResult = new Promise<ClientResult>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });

    const outageFrom = epochMs();
    await sleep(opts.outageSec * 1000);
    // The WAN is back.
    const upAt = epochMs();
    relay.up();
    const watch = new Database(dbPath, { readonly: true });
    const accepted = watch.prepare(
      `SELECT count(*) FROM batches WHERE state IN ('uploaded', 'done')`,
    );
    const lastAccepted = watch.prepare(
      `SELECT b.state FROM scan_rows s JOIN batches b ON b.id = s.batch_id WHERE s.id = ?`,
    );
    let firstAt = NaN;
    let doneAt = NaN;
    try {
      while (Number.isNaN(doneAt)) {
        await sleep(200);
        const now = epochMs();
        if (daemon.exitCode !== null)
          throw new Error(`the daemon exited during the drain: ${stderr}`);
        if (now - upAt > opts.timeoutSec * 1000)
          throw new Error(`the backlog was not accepted within ${opts.timeoutSec} s`);
        if (Number.isNaN(firstAt) && (accepted.pluck().get() as number) > 0) firstAt = now;
        const state = lastAccepted.pluck().get(lastId) as string | undefined;
        if (state === 'uploaded' || state === 'done') doneAt = now;
      }
    } finally {
      watch.close();
    }
    await sleep(opts.settleSec * 1000);
    const settleFrom = epochMs() - Math.min(5000, opts.settleSec * 1000);
    worker.postMessage('stop');
    const clients = await clientResult;
    await worker.terminate();
    clearInterval(sampler);
    const peakMiB = processMemory(pid)?.peakMiB ?? NaN;
    const settled = rss.filter((r) => r.at >= settleFrom).map((r) => r.mib);
    await stopDaemon();

    // The ceiling: the first batches of the backlog, bodies in memory, bare undici through the relay.
    const store = BufferStore.openAt(dbPath);
    let sample: { mode: string; body: string; scans: number }[] = [];
    let batchCount = 0;
    let backlogBatchBytes = 0;
    try {
      const rows = new Database(dbPath, { readonly: true });
      const batches = rows
        .prepare(
          `SELECT id, mode, scan_count AS scans, bytes FROM batches WHERE id <= (SELECT batch_id FROM scan_rows WHERE id = ?) ORDER BY id`,
        )
        .all(lastId) as { id: number; mode: string; scans: number; bytes: number }[];
      rows.close();
      batchCount = batches.length;
      backlogBatchBytes = batches.reduce((a, b) => a + b.bytes, 0);
      let scans = 0;
      for (const b of batches) {
        if (scans >= opts.ceilingScans) break;
        sample.push({ mode: b.mode, body: store.batches.batchBody(b.id), scans: b.scans });
        scans += b.scans;
      }
    } finally {
      store.close();
    }
    const sampleScans = sample.reduce((a, b) => a + b.scans, 0);
    const ceilingSec = await bareUndici(relayUrl, sample);
    sample = [];
    const ceilingRate = sampleScans / ceilingSec;

    const drainSec = (doneAt - firstAt) / 1000;
    const drainRate = opts.scans / drainSec;
    const during = (s: Sample[]) => within(s, upAt, doneAt);
    const ingestDrain = okMs(during(clients.ingest), 202);
    const ingestAll = okMs(clients.ingest, 202);
    const healthDrain = okMs(during(clients.health), 200);
    const lookupDrain = okMs(during(clients.lookups), 200);
    const refused = (s: Sample[], ok: number) => s.filter(([, , st]) => st !== ok).length;
    const bytesPerScan = fileBytes / opts.scans;
    const figures: Figure[] = [
      judge({
        name: 'buffer bytes per pending scan',
        value: bytesPerScan,
        unit: 'bytes',
        ceiling: { value: jsonBytes / opts.scans, what: "the scan's own JSON" },
        note: `${mib(fileBytes).toFixed(0)} MiB for ${opts.scans.toLocaleString('en-US')} scans; by table and index: ${objects
          .map((o) => `${o.name} ${(o.bytes / opts.scans).toFixed(0)}`)
          .join(', ')} bytes per scan`,
      }),
      judge({
        name: 'drain rate while the line runs',
        value: drainRate,
        unit: 'scans/s',
        ceiling: {
          value: ceilingRate,
          what: `bare undici sending the first ${sampleScans.toLocaleString('en-US')} scans' batch bodies through the same relay to the same sandbox`,
        },
        targets: [{ kind: 'min', of: 'ratio', value: 0.8 }],
        note: `${opts.scans.toLocaleString('en-US')} scans in ${drainSec.toFixed(1)} s from the first accepted batch to the last backlog scan accepted; ${batchCount} batches, ${mib(backlogBatchBytes).toFixed(0)} MiB`,
      }),
      judge({
        name: 'time until the last backlog scan is accepted',
        value: (doneAt - upAt) / 1000,
        unit: 's',
        note: `from the upstream's return; the first batch was accepted ${((firstAt - upAt) / 1000).toFixed(1)} s after it (the retry backoff of the outage)`,
      }),
      judge({
        name: 'peak RSS over the run (VmHWM)',
        value: peakMiB,
        unit: 'MiB',
        targets: [{ kind: 'max', of: 'value', value: 200 }],
      }),
      judge({
        name: 'settled RSS after the drain',
        value: median(settled),
        unit: 'MiB',
        note: `median of ${settled.length} samples over the last ${Math.min(5, opts.settleSec)} s, line, probes and lookups still running`,
      }),
      judge({
        name: 'read-to-commit p99 of new reads during the drain',
        value: pct(ingestDrain, 99),
        unit: 'ms',
        targets: [{ kind: 'max', of: 'value', value: TARGET_MS }],
        note: `${ingestDrain.length} reads posted one per request (202 after the commit), ${refused(during(clients.ingest), 202)} not accepted; over the whole run p99 ${pct(ingestAll, 99).toFixed(1)} ms of ${ingestAll.length}`,
      }),
      judge({
        name: '/healthz p99 during the drain',
        value: pct(healthDrain, 99),
        unit: 'ms',
        targets: [{ kind: 'max', of: 'value', value: TARGET_MS }],
        note: `${healthDrain.length} probes every ${PROBE_EVERY_MS} ms, ${refused(during(clients.health), 200)} not 200`,
      }),
      judge({
        name: 'item lookup p95 during the drain',
        value: pct(lookupDrain, 95),
        unit: 'ms',
        targets: [{ kind: 'max', of: 'value', value: TARGET_MS }],
        note: `${lookupDrain.length} lookups of random backlog items every ${LOOKUP_EVERY_MS} ms, ${refused(during(clients.lookups), 200)} not 200`,
      }),
    ];
    const outageIngest = okMs(within(clients.ingest, outageFrom, upAt), 202);
    return {
      id: 'outage',
      title: `A weekend without the cloud: ${opts.scans.toLocaleString('en-US')} scans waiting, drained while the line runs`,
      figures,
      notes: [
        `backlog written in ${prefillSec.toFixed(1)} s through store.intake.commitIntake (the outage fast-forwarded); the daemon answered /healthz ${readySec.toFixed(1)} s after its spawn on it`,
        `line: ${LINE_RATE} reads/s, ${BURST_FACTOR}× for ${BURST_SEC} s every ${BURST_EVERY_SEC} s (${clients.reads} reads); during the ${opts.outageSec} s with the upstream unreachable read-to-commit p99 ${pct(outageIngest, 99).toFixed(1)} ms`,
        `daemon node options: ${nodeArgs.join(' ')} (the unit's); sandbox processing delay 200 ms; delivery settings the defaults; buffer.maxPendingScans and buffer.maxBytes twice the backlog (the defaults refuse reads from 20,000,000 scans or 16 GiB of JSON on, or what the disk holds)`,
      ],
    };
  } finally {
    await stopDaemon();
    await relay?.stop();
    await sandbox.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
