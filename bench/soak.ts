import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../src/paths.js';
import { unitNodeArgs } from './footprint.js';
import { startJsonChild, track, type JsonChild } from './lib/child.js';
import { sqlOf } from '../test/helpers/buffer-sql.js';
import { BufferStore } from '../src/buffer/store.js';
import { judge, type BenchResult, type Figure } from './lib/report.js';
import {
  contextSwitches,
  freePort,
  median,
  nowMs,
  processCpuSeconds,
  processMemory,
  sleep,
} from './lib/system.js';
import { startMosquitto, type Tool } from './lib/tools.js';

/**
 * Benchmark 10, soak: the compiled daemon as systemd runs it (`node <the unit's node
 * options> dist/src/main.js run --config …`) takes reads from a real mosquitto at a steady 500
 * reads/s, QoS 1, for 30 minutes, and delivers them to the sandbox (a process of its own, which
 * processes each batch to its final state). Every minute (and at the start) it samples the daemon's
 * resident memory (/proc/PID/status), its V8 heap and event-loop delay (its own /metrics), the
 * buffer's counts and the reads committed. What it judges: memory that keeps growing after a
 * warm-up of 5 minutes, an event-loop delay that rises over the run, and any read lost (every
 * published read must be committed, delivered, and seen by the sandbox; a soak that loses reads
 * fails). Not in the default suite: `node dist/bench/run.js --only soak [--minutes N]`.
 */

/** Length and rate of the soak. */
export interface SoakOptions {
  /** Minutes of publishing (and of sampling). */
  minutes: number;
  /** Reads per second, QoS 1. */
  rate: number;
  /**
   * Start the daemon with `--heapsnapshot-signal=SIGUSR2` and write a heap snapshot after the
   * warm-up sample and after the last one, kept in a folder the notes name (for finding what grows;
   * each snapshot stalls the daemon a second or two and raises its peak RSS, so the figures of such
   * a run are not the clean ones).
   */
  heapSnapshots?: boolean;
  /**
   * Delivered scans written into the buffer before the daemon starts (finished now, so retention
   * keeps them): the state the buffer reaches at the end of a 30-minute soak (900,000), from the
   * first minute, for reproducing what grows with it in a short run. Default 0.
   */
  prefill?: number;
  /** Folder for a CPU profile of the daemon (`--cpu-prof`, written when it stops). */
  cpuProfDir?: string;
}

/** 30 minutes at 500 reads/s. */
export const SOAK_DEFAULTS: SoakOptions = { minutes: 30, rate: 500 };

/** Minutes of warm-up before the growth is measured (shorter for runs under 10 minutes). */
function warmupMinutes(minutes: number): number {
  return minutes >= 10 ? 5 : Math.floor(minutes / 2);
}

/** One sample of the daemon (at `minute` 0, 1, 2, …). Memory in MiB, delays in ms. */
export interface SoakSample {
  minute: number;
  /** Resident memory now (VmRSS), its high-water mark (VmHWM), its anonymous part (RssAnon). */
  rssMiB: number;
  hwmMiB: number;
  anonMiB: number;
  /** V8 heap used and total, and memory outside the heap held by JS objects (Buffers), from /metrics. */
  heapUsedMiB: number;
  heapTotalMiB: number;
  externalMiB: number;
  /** Event-loop delay since the previous sample (prom-client resets its histogram at each scrape). */
  loopP50Ms: number;
  loopP99Ms: number;
  loopMaxMs: number;
  /** CPU of the daemon since the previous sample, % of one core. */
  cpuPct: number;
  /**
   * Times a second the daemon's main thread was preempted (involuntary context switches) since the
   * previous sample: high when other processes compete for the cores, which delays the loop too.
   */
  preemptedPerSec: number;
  /** Reads committed since start (scan_gateway_reads_total, all outcomes). */
  committed: number;
  /** Scans in the buffer by state (scan_gateway_scans). */
  pending: number;
  batched: number;
  delivered: number;
  undelivered: number;
  /** Messages published and acknowledged by the broker so far. */
  published: number;
  acked: number;
  /** Scans the sandbox accepted since start. */
  sandboxScans: number;
}

/**
 * The sampling interval of the daemon's event-loop monitor (`eventLoopMonitoringPrecision` in
 * src/health/metrics.ts). Node's histogram records the time between two ticks of that timer, so
 * its figures include the interval itself: an idle loop reads 100 ms. Subtracted here, so a delay
 * is what the loop was late.
 */
const LOOP_MONITOR_INTERVAL_MS = 100;

const TOPIC = 'plant/soak-1/scans';
const PREFIX = 'SOAK';

/** Sums the samples of a metric in Prometheus text, the labelled ones with `labels` in their label set. */
function metricSum(text: string, name: string, labels = ''): number {
  let sum = 0;
  let seen = false;
  for (const m of text.matchAll(new RegExp(`^${name}(\\{[^}]*\\})? ([-0-9.e+NaInf]+)$`, 'gm'))) {
    if (labels && !(m[1] ?? '').includes(labels)) continue;
    sum += Number(m[2]);
    seen = true;
  }
  return seen ? sum : NaN;
}

interface Daemon {
  pid: number;
  baseUrl: string;
  output(): string;
  exited(): boolean;
  signal(sig: NodeJS.Signals): void;
  stop(): Promise<void>;
}

/**
 * Writes `scans` delivered scans (with their reads, in finished batches of 5,000, stamped now) into
 * a new buffer through BufferStore (its migrations and triggers), as a soak leaves it after
 * `scans / rate` seconds. Plain SQL like bench/status.ts: the rows are what intake and delivery write.
 */
function prefillBuffer(path: string, scans: number): void {
  const store = BufferStore.openAt(path);
  try {
    const db = sqlOf(store);
    const now = new Date().toISOString();
    const batchScans = 5000;
    db.transaction(() => {
      db.prepare(
        `WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ?)
         INSERT INTO batches (id, mode, state, scan_count, bytes, created_at, uploaded_at, finished_at, upstream_state, request_id)
         SELECT x, 'direct', 'done', ?, 0, @now, @now, @now, 'Success', 'prefill-' || x FROM n`.replace(
          /@now/g,
          `'${now}'`,
        ),
      ).run(Math.ceil(scans / batchScans), batchScans);
      db.prepare(
        `WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ?)
         INSERT INTO reads (id, input_id, received_at, raw, outcome) SELECT x, 'soak-mqtt', ?, randomblob(40), 'scan' FROM n`,
      ).run(scans, now);
      db.prepare(
        `INSERT INTO scan_rows (read_id, dcp_key, reference, time_utc, bytes, created_at, state, batch_id)
         SELECT id, 'GI-01', 'PREFILL-' || id, ?, 30, ?, 'delivered', (id - 1) / CAST(? AS INTEGER) + 1 FROM reads`,
      ).run(now, Date.now(), batchScans);
      db.prepare(
        `INSERT INTO scan_bodies (id, body) SELECT id, '{"reference":"' || reference || '"}' FROM scan_rows`,
      ).run();
    })();
  } finally {
    store.close();
  }
}

/** Spawns the daemon; resolves once /healthz answers and its input is up. */
async function startDaemon(
  configFile: string,
  cwd: string,
  nodeArgs: string[],
  port: number,
): Promise<Daemon> {
  const child = track(
    spawn(
      process.execPath,
      [...nodeArgs, join(PACKAGE_ROOT, 'dist/src/main.js'), 'run', '--config', configFile],
      {
        cwd,
        env: { PATH: process.env.PATH ?? '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    ),
  );
  // The daemon logs JSON lines; only the tail is kept (for an error message), both pipes are read so neither fills up.
  let out = '';
  const keep = (t: string) => {
    out = (out + t).slice(-20_000);
  };
  child.stdout!.setEncoding('utf8').on('data', keep);
  child.stderr!.setEncoding('utf8').on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const daemon: Daemon = {
    pid: child.pid!,
    baseUrl: `http://127.0.0.1:${port}`,
    output: () => out,
    exited: () => child.exitCode !== null || child.signalCode !== null,
    signal: (sig) => child.kill(sig),
    async stop() {
      if (daemon.exited()) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (daemon.exited())
      throw new Error(`the daemon exited with ${child.exitCode}: ${out.slice(-2000)}`);
    if (Date.now() > deadline) {
      await daemon.stop();
      throw new Error(`the daemon's MQTT input was not up within 30 s: ${out.slice(-2000)}`);
    }
    const up = await fetch(`${daemon.baseUrl}/healthz`).then(
      async (r) =>
        ((await r.json()) as { inputs?: { state: string }[] }).inputs?.[0]?.state === 'up',
      () => false,
    );
    if (up) return daemon;
    await sleep(50);
  }
}

async function getJson<T>(url: string): Promise<T> {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`GET ${url} answered ${r.status}`);
  return (await r.json()) as T;
}

/** Runs the soak benchmark. */
export async function benchSoak(
  opts: SoakOptions = SOAK_DEFAULTS,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-soak-'));
  const tools: Tool[] = [];
  let publisher: JsonChild | undefined;
  let daemon: Daemon | undefined;
  // The sandbox keeps only the last 1,000 scans for inspection (its count covers all): its memory stays flat too.
  const sandbox = startJsonChild('sandbox-child.js', [
    JSON.stringify({ maxLoggedScans: 1000, kafka: false }),
  ]);
  const snapshotDir = opts.heapSnapshots
    ? join(tmpdir(), `sg-bench-soak-heap-${Date.now()}`)
    : undefined;
  try {
    const { url: sandboxUrl } = await sandbox.next<{ url: string }>(
      20_000,
      'the sandbox to listen',
    );
    const broker = await startMosquitto(dir);
    tools.push(broker);
    const port = await freePort();
    const configFile = join(dir, 'config.yaml');
    // The gateway's defaults for everything else: direct delivery, batches of up to 5,000 scans or
    // 1 s, WAL synchronous=FULL, delivered scans kept 30 days (the buffer grows on disk, as on site).
    writeFileSync(
      configFile,
      [
        'site: { id: soak, timezone: Europe/Berlin }',
        `upstream: { baseUrl: ${sandboxUrl}, authUrl: ${sandboxUrl}, clientId: demo-client, clientSecretFile: ${join(PACKAGE_ROOT, 'config/demo-client-secret')} }`,
        `buffer: { path: ${join(dir, 'buffer.db')} }`,
        `http: { listen: 127.0.0.1:${port} }`,
        'dcps:',
        '  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }',
        'inputs:',
        `  - { id: soak-mqtt, type: mqtt, url: ${broker.url}, topics: [plant/+/scans], clientId: sg-soak-gateway, dcp: GI-01 }`,
        '',
      ].join('\n'),
    );
    const prefill = opts.prefill ?? 0;
    if (prefill > 0) {
      const started = nowMs();
      prefillBuffer(join(dir, 'buffer.db'), prefill);
      process.stderr.write(
        `\n  soak: buffer pre-filled with ${prefill} delivered scans in ${((nowMs() - started) / 1000).toFixed(1)} s`,
      );
    }
    const nodeArgs = [
      ...unitNodeArgs(),
      ...(snapshotDir ? ['--heapsnapshot-signal=SIGUSR2'] : []),
      ...(opts.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProfDir}`] : []),
    ];
    daemon = await startDaemon(configFile, dir, nodeArgs, port);
    const d = daemon;
    publisher = startJsonChild('soak-publisher.js', [
      JSON.stringify({
        url: broker.url,
        topic: TOPIC,
        rate: opts.rate,
        seconds: opts.minutes * 60,
        prefix: PREFIX,
      }),
    ]);
    const pub = publisher;
    await pub.next(10_000, 'the publisher to connect');
    const stats = async () => {
      pub.send({ stats: true });
      return pub.next<{ published: number; acked: number; total: number }>(
        10_000,
        'publisher counts',
      );
    };

    const samples: SoakSample[] = [];
    let lastCpu = processCpuSeconds(d.pid) ?? NaN;
    let lastSwitches = contextSwitches(d.pid)?.involuntary ?? NaN;
    let lastAt = nowMs();
    const sample = async (minute: number): Promise<SoakSample> => {
      const text = await fetch(`${d.baseUrl}/metrics`).then((r) => r.text());
      const mem = processMemory(d.pid);
      const cpu = processCpuSeconds(d.pid) ?? NaN;
      const at = nowMs();
      const switches = contextSwitches(d.pid)?.involuntary ?? NaN;
      const cpuPct = (100 * (cpu - lastCpu)) / ((at - lastAt) / 1000);
      const preemptedPerSec = (switches - lastSwitches) / ((at - lastAt) / 1000);
      lastSwitches = switches;
      lastCpu = cpu;
      lastAt = at;
      const p = await stats();
      const sb = await getJson<{ count: number }>(`${sandboxUrl}/_sandbox/scans?limit=0`);
      const mib = (name: string) => metricSum(text, name) / 2 ** 20;
      const ms = (name: string) =>
        Math.max(0, metricSum(text, name) * 1000 - LOOP_MONITOR_INTERVAL_MS);
      const s: SoakSample = {
        minute,
        rssMiB: mem?.rssMiB ?? NaN,
        hwmMiB: mem?.peakMiB ?? NaN,
        anonMiB: mem?.anonMiB ?? NaN,
        heapUsedMiB: mib('nodejs_heap_size_used_bytes'),
        heapTotalMiB: mib('nodejs_heap_size_total_bytes'),
        externalMiB: mib('nodejs_external_memory_bytes'),
        loopP50Ms: ms('nodejs_eventloop_lag_p50_seconds'),
        loopP99Ms: ms('nodejs_eventloop_lag_p99_seconds'),
        loopMaxMs: ms('nodejs_eventloop_lag_max_seconds'),
        cpuPct: minute === 0 ? NaN : cpuPct,
        preemptedPerSec: minute === 0 ? NaN : preemptedPerSec,
        committed: metricSum(text, 'scan_gateway_reads_total'),
        pending: metricSum(text, 'scan_gateway_scans', 'state="pending"') || 0,
        batched: metricSum(text, 'scan_gateway_scans', 'state="batched"') || 0,
        delivered: metricSum(text, 'scan_gateway_scans', 'state="delivered"') || 0,
        undelivered: metricSum(text, 'scan_gateway_undelivered_scans'),
        published: p.published,
        acked: p.acked,
        sandboxScans: sb.count,
      };
      samples.push(s);
      const r = (x: number) => x.toFixed(1);
      process.stderr.write(
        `\n  soak ${minute > opts.minutes ? 'settled' : `minute ${minute}`}: RSS ${r(s.rssMiB)} MiB (peak ${r(s.hwmMiB)}), heap ${r(s.heapUsedMiB)}/${r(s.heapTotalMiB)} MiB, loop p99 ${r(s.loopP99Ms)} ms (max ${r(s.loopMaxMs)}), preempted ${r(s.preemptedPerSec)}/s, CPU ${r(s.cpuPct)} %, published ${s.published}, committed ${s.committed}, delivered ${s.delivered}, undelivered ${s.undelivered}`,
      );
      return s;
    };
    const warmup = warmupMinutes(opts.minutes);
    const snapshot = async (name: string) => {
      if (!snapshotDir) return;
      mkdirSync(snapshotDir, { recursive: true });
      const before = new Set(readdirSync(dir).filter((f) => f.endsWith('.heapsnapshot')));
      d.signal('SIGUSR2');
      // Node writes Heap.<date>.<pid>.<n>.heapsnapshot into the daemon's working folder; wait until it is complete.
      const deadline = Date.now() + 120_000;
      for (;;) {
        const made = readdirSync(dir).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
        const done =
          made !== undefined &&
          (await fetch(`${d.baseUrl}/healthz`).then(
            () => true,
            () => false,
          ));
        if (made && done) {
          await sleep(1000);
          renameSync(join(dir, made), join(snapshotDir, `${name}.heapsnapshot`));
          return;
        }
        if (Date.now() > deadline) throw new Error(`no heap snapshot ${name} within 120 s`);
        await sleep(500);
      }
    };

    await sample(0);
    const t0 = nowMs();
    pub.send({ start: true });
    for (let minute = 1; minute <= opts.minutes; minute++) {
      const due = t0 + minute * 60_000;
      while (nowMs() < due) {
        if (d.exited())
          throw new Error(`the daemon exited during the soak: ${d.output().slice(-2000)}`);
        await sleep(Math.min(1000, due - nowMs()));
      }
      await sample(minute);
      if (minute === warmup) await snapshot('1-after-warmup');
    }

    // Every published read acknowledged by the broker (PUBACK after commit), committed, delivered,
    // and seen by the sandbox: wait up to 2 minutes for the last batches to reach their final state.
    const settleDeadline = Date.now() + 120_000;
    for (;;) {
      const p = await stats();
      const text = await fetch(`${d.baseUrl}/metrics`).then((r) => r.text());
      const undelivered = metricSum(text, 'scan_gateway_undelivered_scans');
      if ((p.acked === p.total && undelivered === 0) || Date.now() > settleDeadline) break;
      await sleep(1000);
    }
    // The settled state: one more sample, not part of the per-minute series.
    const end = await sample(opts.minutes + 1);
    samples.pop();
    await snapshot('2-end');
    process.stderr.write('\n  ');

    const total = Math.round(opts.rate * opts.minutes * 60);
    const lost: string[] = [];
    if (end.acked !== total)
      lost.push(`the broker acknowledged ${end.acked} of ${total} published reads`);
    if (end.committed !== total)
      lost.push(`the gateway committed ${end.committed} reads of ${total} published`);
    if (end.delivered - prefill !== total)
      lost.push(
        `the gateway's buffer holds ${end.delivered} delivered scans of ${total} published (undelivered ${end.undelivered})`,
      );
    if (end.sandboxScans < total)
      lost.push(`the sandbox accepted ${end.sandboxScans} scans of ${total} published`);

    const last = samples[samples.length - 1]!;
    const base = samples[warmup]!;
    const window = Math.max(1, Math.min(5, Math.floor(opts.minutes / 2)));
    const first = samples.slice(1, 1 + window);
    const final = samples.slice(-window);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const loopFirst = mean(first.map((s) => s.loopP99Ms));
    const loopLast = mean(final.map((s) => s.loopP99Ms));
    // Least-squares slope of RSS over the minutes after the warm-up: a steady leak shows as a slope even when the end happens to sit in a dip.
    const after = samples.slice(warmup);
    const slope = (ys: number[]) => {
      const xs = after.map((s) => s.minute);
      const mx = mean(xs);
      const my = mean(ys);
      const den = xs.reduce((a, x) => a + (x - mx) ** 2, 0);
      return den > 0 ? (xs.reduce((a, x, i) => a + (x - mx) * (ys[i]! - my), 0) / den) * 60 : NaN;
    };
    const figures: Figure[] = [
      judge({
        name: `RSS growth, minute ${warmup} → ${last.minute}`,
        value: last.rssMiB - base.rssMiB,
        unit: 'MiB',
        targets: [{ kind: 'max', of: 'value', value: 5 }],
        note: `${base.rssMiB.toFixed(1)} → ${last.rssMiB.toFixed(1)} MiB; least-squares slope over those minutes ${slope(after.map((s) => s.rssMiB)).toFixed(1)} MiB/h; RSS at start ${samples[0]!.rssMiB.toFixed(1)} MiB`,
      }),
      judge({
        name: `V8 heap used growth, minute ${warmup} → ${last.minute}`,
        value: last.heapUsedMiB - base.heapUsedMiB,
        unit: 'MiB',
        note: `${base.heapUsedMiB.toFixed(1)} → ${last.heapUsedMiB.toFixed(1)} MiB (sampled between collections, so ± a few MiB of garbage); slope ${slope(after.map((s) => s.heapUsedMiB)).toFixed(1)} MiB/h; heap total ${base.heapTotalMiB.toFixed(1)} → ${last.heapTotalMiB.toFixed(1)} MiB`,
      }),
      judge({ name: 'peak RSS over the soak (VmHWM)', value: end.hwmMiB, unit: 'MiB' }),
      judge({
        name: `event-loop delay p99, last ${window} min`,
        value: loopLast,
        unit: 'ms',
        ceiling: {
          value: loopFirst,
          what: `the same in the first ${window} min (ratio ≤ 1.2: no rise)`,
        },
        targets: [{ kind: 'atMost', of: 'ratio', value: 1.2 }],
        note: `mean of the per-minute p99 (the daemon's event-loop monitor, reset at each scrape, its ${LOOP_MONITOR_INTERVAL_MS} ms interval subtracted); per minute: ${samples
          .slice(1)
          .map((s) => s.loopP99Ms.toFixed(1))
          .join(', ')} ms`,
      }),
      judge({
        name: 'reads published = committed = delivered',
        value: Math.min(end.committed, end.delivered - prefill, end.sandboxScans),
        unit: 'reads',
        ceiling: {
          value: total,
          what: `published at ${opts.rate}/s QoS 1 for ${opts.minutes} min`,
        },
        targets: [{ kind: 'min', of: 'ratio', value: 1 }],
        note: `broker acknowledged ${end.acked}, committed ${end.committed}, delivered ${end.delivered - prefill}${prefill ? ` (besides ${prefill} pre-filled)` : ''}, the sandbox accepted ${end.sandboxScans}`,
      }),
      judge({
        name: 'daemon CPU at the soak rate',
        value: median(samples.slice(1).map((s) => s.cpuPct)),
        unit: '% of one core',
        note: 'median over the minutes',
      }),
    ];
    await publisher.stop();
    await daemon.stop();
    return {
      id: 'soak',
      title: `Soak: the compiled daemon at ${opts.rate} reads/s over MQTT (mosquitto, QoS 1) for ${opts.minutes} min, the sandbox processing`,
      figures,
      notes: [
        `node options of the daemon: ${nodeArgs.join(' ') || '(none)'} (systemd/scan-gateway.service's ExecStart${snapshotDir ? ' + --heapsnapshot-signal=SIGUSR2' : ''})`,
        `warm-up ${warmup} min; event-loop windows ${window} min; samples every minute after the start (minute 0 = ready, before the first read)`,
        ...(snapshotDir
          ? [
              `heap snapshots (after minute ${warmup} and at the end) in ${snapshotDir}; they stall the daemon and raise its peak: not a clean run`,
            ]
          : []),
        `per-minute series (JSON): ${JSON.stringify(
          samples.map((s) => ({
            ...s,
            rssMiB: +s.rssMiB.toFixed(1),
            hwmMiB: +s.hwmMiB.toFixed(1),
            anonMiB: +s.anonMiB.toFixed(1),
            heapUsedMiB: +s.heapUsedMiB.toFixed(1),
            heapTotalMiB: +s.heapTotalMiB.toFixed(1),
            externalMiB: +s.externalMiB.toFixed(1),
            loopP50Ms: +s.loopP50Ms.toFixed(2),
            loopP99Ms: +s.loopP99Ms.toFixed(2),
            loopMaxMs: +s.loopMaxMs.toFixed(2),
            cpuPct: +s.cpuPct.toFixed(1),
            preemptedPerSec: +s.preemptedPerSec.toFixed(1),
          })),
        )}`,
      ],
      ...(lost.length ? { error: `reads lost: ${lost.join('; ')}` } : {}),
    };
  } finally {
    await publisher?.stop();
    await daemon?.stop();
    await sandbox.stop();
    for (const t of tools) await t.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
