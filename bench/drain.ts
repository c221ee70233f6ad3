import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { BufferStore } from '../src/buffer/store.js';
import type { DeliveryConfig } from '../src/config/schema.js';
import { formatWireTime } from '../src/format/time.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import { DEMO_SECRET_FILE } from '@scan-gateway/sandbox';
import { MAX_DIRECT_BODY_BYTES } from '@scan-gateway/contract';
import type { DrainAnswer, DrainRequest } from './drain-gateway.js';
import { startJsonChild, type JsonChild } from './lib/child.js';
import { backlogRecord } from './lib/reads.js';
import { judge, type BenchResult, type Figure } from './lib/report.js';
import { nowMs, processCpuSeconds, processMemory } from './lib/system.js';
import { sqlOf } from '../test/helpers/buffer-sql.js';
import { unitNodeArgs } from './footprint.js';

/**
 * Benchmarks 3 (drain) and 4 (batch fill). A backlog of pending scans is written into a buffer
 * file through `store.intake.commitIntake`; the gateway side (drain-gateway.ts: the real Deliverer,
 * UpstreamClient and BufferStore) delivers it to the sandbox, each in its own process. The ceiling
 * sends the very same batch bodies, in the same order and the same request sequence, with bare
 * undici requests from a process that has them in memory already.
 */

/** Sizes and experiment knobs of benchmarks 3 and 4. */
export interface DrainBenchOptions {
  /** Pending scans of the drain. */
  scans: number;
  /** Pending scans of the batch-fill run (direct mode). */
  fillScans: number;
  /** Delivery settings over the defaults of the drain (experiments: smaller pre-signed batches…); none by default. */
  delivery?: Partial<DeliveryConfig>;
  /**
   * Node options of the gateway process; by default the daemon's own (systemd/scan-gateway.service's
   * ExecStart, as the footprint benchmark reads them): they set V8's young generation, which
   * changes the drain's peak RSS (measured 146 -> 129 MiB on 300,000 scans with --max-semi-space-size=2).
   */
  gatewayNodeArgs?: string[];
}

/** The benchmark's sizes: a backlog of 1,000,000 scans; 250,000 for the fill (about 10 full direct batches). */
export const DRAIN_DEFAULTS: DrainBenchOptions = { scans: 1_000_000, fillScans: 250_000 };

/** Writes `count` pending scans into a new buffer at `path`, through the real store, 20,000 per transaction. */
export function prefill(path: string, count: number): number {
  const store = BufferStore.openAt(path);
  const at = new Date(Date.now() - 60_000);
  const wire = formatWireTime(at, 'Europe/Berlin');
  const started = nowMs();
  for (let i = 0; i < count; i += 20_000) {
    const records = [];
    for (let n = i; n < Math.min(count, i + 20_000); n++) records.push(backlogRecord(n, at, wire));
    store.intake.commitIntake(records, at.getTime());
  }
  store.close();
  return (nowMs() - started) / 1000;
}

async function startSandboxChild(): Promise<{ sandbox: JsonChild; url: string }> {
  const sandbox = startJsonChild('sandbox-child.js', [JSON.stringify({ processingDelayMs: 200 })]);
  const { url } = await sandbox.next<{ url: string }>(20_000, 'the sandbox to listen');
  return { sandbox, url };
}

async function runGateway(
  dbPath: string,
  sandboxUrl: string,
  delivery: Partial<DeliveryConfig>,
  expectScans: number,
  nodeArgs: string[] = [],
): Promise<DrainAnswer> {
  const req: DrainRequest = { dbPath, sandboxUrl, delivery, expectScans, timeoutMs: 240_000 };
  const gateway = startJsonChild('drain-gateway.js', [JSON.stringify(req)], nodeArgs);
  try {
    const answer = await gateway.next<DrainAnswer>(req.timeoutMs + 30_000, 'the drain to finish');
    if (!answer.ok) throw new Error(`gateway drain failed: ${answer.error}`);
    return answer;
  } finally {
    // It exits by itself after answering (and writes a --cpu-prof profile, when asked, on the way).
    await gateway.stop(10_000);
  }
}

/** The batches the gateway formed, with the exact bodies it sent (read back untimed). */
function sentBatches(
  dbPath: string,
): { id: number; mode: string; bytes: number; scans: number; body: string }[] {
  const store = BufferStore.openAt(dbPath);
  try {
    const rows = sqlOf(store)
      .prepare('SELECT id, mode, bytes, scan_count AS scans FROM batches ORDER BY id')
      .all() as {
      id: number;
      mode: string;
      bytes: number;
      scans: number;
    }[];
    return rows.map((r) => ({ ...r, body: store.batches.batchBody(r.id) }));
  } finally {
    store.close();
  }
}

/** The ceiling: the same bodies, same order, same requests (token once; presign + PUT, or POST), bare undici. */
export async function bareUndici(
  url: string,
  batches: { mode: string; body: string }[],
): Promise<number> {
  const agent = new Agent({ keepAliveTimeout: 30_000 });
  try {
    const secret = readFileSync(join(PACKAGE_ROOT, DEMO_SECRET_FILE), 'utf8').trim();
    const tokenAnswer = await request(`${url}/oauth2/token`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: 'demo-client',
        client_secret: secret,
      }).toString(),
    });
    const token = ((await tokenAnswer.body.json()) as { access_token: string }).access_token;
    const auth = { authorization: `Bearer ${token}`, accept: 'application/json' };
    const started = nowMs();
    for (const b of batches) {
      if (b.mode === 'presigned') {
        const presign = await request(`${url}/api/trace/v3/scans/preSignedUrl`, {
          method: 'POST',
          headers: auth,
          dispatcher: agent,
        });
        const { url: putUrl } = (await presign.body.json()) as { url: string };
        const put = await request(putUrl, {
          method: 'PUT',
          headers: { 'content-type': 'application/json' },
          body: b.body,
          dispatcher: agent,
        });
        await put.body.dump();
        if (put.statusCode !== 200) throw new Error(`bare PUT answered ${put.statusCode}`);
      } else {
        const post = await request(`${url}/api/trace/v3/scans`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: b.body,
          dispatcher: agent,
        });
        await post.body.dump();
        if (post.statusCode !== 202) throw new Error(`bare POST answered ${post.statusCode}`);
      }
    }
    return (nowMs() - started) / 1000;
  } finally {
    await agent.close();
  }
}

/** What {@link sqliteFloor} measured. */
interface FloorResult {
  /** Wall time of all batches, in s. */
  sec: number;
  /** CPU time of this process meanwhile (user + system), in s. */
  cpuSec: number;
  batches: number;
  /** Wall time of the two moves summed over all batches, in ms. */
  formMs: number;
  finishMs: number;
}

/**
 * The SQLite floor of per-scan state: on a copy of the drain's buffer (same
 * schema with every migration, the store's pragmas: the connection is the store's own), bare
 * better-sqlite3 makes only the per-scan moves the schema requires for each batch of `batchScans`
 * scans, in id order: a batch row (the scans' foreign key), `pending -> batched` with its
 * `batch_id` and the totals the triggers do not count, commit; then the batch done and the
 * totals, commit (since migration 13 a finished batch writes no scan row: its batched scans are
 * delivered by the batch's state). The ids are taken as a range of rowids (the backlog's ids are contiguous):
 * no reading of rows, no packing, no bodies, no HTTP. Whatever the gateway does beyond this is its
 * own overhead; this much it cannot avoid while each scan row carries its state and batch.
 */
function sqliteFloor(path: string, batchScans: number): FloorResult {
  const store = BufferStore.openAt(path);
  try {
    const db = sqlOf(store);
    const { lo, hi } = db
      .prepare(`SELECT min(id) AS lo, max(id) AS hi FROM scan_rows WHERE state = 'pending'`)
      .get() as { lo: number; hi: number };
    const newBatch = db.prepare(
      `INSERT INTO batches (mode, state, scan_count, bytes, created_at) VALUES ('presigned', 'ready', ?, 0, ?)`,
    );
    const toBatched = db.prepare(
      `UPDATE scan_rows SET state = 'batched', batch_id = ? WHERE id BETWEEN ? AND ? AND state = 'pending'`,
    );
    const pendingTotals = db.prepare(
      `UPDATE buffer_totals SET pending_scans = pending_scans - ? WHERE id = 1`,
    );
    const batchDone = db.prepare(`UPDATE batches SET state = 'done', finished_at = ? WHERE id = ?`);
    const undeliveredTotals = db.prepare(
      `UPDATE buffer_totals SET undelivered_scans = undelivered_scans - ? WHERE id = 1`,
    );
    const form = db.transaction((from: number, to: number, at: string) => {
      const batchId = Number(newBatch.run(to - from + 1, at).lastInsertRowid);
      const moved = toBatched.run(batchId, from, to).changes;
      pendingTotals.run(moved);
      return { batchId, moved };
    });
    const finish = db.transaction((batchId: number, moved: number, at: string) => {
      batchDone.run(at, batchId);
      undeliveredTotals.run(moved);
    });
    let formMs = 0;
    let finishMs = 0;
    let batches = 0;
    const cpu0 = process.cpuUsage();
    const started = nowMs();
    for (let from = lo; from <= hi; from += batchScans) {
      const to = Math.min(hi, from + batchScans - 1);
      const at = new Date().toISOString();
      const t0 = nowMs();
      const { batchId, moved } = form(from, to, at);
      const t1 = nowMs();
      finish(batchId, moved, at);
      formMs += t1 - t0;
      finishMs += nowMs() - t1;
      batches++;
    }
    const sec = (nowMs() - started) / 1000;
    const cpu = process.cpuUsage(cpu0);
    return { sec, cpuSec: (cpu.user + cpu.system) / 1e6, batches, formMs, finishMs };
  } finally {
    store.close();
  }
}

const ms = (x: number) => Math.round(x);

/** Runs benchmark 3: the drain of `scans` pending scans in auto mode with the default batch settings. */
export async function benchDrain(
  opts: DrainBenchOptions = DRAIN_DEFAULTS,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-drain-'));
  const { sandbox, url } = await startSandboxChild();
  try {
    const dbPath = join(dir, 'buffer.db');
    const prefillSec = prefill(dbPath, opts.scans);
    // The floor's copy of the same backlog, taken before the drain (the store closed: no log left).
    const floorPath = join(dir, 'floor.db');
    copyFileSync(dbPath, floorPath);
    const sandboxCpu0 = processCpuSeconds(sandbox.pid) ?? 0;
    const delivery = { mode: 'auto' as const, ...opts.delivery };
    const nodeArgs = opts.gatewayNodeArgs ?? unitNodeArgs();
    const answer = await runGateway(dbPath, url, delivery, opts.scans, nodeArgs);
    const sandboxCpu1 = processCpuSeconds(sandbox.pid) ?? 0;
    const batches = sentBatches(dbPath);
    const totalBytes = batches.reduce((a, b) => a + b.bytes, 0);
    const ceilingSec = await bareUndici(url, batches);
    const sandboxCpu2 = processCpuSeconds(sandbox.pid) ?? 0;
    const sandboxRss = processMemory(sandbox.pid);
    // Batches of the size the gateway formed (its largest: pre-signed batches of presignedMaxScans).
    const floorBatch = Math.max(...batches.map((b) => b.scans));
    const floor = sqliteFloor(floorPath, floorBatch);
    rmSync(floorPath, { force: true });
    const floorSec = floor.sec;
    const bestRatio = ceilingSec / Math.max(floorSec, ceilingSec);
    const uploadedSec = answer.uploadedMs / 1000;
    const httpSec = Object.values(answer.httpMs).reduce((a, b) => a + b, 0) / 1000;
    const figures: Figure[] = [
      judge({
        name: 'drain rate (all uploaded)',
        value: opts.scans / uploadedSec,
        unit: 'scans/s',
        ceiling: {
          value: opts.scans / ceilingSec,
          what: 'the same bodies and requests sent with bare undici to the same sandbox',
        },
        note: `${batches.length} batches (${[...new Set(batches.map((b) => b.mode))].join(', ')}), ${(totalBytes / 2 ** 20).toFixed(0)} MiB`,
      }),
      judge({
        name: 'drain time (all uploaded)',
        value: uploadedSec,
        unit: 's',
        ceiling: { value: ceilingSec, what: 'bare undici' },
        targets: [{ kind: 'max', of: 'value', value: 60 }],
      }),
      judge({
        name: 'drain time (all confirmed by status)',
        value: answer.confirmedMs / 1000,
        unit: 's',
        note: 'sandbox processing delay 200 ms',
      }),
      judge({
        name: 'SQLite floor of per-scan state',
        value: floorSec,
        unit: 's',
        ceiling: { value: ceilingSec, what: 'bare undici' },
        note: `bare better-sqlite3 on a copy of the same buffer (schema, pragmas): ${floor.batches} batches of ${floorBatch} scans, pending -> batched + commit, batch done + commit; ${((floor.sec * 1000) / floor.batches).toFixed(1)} ms per batch (forming ${(floor.formMs / floor.batches).toFixed(1)}, finishing ${(floor.finishMs / floor.batches).toFixed(1)}), ${floor.cpuSec.toFixed(1)} s CPU`,
      }),
      judge({
        name: 'best drain ratio with per-scan state',
        value: bestRatio,
        unit: '× ceiling',
        targets: [{ kind: 'min', of: 'value', value: 0.5 }],
        note: 'ceiling time / max(SQLite floor, ceiling time): the ratio a drain could reach if the gateway did nothing but the SQLite floor, overlapped with the network',
      }),
      judge({
        name: 'gateway peak RSS during drain',
        value: answer.peakRssMiB,
        unit: 'MiB',
        targets: [{ kind: 'max', of: 'value', value: 200 }],
        note: 'VmHWM of the gateway process',
      }),
    ];
    return {
      id: 'drain',
      title: `Drain of ${opts.scans.toLocaleString('en-US')} pending scans, delivery ${JSON.stringify(delivery)} (other settings default)`,
      figures,
      notes: [
        `backlog written in ${prefillSec.toFixed(1)} s through store.intake.commitIntake (not part of the drain)`,
        `gateway node options: ${nodeArgs.length > 0 ? nodeArgs.join(' ') : '(none)'}${opts.gatewayNodeArgs ? '' : " (the daemon's, from systemd/scan-gateway.service)"}`,
        `gateway: ${answer.cpuSec.toFixed(1)} s CPU; waiting for HTTP answers ${httpSec.toFixed(1)} s (${Object.entries(
          answer.httpMs,
        )
          .map(([k, v]) => `${k} ${ms(v)} ms`)
          .join(', ')}); store ${Object.entries(answer.storeMs)
          .map(([k, v]) => `${k} ${ms(v)} ms`)
          .join(', ')}`,
        `gateway memory: RSS after loading ${answer.rssAtStartMiB.toFixed(0)} MiB; largest V8 heap ${answer.peakHeapTotalMiB.toFixed(0)} MiB and external (Buffers) ${answer.peakExternalMiB.toFixed(0)} MiB in 20 ms samples`,
        `sandbox CPU: ${(sandboxCpu1 - sandboxCpu0).toFixed(1)} s during the gateway drain, ${(sandboxCpu2 - sandboxCpu1).toFixed(1)} s during the ceiling; sandbox RSS ${sandboxRss?.rssMiB.toFixed(0) ?? '?'} MiB`,
      ],
    };
  } finally {
    await sandbox.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs benchmark 4: a backlog delivered in direct mode with maxBatchScans so large that bytes limit each batch. */
export async function benchFill(
  opts: DrainBenchOptions = DRAIN_DEFAULTS,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-fill-'));
  const { sandbox, url } = await startSandboxChild();
  try {
    const dbPath = join(dir, 'buffer.db');
    prefill(dbPath, opts.fillScans);
    const maxBatchScans = 1_000_000;
    const answer = await runGateway(dbPath, url, { mode: 'direct', maxBatchScans }, opts.fillScans);
    // The bytes actually sent, counted again from the bodies (not the sizes the store recorded).
    const batches = sentBatches(dbPath).map((b) => ({ ...b, sent: Buffer.byteLength(b.body) }));
    const exact = batches.every((b) => b.sent === b.bytes);
    const direct = batches.every((b) => b.mode === 'direct');
    // The last batch takes what is left of the backlog: not a batch "with a backlog".
    const full = batches.slice(0, -1);
    const fills = full.map((b) => b.sent / MAX_DIRECT_BODY_BYTES);
    const mean = fills.reduce((a, b) => a + b, 0) / Math.max(1, fills.length);
    const largest = Math.max(...batches.map((b) => b.sent));
    const scanBytes = batches.reduce((a, b) => a + b.sent, 0) / opts.fillScans;
    const figures: Figure[] = [
      judge({
        name: 'mean direct batch size',
        value: mean * MAX_DIRECT_BODY_BYTES,
        unit: 'bytes',
        ceiling: {
          value: MAX_DIRECT_BODY_BYTES,
          what: 'the 5.8 MiB direct upload limit (MAX_DIRECT_BODY_BYTES)',
        },
        targets: [{ kind: 'min', of: 'ratio', value: 0.95 }],
        note: `${full.length} batches formed with a backlog behind them, mean ${Math.round(full.reduce((a, b) => a + b.scans, 0) / Math.max(1, full.length))} scans`,
      }),
      judge({
        name: 'largest direct batch',
        value: largest,
        unit: 'bytes',
        ceiling: { value: MAX_DIRECT_BODY_BYTES, what: 'the 5.8 MiB limit' },
        targets: [{ kind: 'atMost', of: 'value', value: MAX_DIRECT_BODY_BYTES }],
      }),
      judge({
        name: 'direct drain rate',
        value: opts.fillScans / (answer.uploadedMs / 1000),
        unit: 'scans/s',
        note: 'for reference, no target',
      }),
    ];
    return {
      id: 'fill',
      title: `Batch fill: ${opts.fillScans.toLocaleString('en-US')} pending scans, direct mode, maxBatchScans ${maxBatchScans.toLocaleString('en-US')}`,
      figures,
      notes: [
        `maxBatchScans is set to ${maxBatchScans.toLocaleString('en-US')} so that bytes, not count, limit a batch: with the default 5,000, a batch of these ${Math.round(scanBytes)}-byte scans is ${((5000 * scanBytes) / 2 ** 20).toFixed(2)} MiB, ${((5000 * scanBytes) / MAX_DIRECT_BODY_BYTES).toFixed(2)} of the limit`,
        `all batches direct: ${direct ? 'yes' : 'NO'}; recorded batch sizes equal the bytes of the bodies sent: ${exact ? 'yes' : 'NO'}; per batch fill: ${fills.map((f) => f.toFixed(5)).join(', ')}`,
        `gateway peak RSS ${answer.peakRssMiB.toFixed(0)} MiB`,
      ],
    };
  } finally {
    await sandbox.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
