import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { deliverySchema } from '../../src/config/schema.js';
import { arrayBytes, BufferStore, type PendingScanRow } from '../../src/buffer/store.js';
import {
  BATCH_LOOKAHEAD,
  Batcher,
  formBatch,
  formFirst,
  HEAD_SUMS_MAX_SCANS,
  packScans,
} from '../../src/delivery/batcher.js';
import { MAX_DIRECT_BODY_BYTES } from '@scan-gateway/contract';
import { silentLogger } from '../../src/log.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { scanRecord } from '../helpers/records.js';
import { queriesOf } from '../helpers/queries.js';

// The packing rule (src/delivery/batcher.ts), against a real SQLite buffer in a temp dir, and as
// the pure function it is over rows.

let store: BufferStore | undefined;
afterEach(() => store?.close());

function open(): BufferStore {
  store = BufferStore.openAt(join(mkdtempSync(join(tmpdir(), 'sg-batcher-')), 'buffer.db'));
  return store;
}

const nowIso = new Date(0).toISOString();

describe('batcher: packing into a batch', () => {
  it('counts a batch body exactly as sent: brackets and commas included', () => {
    const s = open();
    s.intake.commitIntake([scanRecord('A', 100), scanRecord('B', 200), scanRecord('C', 50)], 0);
    const batch = formBatch(s, { maxScans: 10, maxBytes: 10_000, mode: 'direct', nowIso })!;
    expect(batch.bytes).toBe(arrayBytes(3, 350));
    expect(Buffer.byteLength(s.batches.batchBody(batch.id))).toBe(batch.bytes);
    expect(JSON.parse(s.batches.batchBody(batch.id))).toHaveLength(3);
  });

  it.each([
    ['one byte under the limit', 2 + 100 + 1 + 100 + 1, 2],
    ['exactly at the limit', 2 + 100 + 1 + 100, 2],
    ['one byte over the limit', 2 + 100 + 1 + 100 - 1, 1],
  ])('packs up to the byte limit: %s', (_name, maxBytes, expected) => {
    const s = open();
    s.intake.commitIntake([scanRecord('A', 100), scanRecord('B', 100)], 0);
    const batch = formBatch(s, { maxScans: 10, maxBytes, mode: 'direct', nowIso })!;
    expect(batch.scanCount).toBe(expected);
    expect(batch.bytes).toBeLessThanOrEqual(maxBytes);
    expect(Buffer.byteLength(s.batches.batchBody(batch.id))).toBe(batch.bytes);
  });

  it('never puts two scans with the same reference in one batch', () => {
    const s = open();
    s.intake.commitIntake([scanRecord('A', 40), scanRecord('A', 40), scanRecord('B', 40)], 0);
    const first = formBatch(s, { maxScans: 10, maxBytes: 10_000, mode: 'direct', nowIso })!;
    expect(first.scanCount).toBe(2);
    const second = formBatch(s, { maxScans: 10, maxBytes: 10_000, mode: 'direct', nowIso })!;
    expect(second.scanCount).toBe(1);
    expect(
      formBatch(s, { maxScans: 10, maxBytes: 10_000, mode: 'direct', nowIso }),
    ).toBeUndefined();
  });

  it('drains pending scans in which one reference repeats thousands of times; the others are not held up behind them', () => {
    const s = open();
    // 2000 batch transactions: durability is not what this test is about, so no fsync for each.
    sqlOf(s).pragma('synchronous = OFF');
    s.intake.commitIntake(
      [
        ...Array.from({ length: 2000 }, () => scanRecord('SAME', 40)),
        ...Array.from({ length: 100 }, (_, i) => scanRecord(`U${i}`, 40)),
      ],
      0,
    );
    const first = formBatch(s, { maxScans: 1000, maxBytes: 1e9, mode: 'direct', nowIso })!;
    // One SAME, and the unique ones behind the repeats (within the look-ahead) come along.
    expect(first.scanCount).toBe(101);
    let batches = 1;
    while (formBatch(s, { maxScans: 1000, maxBytes: 1e9, mode: 'direct', nowIso })) batches++;
    expect(batches).toBe(2000);
    expect(s.reports.totals().pendingScans).toBe(0);
    expect(BATCH_LOOKAHEAD).toBeGreaterThanOrEqual(2000);
  });

  it('holds a single scan too large for the batch limit instead of leaving it pending forever (direct mode)', () => {
    const s = open();
    s.intake.commitIntake([scanRecord('BIG', 500), scanRecord('A', 40)], 0);
    const batch = formBatch(s, {
      maxScans: 10,
      maxBytes: 200,
      mode: 'direct',
      nowIso,
      holdOversize: true,
    })!;
    expect(batch.scanCount).toBe(1);
    expect(s.reports.scanCounts()).toMatchObject({ held: 1, batched: 1 });
    expect(queriesOf(s).recentProblems(5)[0]).toMatchObject({
      reference: 'BIG',
      reason: expect.stringContaining('over the 200-byte limit'),
    });
  });

  it('never exceeds the byte limit, whatever the mix of sizes (pure rule over rows)', () => {
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let trial = 0; trial < 200; trial++) {
      const maxBytes = 50 + Math.floor(random() * 5000);
      const rows: PendingScanRow[] = Array.from({ length: 200 }, (_, i) => ({
        id: i + 1,
        reference: `R${Math.floor(random() * 150)}`,
        bytes: 1 + Math.floor(random() * 400),
      }));
      const packed = packScans(rows, { maxScans: 1 + Math.floor(random() * 100), maxBytes });
      const byId = new Map(rows.map((r) => [r.id, r]));
      const sum = packed.ids.reduce((n, id) => n + byId.get(id)!.bytes, 0);
      expect(packed.bytes).toBe(arrayBytes(packed.ids.length, sum));
      expect(packed.bytes).toBeLessThanOrEqual(maxBytes);
      expect(new Set(packed.ids.map((id) => byId.get(id)!.reference)).size).toBe(packed.ids.length);
      for (const o of packed.oversize) expect(o.bytes + 2).toBeGreaterThan(maxBytes);
      expect(packed.scanBytes).toBe(sum);
      // gapless: the ids are every row from the first taken to the last (the range writeBatch moves).
      if (packed.ids.length > 0) {
        const span = rows
          .filter((r) => r.id >= packed.ids[0]! && r.id <= packed.ids.at(-1)!)
          .map((r) => r.id);
        expect(packed.gapless, `trial ${trial}`).toBe(span.length === packed.ids.length);
      }
    }
  });

  it('forms a batch by id range when nothing was skipped, by the list of ids when something was, with the same scans and totals', () => {
    const s = open();
    s.intake.commitIntake(
      ['A', 'B', 'A', 'C', 'D', 'E'].map((r) => scanRecord(r, 40)),
      0,
    );
    const ids = sqlOf(s).prepare(`SELECT id FROM scan_rows ORDER BY id`).pluck().all() as number[];
    // A, B, then A again (skipped), C: not gapless; the second A waits for the next batch.
    const first = formBatch(s, { maxScans: 3, maxBytes: 1e9, mode: 'direct', nowIso })!;
    expect(
      sqlOf(s)
        .prepare(`SELECT id FROM scan_rows WHERE batch_id = ? ORDER BY id`)
        .pluck()
        .all(first.id),
    ).toEqual([ids[0], ids[1], ids[3]]);
    // A (the second), D, E: gapless, moved by range.
    const second = formBatch(s, { maxScans: 10, maxBytes: 1e9, mode: 'direct', nowIso })!;
    expect(
      sqlOf(s)
        .prepare(`SELECT id FROM scan_rows WHERE batch_id = ? ORDER BY id`)
        .pluck()
        .all(second.id),
    ).toEqual([ids[2], ids[4], ids[5]]);
    expect(s.reports.totals()).toEqual({
      pendingScans: 0,
      pendingBytes: 0,
      undeliveredScans: 6,
      undeliveredBytes: 240,
    });
  });

  it('forms a batch from the SQL sums of the queue head when it can go whole, reading no row, and from the rows when it cannot', () => {
    const s = open();
    let rowsRead = 0;
    const pendingScans = s.batches.pendingScans.bind(s.batches);
    s.batches.pendingScans = () => {
      rowsRead++;
      return pendingScans();
    };
    s.intake.commitIntake(
      ['A', 'B', 'C', 'D', 'A', 'E'].map((r) => scanRecord(r, 40)),
      0,
    );
    const ids = sqlOf(s).prepare(`SELECT id FROM scan_rows ORDER BY id`).pluck().all() as number[];
    // A, B, C: no reference repeated, 3 x 40 bytes fit: the head goes whole, by range.
    const first = formBatch(s, { maxScans: 3, maxBytes: 1e9, mode: 'direct', nowIso })!;
    expect(rowsRead).toBe(0);
    expect(first).toMatchObject({ scanCount: 3, bytes: arrayBytes(3, 120) });
    expect(
      sqlOf(s)
        .prepare(`SELECT id FROM scan_rows WHERE batch_id = ? ORDER BY id`)
        .pluck()
        .all(first.id),
    ).toEqual(ids.slice(0, 3));
    // D, A, E: the second A repeats no reference of this batch; whole again.
    s.intake.commitIntake(
      ['F', 'G', 'H'].map((r) => scanRecord(r, 40)),
      0,
    );
    const second = formBatch(s, { maxScans: 3, maxBytes: 1e9, mode: 'direct', nowIso })!;
    expect(rowsRead).toBe(0);
    expect(second.scanCount).toBe(3);
    // F, G, H do not fit 83 bytes together: packed from the rows, two scans.
    const third = formBatch(s, {
      maxScans: 3,
      maxBytes: arrayBytes(2, 80),
      mode: 'direct',
      nowIso,
    })!;
    expect(rowsRead).toBe(1);
    expect(third.scanCount).toBe(2);
    // A reference repeated in the head: packed from the rows, the repeat left for later.
    s.intake.commitIntake(
      ['J', 'J', 'K'].map((r) => scanRecord(r, 40)),
      0,
    );
    const fourth = formBatch(s, { maxScans: 3, maxBytes: 1e9, mode: 'direct', nowIso })!;
    expect(rowsRead).toBe(2);
    expect(
      sqlOf(s)
        .prepare(`SELECT reference FROM scan_rows WHERE batch_id = ? ORDER BY id`)
        .pluck()
        .all(fourth.id),
    ).toEqual(['H', 'J', 'K']);
    expect(s.reports.totals()).toMatchObject({ pendingScans: 1, pendingBytes: 40 });
    // A batch larger than the SQL sums take (a large SFTP batch): packed from the rows.
    s.intake.commitIntake(
      ['L', 'M'].map((r) => scanRecord(r, 40)),
      0,
    );
    const fifth = formBatch(s, {
      maxScans: HEAD_SUMS_MAX_SCANS + 1,
      maxBytes: 1e9,
      mode: 'sftp',
      nowIso,
    })!;
    expect(rowsRead).toBe(3);
    expect(fifth.scanCount).toBe(3);
  });

  it('forms exactly the batches packing the rows would, over random queues and limits (SQL sums or rows alike)', () => {
    let seed = 20261126;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    let byHead = 0;
    let byRows = 0;
    for (let trial = 0; trial < 40; trial++) {
      const s = open();
      const refs = Array.from(
        { length: 5 + Math.floor(random() * 60) },
        () => `R${Math.floor(random() * (random() < 0.5 ? 8 : 1000))}`,
      );
      s.intake.commitIntake(
        refs.map((r) => scanRecord(r, 40 + Math.floor(random() * 90))),
        0,
      );
      for (let round = 0; round < 100 && s.reports.totals().pendingScans > 0; round++) {
        const opts = {
          maxScans: 1 + Math.floor(random() * 12),
          maxBytes: random() < 0.5 ? 1e9 : 150 + Math.floor(random() * 600),
        };
        const expected = packScans([...s.batches.pendingScans()], opts);
        const head = s.batches.pendingHead(opts.maxScans);
        const whole =
          head.references === head.scans && arrayBytes(head.scans, head.scanBytes) <= opts.maxBytes;
        const batch = formBatch(s, { ...opts, mode: 'direct', nowIso, holdOversize: true });
        if (expected.ids.length === 0) {
          expect(batch, `trial ${trial} round ${round}`).toBeUndefined();
          continue;
        }
        if (whole) byHead++;
        else byRows++;
        expect(
          sqlOf(s)
            .prepare(`SELECT id FROM scan_rows WHERE batch_id = ? ORDER BY id`)
            .pluck()
            .all(batch!.id),
          `trial ${trial} round ${round}`,
        ).toEqual(expected.ids);
        expect(batch!.bytes, `trial ${trial} round ${round}`).toBe(expected.bytes);
      }
      const recount = sqlOf(s)
        .prepare(
          `SELECT count(*) AS scans, coalesce(sum(bytes), 0) AS bytes FROM scan_rows WHERE state = 'pending'`,
        )
        .get() as { scans: number; bytes: number };
      expect(s.reports.totals()).toMatchObject({
        pendingScans: recount.scans,
        pendingBytes: recount.bytes,
      });
      s.close();
      store = undefined;
    }
    // Both ways were taken, often.
    expect(byHead).toBeGreaterThan(50);
    expect(byRows).toBeGreaterThan(50);
  });

  it('plans a batch written in steps: the head as pendingHead sums it, and spans of stepScans pending scans with the other states between left out', () => {
    let seed = 20261129;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let trial = 0; trial < 20; trial++) {
      const s = open();
      const count = 1 + Math.floor(random() * 300);
      s.intake.commitIntake(
        Array.from({ length: count }, () =>
          scanRecord(
            `R${Math.floor(random() * (random() < 0.5 ? 40 : 10_000))}`,
            40 + Math.floor(random() * 90),
          ),
        ),
        0,
      );
      // Some scans in the middle are in another state (held), as after a refusal.
      sqlOf(s)
        .prepare(`UPDATE scan_rows SET state = 'held' WHERE id % 7 = ?`)
        .run(Math.floor(random() * 7));
      const limit = 1 + Math.floor(random() * 250);
      const stepScans = 1 + Math.floor(random() * 60);
      const rows = sqlOf(s)
        .prepare(`SELECT id, bytes FROM scan_rows WHERE state = 'pending' ORDER BY id LIMIT ?`)
        .all(limit) as { id: number; bytes: number }[];
      const expected = [];
      for (let i = 0; i < rows.length; i += stepScans) {
        const span = rows.slice(i, i + stepScans);
        expected.push({
          first: span[0]!.id,
          last: span[span.length - 1]!.id,
          count: span.length,
          scanBytes: span.reduce((n, r) => n + r.bytes, 0),
        });
      }
      const plan = s.batches.planSteps(limit, stepScans);
      expect(plan.head, `trial ${trial}`).toEqual(s.batches.pendingHead(limit));
      expect(plan.spans, `trial ${trial}`).toEqual(expected);
      s.close();
      store = undefined;
    }
  });

  it("writes a backlog's batch in steps, each its own hold of the turn, whole after each, the batch formBatch forms", () => {
    const records = Array.from({ length: 2500 }, (_, i) => scanRecord(`R${i}`, 40 + (i % 50)));
    const opts = { maxScans: 2500, maxBytes: 1e9, mode: 'direct' as const, nowIso };
    const whole = open();
    whole.intake.commitIntake(records, 0);
    const expected = formBatch(whole, opts)!;
    whole.close();

    const s = open();
    s.intake.commitIntake(records, 0);
    // After each hold: the batch's own count against the scans it holds.
    const steps: { scanCount: number; held: number }[] = [];
    const turn = {
      hold<T>(write: () => T): T {
        const out = write();
        const batch = s.batches.batch(s.batches.lastBatchId())!;
        const held = sqlOf(s)
          .prepare(`SELECT count(*) FROM scan_rows WHERE batch_id = ?`)
          .pluck()
          .get(batch.id) as number;
        steps.push({ scanCount: batch.scanCount, held });
        return out;
      },
    };
    const batch = formFirst(s, [opts], turn, 1000)!;
    expect(steps).toEqual([
      { scanCount: 1000, held: 1000 },
      { scanCount: 2000, held: 2000 },
      { scanCount: 2500, held: 2500 },
    ]);
    expect(batch).toMatchObject({ scanCount: expected.scanCount, bytes: expected.bytes });
    expect(s.batches.pending().count).toBe(0);

    // A head that repeats a reference cannot go whole: packed from the rows, in one hold.
    s.intake.commitIntake(
      ['A', 'B', 'A', 'C'].map((r) => scanRecord(r, 40)),
      0,
    );
    steps.length = 0;
    const packed = formFirst(s, [{ ...opts, maxScans: 4 }], turn, 2)!;
    expect(steps).toHaveLength(1);
    expect(packed.scanCount).toBe(3);
  });

  it('writes nothing when a batch claimed gapless is not (every pending scan of the range must be in it)', () => {
    const s = open();
    s.intake.commitIntake(
      ['A', 'B', 'C'].map((r) => scanRecord(r, 40)),
      0,
    );
    const ids = sqlOf(s).prepare(`SELECT id FROM scan_rows ORDER BY id`).pluck().all() as number[];
    expect(() =>
      s.batches.writeBatch({
        mode: 'direct',
        scanIds: [ids[0]!, ids[2]!],
        bytes: 83,
        scanBytes: 80,
        gapless: true,
        nowIso,
      }),
    ).toThrow(/3 scans would have moved for the 2 given/);
    expect(s.reports.totals()).toEqual({
      pendingScans: 3,
      pendingBytes: 120,
      undeliveredScans: 3,
      undeliveredBytes: 120,
    });
    expect(sqlOf(s).prepare(`SELECT count(*) FROM batches`).pluck().get()).toBe(0);
  });

  it('takes at most maxScans scans, oldest first, and stops reading rows once the batch is full', () => {
    let read = 0;
    function* rows(): Generator<PendingScanRow> {
      for (let i = 1; i <= 1000; i++) {
        read++;
        yield { id: i, reference: `R${i}`, bytes: 10 };
      }
    }
    const packed = packScans(rows(), { maxScans: 3, maxBytes: 1e9 });
    expect(packed.ids).toEqual([1, 2, 3]);
    expect(read).toBe(3);
  });

  it('leaves a scan too large alone pending without holdOversize', () => {
    const s = open();
    s.intake.commitIntake([scanRecord('BIG', 500)], 0);
    expect(formBatch(s, { maxScans: 10, maxBytes: 200, mode: 'direct', nowIso })).toBeUndefined();
    expect(s.reports.totals().pendingScans).toBe(1);
  });
});

describe('batcher: when a batch is due', () => {
  function batcher(
    s: BufferStore,
    t: { now: number },
    over: Record<string, unknown> = {},
  ): Batcher {
    const config = deliverySchema.parse({
      mode: 'direct',
      maxBatchScans: 3,
      maxBatchDelayMs: 1000,
      ...over,
    });
    return new Batcher({ store: s, config, logger: silentLogger(), now: () => t.now });
  }

  it('answers undefined with nothing pending', () => {
    const s = open();
    expect(batcher(s, { now: 0 }).formIfDue()).toBeUndefined();
  });

  it('waits for the oldest scan to reach maxBatchDelayMs, then forms a batch (age rule)', () => {
    const s = open();
    s.intake.commitIntake([scanRecord('A', 40)], 0);
    const created = s.batches.pending().oldestCreatedAt!;
    const t = { now: created + 400 };
    const b = batcher(s, t);
    expect(b.formIfDue()).toBe(600);
    expect(s.batches.batchesInState('ready')).toHaveLength(0);
    t.now = created + 1000;
    expect(b.formIfDue()).toBe(0);
    expect(s.batches.batchesInState('ready').map((x) => x.scanCount)).toEqual([1]);
  });

  it('forms a batch at once when maxBatchScans are pending (count rule), and only that many', () => {
    const s = open();
    s.intake.commitIntake(
      [scanRecord('A', 40), scanRecord('B', 40), scanRecord('C', 40), scanRecord('D', 40)],
      0,
    );
    const t = { now: s.batches.pending().oldestCreatedAt! };
    expect(batcher(s, t).formIfDue()).toBe(0);
    expect(s.batches.batchesInState('ready').map((x) => x.scanCount)).toEqual([3]);
    expect(s.reports.totals().pendingScans).toBe(1);
  });

  it('forms a batch at once when the pending bytes reach the direct limit (byte rule), never over it', () => {
    const s = open();
    sqlOf(s).pragma('synchronous = OFF');
    const size = 100_000;
    const n = Math.ceil(MAX_DIRECT_BODY_BYTES / size) + 2;
    s.intake.commitIntake(
      Array.from({ length: n }, (_, i) => scanRecord(`R${i}`, size)),
      0,
    );
    const t = { now: s.batches.pending().oldestCreatedAt! };
    expect(batcher(s, t, { maxBatchScans: 5000 }).formIfDue()).toBe(0);
    const [batch] = s.batches.batchesInState('ready');
    expect(batch!.mode).toBe('direct');
    expect(batch!.bytes).toBeLessThanOrEqual(MAX_DIRECT_BODY_BYTES);
    expect(batch!.scanCount).toBe(Math.floor((MAX_DIRECT_BODY_BYTES - 1) / (size + 1)));
    expect(Buffer.byteLength(s.batches.batchBody(batch!.id))).toBe(batch!.bytes);
  });

  it('auto mode: a backlog goes pre-signed, a small remainder direct', () => {
    const s = open();
    s.intake.commitIntake(
      [scanRecord('A', 40), scanRecord('B', 40), scanRecord('C', 40), scanRecord('D', 40)],
      0,
    );
    const t = { now: s.batches.pending().oldestCreatedAt! + 1000 };
    const b = batcher(s, t, { mode: 'auto' });
    expect(b.form()?.mode).toBe('presigned');
    s.intake.commitIntake([scanRecord('E', 40)], 0);
    expect(b.form()?.mode).toBe('direct');
  });
});
