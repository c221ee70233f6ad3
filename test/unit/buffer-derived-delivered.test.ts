import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/buffer/migrations.js';
import { Retention } from '../../src/buffer/retention.js';
import { BufferStore } from '../../src/buffer/store.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { scanAt } from '../helpers/records.js';
import { queriesOf } from '../helpers/queries.js';

// Since migration 13 a finished batch leaves its delivered scans' rows `batched`;
// the batch being done makes them delivered. Every count the gateway keeps (buffer_totals,
// scan_state_counts) and every report must say what the rows, read that way, say.

const NOW = Date.parse('2026-11-25T08:00:00Z');
const nowIso = new Date(NOW).toISOString();

let store: BufferStore | undefined;
afterEach(() => {
  store?.close();
  store = undefined;
});

function open(file = ':memory:'): BufferStore {
  store = BufferStore.openAt(file);
  return store;
}

const intake = (s: BufferStore, refs: string[], dcp = 'GI-01') =>
  s.intake.commitIntake(
    refs.map((r) => scanAt(r, dcp, NOW)),
    NOW,
  );
const form = (s: BufferStore, maxScans: number) =>
  formBatch(s, { maxScans, maxBytes: 1e9, mode: 'direct', nowIso });

/** The states by a recount of the rows through the view `scans` (the derived state), without any index. */
function recount(s: BufferStore): Record<string, number> {
  const rows = sqlOf(s)
    .prepare(`SELECT state AS k, count(*) AS n FROM scans GROUP BY state`)
    .all() as { k: string; n: number }[];
  return Object.fromEntries(rows.map((r) => [r.k, r.n]));
}

/** The totals by a recount of the rows (pending, and pending or batched in a batch not done). */
function retotal(s: BufferStore) {
  return sqlOf(s)
    .prepare(
      `SELECT coalesce(sum(state = 'pending'), 0) AS pendingScans, coalesce(sum((state = 'pending') * bytes), 0) AS pendingBytes,
              count(*) AS undeliveredScans, coalesce(sum(bytes), 0) AS undeliveredBytes
         FROM scans WHERE state IN ('pending', 'batched')`,
    )
    .get();
}

/** Every count the store keeps equals the recount; `replayed` is not used here. */
function expectCountsHold(s: BufferStore): void {
  expect(s.reports.scanCounts()).toEqual(recount(s));
  expect(s.reports.totals()).toEqual(retotal(s));
  expect(queriesOf(s).stats().scans).toEqual(recount(s));
}

describe('a finished batch leaves its rows as they are', () => {
  it('finishing writes no scan row: the rows stay batched, the view, counts, totals and reports say delivered', () => {
    const s = open();
    intake(s, ['A', 'B', 'C', 'D']);
    const batch = form(s, 3)!;
    s.batches.updateBatch(batch.id, { state: 'uploaded', requestId: 'r1' });
    const db = sqlOf(s);
    const rowsBefore = db.prepare(`SELECT * FROM scan_rows ORDER BY id`).all();
    s.batches.finishBatch(batch.id, { state: 'Success', processed: 3 }, nowIso);
    expect(db.prepare(`SELECT * FROM scan_rows ORDER BY id`).all()).toEqual(rowsBefore);
    expect(
      db
        .prepare(`SELECT state FROM scan_rows WHERE batch_id = ? ORDER BY id`)
        .pluck()
        .all(batch.id),
    ).toEqual(['batched', 'batched', 'batched']);
    expect(
      db.prepare(`SELECT state FROM scans WHERE batch_id = ? ORDER BY id`).pluck().all(batch.id),
    ).toEqual(['delivered', 'delivered', 'delivered']);
    expect(s.reports.scanCounts()).toEqual({ delivered: 3, pending: 1 });
    expectCountsHold(s);
    expect(queriesOf(s).trace('A').scans[0]!.state).toBe('delivered');
    expect(
      queriesOf(s)
        .stationRecent(['GI-01'], 10)
        .map((r) => r.scanState),
    ).toEqual(['pending', 'delivered', 'delivered', 'delivered']);
    const queue = queriesOf(s).queue(NOW);
    expect(queue.byDcp).toEqual([{ dcp: 'GI-01', waiting: 1, inFlight: 0, oldestAgeMs: 0 }]);
    expect(queriesOf(s).oldestUndeliveredCreatedAt()).toBe(NOW);
  });

  it('scans in flight are counted from the open batches only', () => {
    const s = open();
    intake(s, ['A', 'B', 'C', 'D', 'E']);
    const done = form(s, 2)!;
    s.batches.finishBatch(done.id, { state: 'Success' }, nowIso);
    form(s, 2);
    const queue = queriesOf(s).queue(NOW);
    expect(queue.byDcp).toEqual([{ dcp: 'GI-01', waiting: 1, inFlight: 2, oldestAgeMs: 0 }]);
    expect(queue.byAge.reduce((a, b) => a + b.scans, 0)).toBe(3);
    expect(s.reports.scanCounts()).toEqual({ delivered: 2, batched: 2, pending: 1 });
    expectCountsHold(s);
  });

  it('the oldest undelivered scan is the oldest pending or in an open batch, never one of a done batch', () => {
    const s = open();
    s.intake.commitIntake(
      ['A', 'B'].map((r) => scanAt(r, 'GI-01', NOW)),
      NOW - 3000,
    );
    s.intake.commitIntake([scanAt('C', 'GI-01', NOW)], NOW - 2000);
    s.intake.commitIntake([scanAt('D', 'GI-01', NOW)], NOW - 1000);
    const first = form(s, 2)!;
    const second = form(s, 1)!;
    expect(queriesOf(s).oldestUndeliveredCreatedAt()).toBe(NOW - 3000);
    s.batches.finishBatch(first.id, { state: 'Success' }, nowIso);
    expect(queriesOf(s).oldestUndeliveredCreatedAt()).toBe(NOW - 2000);
    s.batches.finishBatch(second.id, { state: 'Success' }, nowIso);
    expect(queriesOf(s).oldestUndeliveredCreatedAt()).toBe(NOW - 1000);
  });

  it('a report after the transfer (SFTP) moves refused scans out of delivered once', () => {
    const s = open();
    intake(s, ['A', 'B', 'C']);
    const batch = form(s, 10)!;
    s.batches.finishBatch(batch.id, { state: 'transferred' }, nowIso);
    expect(s.reports.scanCounts()).toEqual({ delivered: 3 });
    s.batches.finishBatch(
      batch.id,
      {
        state: 'HasFailures',
        processed: 2,
        failed: 1,
        failures: [{ reference: 'B', reason: 'Invalid DCP' }],
      },
      nowIso,
    );
    expect(s.reports.scanCounts()).toEqual({ delivered: 2, failed: 1 });
    expectCountsHold(s);
    // The same report again changes nothing.
    s.batches.finishBatch(
      batch.id,
      {
        state: 'HasFailures',
        processed: 2,
        failed: 1,
        failures: [{ reference: 'B', reason: 'Invalid DCP' }],
      },
      nowIso,
    );
    expect(s.reports.scanCounts()).toEqual({ delivered: 2, failed: 1 });
    expectCountsHold(s);
  });

  it('a batch Failed whole, first or after the transfer, fails every scan once', () => {
    const s = open();
    intake(s, ['A', 'B', 'C', 'D']);
    const first = form(s, 2)!;
    s.batches.finishBatch(first.id, { state: 'Failed', description: 'unreadable' }, nowIso);
    const second = form(s, 2)!;
    s.batches.finishBatch(second.id, { state: 'transferred' }, nowIso);
    s.batches.finishBatch(second.id, { state: 'Failed', description: 'unreadable' }, nowIso);
    expect(s.reports.scanCounts()).toEqual({ failed: 4 });
    expect(s.reports.totals()).toEqual({
      pendingScans: 0,
      pendingBytes: 0,
      undeliveredScans: 0,
      undeliveredBytes: 0,
    });
    expectCountsHold(s);
  });

  it('retention deletes delivered scans whose rows say batched, and the counts follow, on a full disk too', async () => {
    const s = open(join(mkdtempSync(join(tmpdir(), 'sg-derived-')), 'buffer.db'));
    intake(
      s,
      Array.from({ length: 400 }, (_, i) => `OLD-${i}`),
    );
    for (let i = 0; i < 2; i++)
      s.batches.finishBatch(form(s, 200)!.id, { state: 'Success' }, nowIso);
    intake(s, ['NEW-1', 'NEW-2']);
    // No page left: retention must free space without writing a longer row first.
    const db = sqlOf(s);
    db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true }) as number}`);
    const fill = db.prepare('INSERT INTO space_probe (pad) VALUES (zeroblob(512))');
    for (;;) {
      try {
        fill.run();
      } catch {
        break;
      }
    }
    const retention = new Retention({
      store: s,
      retentionDays: 30,
      logger: memoryLogger('info').logger,
    });
    const pruned = await retention.pruneOldestDelivered(1000);
    // The newest row of a table is never pruned; here that is NEW-2, pending.
    expect(pruned.scans).toBe(400);
    expect(s.reports.scanCounts()).toEqual({ pending: 2 });
    expectCountsHold(s);
  });

  it('an older buffer (schema 12, rows written delivered) keeps its counts and reads the same after migration 13', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'sg-derived-')), 'buffer.db');
    const raw = new Database(file);
    raw.pragma('journal_mode = WAL');
    for (const m of MIGRATIONS.slice(0, 12)) raw.exec(m);
    raw.pragma('user_version = 12');
    raw.exec(
      `INSERT INTO batches (id, mode, state, scan_count, bytes, created_at) VALUES (1, 'direct', 'done', 2, 10, '${nowIso}'), (2, 'direct', 'uploaded', 1, 10, '${nowIso}')`,
    );
    const read = raw.prepare(
      `INSERT INTO reads (id, input_id, received_at, raw, outcome) VALUES (?, 'in', ?, ?, 'scan')`,
    );
    const row = raw.prepare(
      `INSERT INTO scan_rows (id, read_id, dcp_key, reference, time_utc, bytes, state, batch_id, created_at) VALUES (?, ?, 'GI-01', ?, ?, 5, ?, ?, ?)`,
    );
    const body = raw.prepare(`INSERT INTO scan_bodies (id, body) VALUES (?, '{}')`);
    const rows: [string, string, number | null][] = [
      ['D1', 'delivered', 1],
      ['D2', 'delivered', 1],
      ['F', 'batched', 2],
      ['P', 'pending', null],
    ];
    rows.forEach(([ref, state, batch], i) => {
      read.run(i + 1, nowIso, Buffer.from(ref));
      row.run(i + 1, i + 1, ref, nowIso, state, batch, NOW);
      body.run(i + 1);
    });
    const before = raw.prepare(`SELECT * FROM scans ORDER BY id`).all();
    raw.close();
    const s = open(file);
    expect(sqlOf(s).prepare(`SELECT * FROM scans ORDER BY id`).all()).toEqual(before);
    expect(s.reports.scanCounts()).toEqual({ delivered: 2, batched: 1, pending: 1 });
    expectCountsHold(s);
    s.batches.finishBatch(2, { state: 'Success' }, nowIso);
    expect(s.reports.scanCounts()).toEqual({ delivered: 3, pending: 1 });
    expectCountsHold(s);
  });

  it('keeps every count equal to a recount through any sequence of delivery steps (seeded, 400 steps)', async () => {
    const s = open(join(mkdtempSync(join(tmpdir(), 'sg-derived-')), 'buffer.db'));
    const retention = new Retention({
      store: s,
      retentionDays: 30,
      logger: memoryLogger('info').logger,
    });
    let seed = 17;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      // The high bits: an LCG's low bits repeat with a short period.
      return Math.floor((seed / 2 ** 31) * n);
    };
    let next = 0;
    const seen = new Set<string>();
    const open_ = () => s.batches.batchesInState('ready', 'uploaded');
    for (let step = 0; step < 400; step++) {
      const choice = rand(9);
      if (choice <= 1)
        intake(
          s,
          Array.from({ length: 1 + rand(6) }, () => `R-${next++ % 40}`),
          `DCP-${rand(3)}`,
        );
      else if (choice === 2) form(s, 1 + rand(5));
      else if (choice <= 5 && open_().length > 0) {
        const batch = open_()[rand(open_().length)]!;
        const refs = sqlOf(s)
          .prepare(`SELECT reference FROM scan_rows WHERE batch_id = ?`)
          .pluck()
          .all(batch.id) as string[];
        const failures = refs
          .filter(() => rand(4) === 0)
          .map((reference) => ({ reference, reason: 'Invalid DCP' }));
        const kind = rand(5);
        if (kind === 0)
          s.batches.finishBatch(batch.id, { state: 'Failed', description: 'whole' }, nowIso);
        else if (kind === 1) {
          s.batches.finishBatch(batch.id, { state: 'transferred' }, nowIso);
          s.batches.finishBatch(
            batch.id,
            { state: failures.length > 0 ? 'HasFailures' : 'Success', failures },
            nowIso,
          );
        } else
          s.batches.finishBatch(
            batch.id,
            { state: failures.length > 0 ? 'HasFailures' : 'Success', failures },
            nowIso,
          );
      } else if (choice === 6 && open_().length > 0) s.batches.holdBatch(open_()[0]!.id, 'refused');
      else if (choice === 7 && open_().length > 0) s.batches.splitBatch(open_()[0]!.id);
      else if (choice === 8) await retention.pruneOldestDelivered(1 + rand(8));
      expectCountsHold(s);
      for (const k of Object.keys(recount(s))) seen.add(k);
    }
    // The sequence reached every state, so the checks above covered each kind of move.
    expect([...seen].sort()).toEqual(['batched', 'delivered', 'failed', 'held', 'pending']);
  });
});
