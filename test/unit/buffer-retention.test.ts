import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Retention } from '../../src/buffer/retention.js';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { silentLogger } from '../../src/log.js';
import { scanAt } from '../helpers/records.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { waitFor } from '../helpers/wait.js';

const DAY = 24 * 3600_000;
const NOW = Date.parse('2026-12-31T12:00:00Z');
let store: BufferStore | undefined;
afterEach(() => store?.close());

const scan = (reference: string, at: number): IntakeRecord => scanAt(reference, 'GI-01', at);

function other(outcome: 'noRead' | 'duplicate' | 'rejected', at: number): IntakeRecord {
  return {
    inputId: 'in',
    receivedAt: new Date(at),
    raw: Buffer.from(outcome),
    outcome,
    ...(outcome === 'rejected' ? { reason: 'invalid GS1 data' } : {}),
  };
}

/** Commits scans, batches them all, and finishes the batch `daysAgo` days before NOW. */
function deliveredBatch(
  s: BufferStore,
  refs: string[],
  daysAgo: number,
  failures: { reference: string; reason: string }[] = [],
): number {
  const at = NOW - daysAgo * DAY;
  s.intake.commitIntake(
    refs.map((r) => scan(r, at)),
    at,
  );
  const b = formBatch(s, {
    maxScans: 1000,
    maxBytes: 1e9,
    mode: 'direct',
    nowIso: new Date(at).toISOString(),
  })!;
  s.batches.updateBatch(b.id, { state: 'uploaded', requestId: String(b.id) });
  s.batches.finishBatch(
    b.id,
    { state: failures.length ? 'HasFailures' : 'Success', failures },
    new Date(at).toISOString(),
  );
  return b.id;
}

describe('retention: the audit period', () => {
  it('prunes delivered scans past the period and keeps everything undelivered', async () => {
    const s = (store = BufferStore.openAt(
      join(mkdtempSync(join(tmpdir(), 'sg-retention-')), 'buffer.db'),
    ));
    const old = deliveredBatch(s, ['OLD-1', 'OLD-2', 'OLD-3', 'DEAD'], 40, [
      { reference: 'DEAD', reason: 'Invalid DCP' },
    ]);
    const recent = deliveredBatch(s, ['NEW-1', 'NEW-2'], 10);
    // A dead letter that was replayed, and its replacement delivered long ago.
    const replayedOld = deliveredBatch(s, ['FIXED'], 45, [
      { reference: 'FIXED', reason: 'Invalid DCP' },
    ]);
    const deadId = sqlOf(s)
      .prepare(`SELECT id FROM scans WHERE reference = 'FIXED'`)
      .pluck()
      .get() as number;
    const replacement = deliveredBatch(s, ['FIXED-AGAIN'], 35);
    const replacementId = sqlOf(s)
      .prepare(`SELECT id FROM scans WHERE reference = 'FIXED-AGAIN'`)
      .pluck()
      .get() as number;
    sqlOf(s)
      .prepare(`UPDATE scan_rows SET replayed_by = ? WHERE id = ?`)
      .run(replacementId, deadId);
    // Undelivered: pending, held, and an upload still in flight.
    s.intake.commitIntake([scan('PENDING', NOW - 90 * DAY)], NOW - 90 * DAY);
    s.intake.commitIntake([scan('HELD', NOW - 90 * DAY)], NOW - 90 * DAY);
    const held = formBatch(s, {
      maxScans: 1,
      maxBytes: 1e9,
      mode: 'direct',
      nowIso: new Date(NOW - 90 * DAY).toISOString(),
    })!;
    s.batches.holdBatch(held.id, 'HTTP 400');
    s.intake.commitIntake(
      [
        other('noRead', NOW - 40 * DAY),
        other('duplicate', NOW - 40 * DAY),
        other('noRead', NOW - DAY),
        other('rejected', NOW - 90 * DAY),
      ],
      NOW,
    );
    s.intake.commitIntake([], NOW - 40 * DAY, [{ inputId: 'in', hash: 'old', items: 1 }]);
    s.intake.commitIntake([], NOW - DAY, [{ inputId: 'in', hash: 'new', items: 1 }]);

    const retention = new Retention({
      store: s,
      retentionDays: 30,
      logger: silentLogger(),
      now: () => NOW,
      chunk: 2,
    });
    const result = await retention.prune();

    const refs = (
      sqlOf(s).prepare(`SELECT reference FROM scans ORDER BY reference`).pluck().all() as string[]
    ).sort();
    expect(refs).toEqual(['DEAD', 'HELD', 'NEW-1', 'NEW-2', 'PENDING']);
    // Four delivered scans (OLD-1..3, FIXED-AGAIN) and the dead letter FIXED-AGAIN replaced, apart.
    expect(result).toEqual({
      scans: 4,
      deadLetters: 1,
      reads: 7,
      batches: 2,
      files: 1,
      firstReadAt: expect.any(String),
      lastReadAt: expect.any(String),
    });
    // The batch of the kept dead letter stays (its requestId is the audit of that failure).
    const batches = sqlOf(s)
      .prepare(`SELECT id FROM batches ORDER BY id`)
      .pluck()
      .all() as number[];
    expect(batches).toEqual([old, recent, held.id].sort((a, b) => a - b));
    expect(batches).not.toContain(replayedOld);
    expect(batches).not.toContain(replacement);
    const reads = sqlOf(s)
      .prepare(`SELECT outcome, count(*) AS n FROM reads GROUP BY outcome ORDER BY outcome`)
      .all();
    expect(reads).toEqual([
      { outcome: 'noRead', n: 1 },
      { outcome: 'rejected', n: 1 },
      { outcome: 'scan', n: 5 },
    ]);
    expect(s.intake.knownFile('in', 'old')).toBe(false);
    expect(s.intake.knownFile('in', 'new')).toBe(true);
    expect(sqlOf(s).pragma('foreign_key_check')).toEqual([]);
    expect(s.reports.totals().undeliveredScans).toBe(1);

    // Nothing more to do a second time.
    expect(await retention.prune()).toEqual({ scans: 0, reads: 0, batches: 0, files: 0 });
  });

  it('runs at start and then periodically, and stops cleanly', async () => {
    const s = (store = BufferStore.openAt(
      join(mkdtempSync(join(tmpdir(), 'sg-retention-')), 'buffer.db'),
    ));
    deliveredBatch(s, ['OLD-1'], 41);
    deliveredBatch(s, ['OLD-2'], 40);
    const retention = new Retention({
      store: s,
      retentionDays: 30,
      logger: silentLogger(),
      now: () => NOW,
      intervalMs: 20,
    });
    retention.start();
    // The run at start prunes OLD-1; a run that finds nothing left is a later, periodic one.
    await waitFor(() => retention.lastRun?.result.scans === 0, {
      what: 'a periodic run after the first',
    });
    await retention.stop();
    // All but the newest rows (kept so that ids are never handed out twice).
    expect(sqlOf(s).prepare('SELECT reference FROM scans').pluck().all()).toEqual(['OLD-2']);
    expect(retention.lastRun?.result).toEqual({ scans: 0, reads: 0, batches: 0, files: 0 });
  });

  it('never hands out a batch id twice, also after pruning every old batch', async () => {
    const s = (store = BufferStore.openAt(
      join(mkdtempSync(join(tmpdir(), 'sg-retention-')), 'buffer.db'),
    ));
    const first = deliveredBatch(s, ['A'], 45);
    const second = deliveredBatch(s, ['B'], 40);
    await new Retention({
      store: s,
      retentionDays: 30,
      logger: silentLogger(),
      now: () => NOW,
    }).prune();
    expect(s.batches.batch(first)).toBeUndefined();
    const third = deliveredBatch(s, ['C'], 1);
    expect(third).toBeGreaterThan(second);
    expect(new Set([first, second, third]).size).toBe(3);
  });
});
