import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/buffer/migrations.js';
import { OutboxCounts } from '../../src/buffer/outbox-counts.js';
import { replayDeadLetters, type ReplayMapping } from '../../src/buffer/replay.js';
import { Retention } from '../../src/buffer/retention.js';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { silentLogger } from '../../src/log.js';
import { scanAt } from '../helpers/records.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { queriesOf } from '../helpers/queries.js';

// The health page, /healthz and the metrics read scan and batch counts from tables kept by
// triggers (migration 3). These tests hold those tables against a GROUP BY of the rows themselves
// after each kind of change the gateway makes.

const DAY = 24 * 3600_000;
const NOW = Date.parse('2026-12-31T12:00:00Z');
let store: BufferStore | undefined;
afterEach(() => store?.close());

const scan = (reference: string, at: number): IntakeRecord => scanAt(reference, 'GI-01', at);

/** Scan counts by state and batch counts by mode and label, counted from the rows. */
function groupedCounts(db: Database.Database) {
  const scans: Record<string, number> = {};
  for (const r of db.prepare(`SELECT state, count(*) AS n FROM scans GROUP BY state`).all() as {
    state: string;
    n: number;
  }[])
    scans[r.state] = r.n;
  const replayed = db
    .prepare(`SELECT state, count(*) AS n FROM scans WHERE replayed_by IS NOT NULL GROUP BY state`)
    .all() as { state: string; n: number }[];
  for (const r of replayed) {
    scans[r.state] = scans[r.state]! - r.n;
    if (scans[r.state] === 0) delete scans[r.state];
    scans.replayed = (scans.replayed ?? 0) + r.n;
  }
  const batches = db
    .prepare(
      `SELECT mode, CASE WHEN state = 'done' THEN coalesce(upstream_state, 'done') ELSE state END AS state, count(*) AS count
         FROM batches GROUP BY 1, 2 ORDER BY 1, 2`,
    )
    .all();
  return { scans, batches };
}

function expectCountsTrue(s: BufferStore, step: string): void {
  const truth = groupedCounts(sqlOf(s));
  expect(s.reports.scanCounts(), `scan counts after ${step}`).toEqual(truth.scans);
  expect(queriesOf(s).batchCounts(), `batch counts after ${step}`).toEqual(truth.batches);
  // `buffer stats` counts the rows its own way: the same counts, and no difference reported.
  const stats = queriesOf(s).stats();
  expect(stats.scans, `buffer stats after ${step}`).toEqual(truth.scans);
  expect(stats.statusScans, `buffer stats after ${step}`).toBeUndefined();
}

const remap = (read: { raw: Buffer }): ReplayMapping => ({
  outcome: 'scan',
  scan: { reference: read.raw.toString(), dcpKey: 'GI-02' },
  instant: new Date(NOW),
});

describe('buffer counts kept by triggers', () => {
  it('match the rows through intake, batching, split, hold, every terminal state, replay and retention', async () => {
    const s = (store = BufferStore.openAt(
      join(mkdtempSync(join(tmpdir(), 'sg-counts-')), 'buffer.db'),
    ));
    expectCountsTrue(s, 'an empty buffer');
    const old = NOW - 40 * DAY;
    s.intake.commitIntake(
      Array.from({ length: 12 }, (_, i) => scan(`A-${i}`, old)),
      old,
    );
    expectCountsTrue(s, 'intake');

    const oldIso = new Date(old).toISOString();
    const success = formBatch(s, { maxScans: 4, maxBytes: 1e9, mode: 'direct', nowIso: oldIso })!;
    expectCountsTrue(s, 'forming a batch');
    s.batches.updateBatch(success.id, { state: 'uploading' });
    s.batches.updateBatch(success.id, {
      state: 'uploaded',
      requestId: '1',
      upstreamState: 'InProgress',
    });
    expectCountsTrue(s, 'upload and an intermediate status');
    s.batches.finishBatch(success.id, { state: 'Success' }, oldIso);
    expectCountsTrue(s, 'Success');

    const partly = formBatch(s, { maxScans: 3, maxBytes: 1e9, mode: 'presigned', nowIso: oldIso })!;
    s.batches.finishBatch(
      partly.id,
      { state: 'HasFailures', failures: [{ reference: 'A-4', reason: 'Invalid DCP' }] },
      oldIso,
    );
    expectCountsTrue(s, 'HasFailures');

    const failed = formBatch(s, { maxScans: 2, maxBytes: 1e9, mode: 'direct', nowIso: oldIso })!;
    s.batches.finishBatch(failed.id, { state: 'Failed', description: 'unreadable' }, oldIso);
    expectCountsTrue(s, 'Failed without failures');

    const split = formBatch(s, { maxScans: 2, maxBytes: 1e9, mode: 'direct', nowIso: oldIso })!;
    expect(s.batches.splitBatch(split.id)).toBe(true);
    expectCountsTrue(s, 'a split');
    const held = formBatch(s, { maxScans: 1, maxBytes: 1e9, mode: 'direct', nowIso: oldIso })!;
    s.batches.holdBatch(held.id, 'refused as too large');
    expectCountsTrue(s, 'a hold');

    const replay = replayDeadLetters(s.deadLetters, remap, { all: true }, NOW);
    expect(replay.queued).toBeGreaterThan(0);
    expectCountsTrue(s, 'a replay');
    const again = formBatch(s, { maxScans: 100, maxBytes: 1e9, mode: 'direct', nowIso: oldIso })!;
    s.batches.finishBatch(again.id, { state: 'Success' }, oldIso);
    expectCountsTrue(s, 'delivering the replayed scans');

    const pruned = await new Retention({
      store: s,
      retentionDays: 30,
      logger: silentLogger(),
      now: () => NOW,
      chunk: 2,
    }).prune();
    expect(pruned.scans).toBeGreaterThan(0);
    expectCountsTrue(s, 'retention');
    // The rows are gone; the lifetime counts say what went, delivered scans and dead letters apart.
    expect(queriesOf(s).pruned()).toEqual({
      deliveredScans: pruned.scans,
      deliveredScansEarly: 0,
      deadLetters: pruned.deadLetters,
    });
    expect(pruned.deadLetters).toBeGreaterThan(0);
    expect(queriesOf(s).stats().pruned).toEqual(queriesOf(s).pruned());
  });

  it('are read as one snapshot: a batch finished between two of their reads is counted once', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'sg-counts-snapshot-')), 'buffer.db');
    const s = (store = BufferStore.openAt(file));
    s.intake.commitIntake([scan('S-1', NOW), scan('S-2', NOW), scan('S-3', NOW)], NOW);
    const iso = new Date(NOW).toISOString();
    const b = formBatch(s, { maxScans: 3, maxBytes: 1e9, mode: 'direct', nowIso: iso })!;
    // The status's own read-only connection; the gateway's writer finishes the batch (a real
    // commit on the store's connection) right after the first read, the undelivered totals.
    const reader = new Database(file, { readonly: true });
    try {
      let finished = false;
      const interleaved = new Proxy(reader, {
        get(target, key) {
          if (key !== 'prepare') {
            const v = Reflect.get(target, key) as unknown;
            return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
          }
          return (sql: string) => {
            const st = target.prepare(sql);
            if (!sql.includes('FROM buffer_totals')) return st;
            return new Proxy(st, {
              get(t, k) {
                if (k !== 'get') {
                  const v = Reflect.get(t, k) as unknown;
                  return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
                }
                return (...args: unknown[]) => {
                  const row = t.get(...args);
                  if (!finished) {
                    finished = true;
                    s.batches.finishBatch(b.id, { state: 'Success' }, iso);
                  }
                  return row;
                };
              },
            });
          };
        },
      });
      // Before the batch finished, as the snapshot saw it: three in flight, none delivered twice.
      expect(new OutboxCounts(interleaved).scanCounts()).toEqual({ batched: 3 });
      expect(finished).toBe(true);
      expect(new OutboxCounts(reader).scanCounts()).toEqual({ delivered: 3 });
    } finally {
      reader.close();
    }
  });

  it('buffer stats says so when the counts the status reads no longer match the rows', () => {
    const s = (store = BufferStore.openAt(
      join(mkdtempSync(join(tmpdir(), 'sg-counts-drift-')), 'buffer.db'),
    ));
    s.intake.commitIntake([scan('D-1', NOW), scan('D-2', NOW)], NOW);
    const b = formBatch(s, { maxScans: 2, maxBytes: 1e9, mode: 'direct', nowIso: '' })!;
    s.batches.finishBatch(b.id, { state: 'Success' }, new Date(NOW).toISOString());
    expect(queriesOf(s).stats().statusScans).toBeUndefined();
    // A counter off by 73, as a fault (or a hand edit) would leave it.
    sqlOf(s)
      .prepare(`UPDATE scan_state_counts SET scans = scans + 73 WHERE state = 'delivered'`)
      .run();
    const stats = queriesOf(s).stats();
    expect(stats.scans).toEqual({ delivered: 2 });
    expect(stats.statusScans).toEqual({ delivered: 75 });
  });

  it('are computed from the rows when an older buffer is migrated', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'sg-counts-v2-')), 'buffer.db');
    const v2 = new Database(file);
    v2.exec(MIGRATIONS[0]!);
    v2.exec(MIGRATIONS[1]!);
    v2.pragma('user_version = 2');
    const read = v2.prepare(
      `INSERT INTO reads (id, input_id, received_at, raw, outcome) VALUES (?, 'in', '2026-01-01T00:00:00.000Z', x'41', 'scan')`,
    );
    const addScan = v2.prepare(
      `INSERT INTO scans (read_id, dcp_key, reference, time_utc, body, bytes, created_at, state, batch_id) VALUES (?, 'GI-01', ?, '', '{}', 2, 0, ?, ?)`,
    );
    v2.prepare(
      `INSERT INTO batches (id, mode, state, scan_count, bytes, created_at, upstream_state) VALUES (1, 'direct', 'done', 3, 10, '', 'HasFailures'), (2, 'presigned', 'uploaded', 1, 4, '', NULL)`,
    ).run();
    const states: [string, number | null][] = [
      ['delivered', 1],
      ['delivered', 1],
      ['failed', 1],
      ['batched', 2],
      ['pending', null],
    ];
    states.forEach(([state, batch], i) => {
      read.run(i + 1);
      addScan.run(i + 1, `R-${i}`, state, batch);
    });
    v2.close();
    const s = (store = BufferStore.openAt(file));
    expect(s.reports.scanCounts()).toEqual({ delivered: 2, failed: 1, batched: 1, pending: 1 });
    expectCountsTrue(s, 'the migration');
  });
});
