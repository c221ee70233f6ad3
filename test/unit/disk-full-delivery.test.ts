import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DiskGuard } from '../../src/buffer/disk-guard.js';
import { Retention } from '../../src/buffer/retention.js';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { deliverySchema } from '../../src/config/schema.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { Deliverer } from '../../src/delivery/deliverer.js';
import type { DeliveryApi, ScanStatusLike } from '../../src/delivery/types.js';
import { isDiskFull } from '../../src/errors.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A full disk made with `PRAGMA max_page_count`: SQLite fails a write that needs a new page with
 * SQLITE_FULL exactly as on a full disk, without root or a small file system. The real deliverer,
 * disk guard and retention on a real buffer file; only the upstream is scripted (the seam of
 * `DeliveryApi`; the tmpfs integration test runs the same against the sandbox over HTTP).
 */

/** The upstream: accepts every upload, answers Success for what it received. */
class Upstream implements DeliveryApi {
  /** Each upload's references, in order. */
  uploads: string[][] = [];
  private readonly received = new Map<string, number>();
  private next = 1;
  /** Runs in the middle of the next upload, after the service has the batch, before its answer. */
  duringNextUpload: (() => string | undefined) | undefined;

  async uploadScans(body: string): Promise<{ requestId: string }> {
    const refs = (JSON.parse(body) as { reference: string }[]).map((s) => s.reference);
    this.uploads.push(refs);
    const during = this.duringNextUpload;
    this.duringNextUpload = undefined;
    const requestId = during?.() ?? `req-${this.next++}`;
    this.received.set(requestId, refs.length);
    return { requestId };
  }
  async requestPresignedUpload(): Promise<{ url: string; requestId: string }> {
    throw new Error('not used: direct mode');
  }
  async putPresigned(): Promise<void> {
    throw new Error('not used: direct mode');
  }
  async getScanStatus(requestId: string): Promise<ScanStatusLike> {
    const n = this.received.get(requestId);
    return n === undefined
      ? { state: 'NotFound', requestId }
      : { state: 'Success', requestId, processed: n };
  }
  /** How many times each reference was uploaded. */
  counts(): Map<string, number> {
    const m = new Map<string, number>();
    for (const r of this.uploads.flat()) m.set(r, (m.get(r) ?? 0) + 1);
    return m;
  }
}

function scan(reference: string, pad = 400): IntakeRecord {
  const body = JSON.stringify({
    reference,
    timeStamp: '2026-11-18T07:00:00',
    dcpKey: 'GI-01',
    productModelKey: 'PACK-A',
    parents: [],
    attributes: [],
    pad: 'x'.repeat(pad),
  });
  return {
    inputId: 'in',
    receivedAt: new Date(),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: { reference, dcpKey: 'GI-01', instant: new Date(), body },
  };
}

/** Commits `n` scans, batches and finishes them: the audit (delivered, kept for its period). */
function deliveredBatch(s: BufferStore, prefix: string, n: number): number {
  s.intake.commitIntake(
    Array.from({ length: n }, (_, i) => scan(`${prefix}-${i}`)),
    Date.now(),
  );
  const b = formBatch(s, {
    maxScans: 10_000,
    maxBytes: 1e9,
    mode: 'direct',
    nowIso: new Date().toISOString(),
  })!;
  s.batches.updateBatch(b.id, { state: 'uploaded', requestId: `audit-${b.id}` });
  s.batches.finishBatch(b.id, { state: 'Success', failures: [] }, new Date().toISOString());
  return b.id;
}

/**
 * Takes every page the database may still have: commits pending scans (`prefix`-n) in groups of 20,
 * then one by one, until SQLite reports the database full. Answers the references committed.
 */
function fill(s: BufferStore, prefix: string): string[] {
  const refs: string[] = [];
  for (const size of [20, 1]) {
    for (;;) {
      const group = Array.from({ length: size }, (_, i) => `${prefix}-${refs.length + i}`);
      try {
        s.intake.commitIntake(
          group.map((r) => scan(r)),
          Date.now(),
        );
        refs.push(...group);
      } catch (err) {
        expect(isDiskFull(err)).toBe(true);
        break;
      }
    }
  }
  return refs;
}

let store: BufferStore | undefined;
let stopAll: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stopAll?.();
  stopAll = undefined;
  store?.close();
  store = undefined;
});

/** The deliverer and the disk guard as the app wires them: delivery's SQLITE_FULL makes the guard prune. */
function start(s: BufferStore, api: Upstream) {
  const mem = memoryLogger('info');
  const retention = new Retention({ store: s, retentionDays: 30, logger: mem.logger });
  // The file system has room; only SQLite's page limit is reached. No reserve: a page limit has none.
  const guard = new DiskGuard({
    store: s,
    retention,
    logger: mem.logger,
    reserveBytes: 0,
    statfs: () => ({ free: 1e12, size: 2e12 }),
    step: 200,
    // The audit batches finished a moment ago: no protected window, or nothing could yield.
    keepRecentHours: 0,
  });
  const config = deliverySchema.parse({
    mode: 'direct',
    maxBatchScans: 200,
    maxBatchDelayMs: 0,
    statusPollMs: 20,
    statusPollMaxMs: 50,
    retryBaseMs: 20,
    retryMaxMs: 50,
  });
  const deliverer = new Deliverer({
    store: s,
    api,
    config,
    logger: mem.logger,
    onDiskFull: () => guard.reportFull(),
    // The full buffer here is `max_page_count`, a limit of the store's connection alone: the
    // batch thread's own connection would write past it, and whether delivery ever met the full
    // buffer would depend on which connection formed each batch. The thread on a really full
    // disk is in test/integration/disk-full-tmpfs.test.ts.
    batchThread: false,
  });
  guard.start();
  deliverer.start();
  stopAll = async () => {
    await deliverer.stop();
    await guard.stop();
  };
  return { mem, guard, deliverer };
}

describe('delivery on a full buffer (max_page_count)', () => {
  it(
    'still records batch state, the audit yields oldest first, and every undelivered scan is delivered, none pruned',
    { timeout: 90_000 },
    async () => {
      const s = (store = BufferStore.openAt(
        join(mkdtempSync(join(tmpdir(), 'sg-full-delivery-')), 'buffer.db'),
      ));
      const first = deliveredBatch(s, 'AUDIT-1', 200);
      const second = deliveredBatch(s, 'AUDIT-2', 200);
      const newest = deliveredBatch(s, 'AUDIT-3', 200);
      // A page limit a little above what is used, then filled with undelivered scans to the last page.
      sqlOf(s).pragma(
        `max_page_count = ${(sqlOf(s).pragma('page_count', { simple: true }) as number) + 150}`,
      );
      const pending = fill(s, 'PENDING');
      expect(pending.length).toBeGreaterThan(100);

      const api = new Upstream();
      const { guard } = start(s, api);
      await waitFor(() => s.reports.totals().undeliveredScans === 0, {
        timeoutMs: 60_000,
        intervalMs: 50,
        what: 'every pending scan delivered on the full buffer',
      });

      // Delivery wrote its state (batches formed, uploaded, finished) although the buffer was full.
      const counts = api.counts();
      for (const r of pending) expect(counts.get(r), r).toBeGreaterThanOrEqual(1);
      expect([...counts.keys()].filter((r) => r.startsWith('AUDIT-'))).toEqual([]);
      // The audit yielded oldest first: the first delivered batch went before the newest one.
      const batches = sqlOf(s).prepare(`SELECT id FROM batches`).pluck().all() as number[];
      expect(batches).not.toContain(first);
      expect(guard.snapshot().prunedEarlyScans).toBeGreaterThan(0);
      if (batches.includes(second)) expect(batches).toContain(newest);
      // Undelivered scans were never pruned: every one reached the service (above), and what is
      // left in the buffer is delivered.
      expect(
        sqlOf(s).prepare(`SELECT count(*) FROM scans WHERE state <> 'delivered'`).pluck().get(),
      ).toBe(0);
      expect(sqlOf(s).pragma('integrity_check', { simple: true })).toBe('ok');
      expect(sqlOf(s).pragma('foreign_key_check')).toEqual([]);
    },
  );

  it(
    'a direct upload whose accepted answer cannot be recorded (SQLITE_FULL) is sent again, logged with its requestId and counted as a possible duplicate',
    { timeout: 90_000 },
    async () => {
      const s = (store = BufferStore.openAt(
        join(mkdtempSync(join(tmpdir(), 'sg-full-answer-')), 'buffer.db'),
      ));
      deliveredBatch(s, 'AUDIT-1', 200);
      deliveredBatch(s, 'AUDIT-2', 200);
      s.intake.commitIntake(
        Array.from({ length: 50 }, (_, i) => scan(`FIRST-${i}`)),
        Date.now(),
      );
      const api = new Upstream();
      let filler: string[] = [];
      // A requestId longer than a page: recording it needs new pages, so on the full buffer it fails
      // for certain (a short one might fit into a page already there).
      const lostRequestId = `lost-${'r'.repeat(9000)}`;
      api.duringNextUpload = () => {
        // While the POST is in flight, the disk fills (intake of other inputs, another program).
        sqlOf(s).pragma(
          `max_page_count = ${sqlOf(s).pragma('page_count', { simple: true }) as number}`,
        );
        filler = fill(s, 'FILL');
        return lostRequestId;
      };
      const { mem, deliverer } = start(s, api);
      await waitFor(() => api.uploads.length >= 1 && s.reports.totals().undeliveredScans === 0, {
        timeoutMs: 60_000,
        intervalMs: 50,
        what: 'every scan delivered after the lost answer',
      });

      // The first batch went twice: once accepted with the answer lost, once more after the disk had room.
      const firstBatch = api.uploads[0]!;
      expect(firstBatch.length).toBe(50);
      const counts = api.counts();
      for (const r of firstBatch) expect(counts.get(r)).toBe(2);
      for (const r of filler) expect(counts.get(r), r).toBe(1);
      expect(s.reports.possibleDuplicates()).toMatchObject({ totalUploads: 1, totalScans: 50 });
      expect(deliverer.snapshot().possibleDuplicatesTotal).toBe(50);
      const lines = mem.parsed();
      const lost = lines.find(
        (l) =>
          l.msg ===
          'the service accepted the batch but its answer could not be recorded; it will be sent again (possible duplicate)',
      );
      expect(lost).toMatchObject({ requestId: lostRequestId, scans: 50, diskFull: true });
      expect(lines.map((l) => l.msg)).toContain(
        'direct upload was in flight and its answer was not recorded; sending again (possible duplicate)',
      );
      expect(sqlOf(s).pragma('integrity_check', { simple: true })).toBe('ok');
    },
  );
});
