import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { batchView } from '../../src/queries/reports.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { scanAt } from '../helpers/records.js';
import { queriesOf } from '../helpers/queries.js';

// The health rules' "last hour" comes from a real SQLite buffer: reads found by a binary search
// over ids, rejections and refused files by index, failed scans through finished batches.

const NOW = Date.parse('2026-11-18T12:00:00Z');
const MIN = 60_000;
let store: BufferStore | undefined;
afterEach(() => store?.close());

const open = () =>
  (store = BufferStore.openAt(join(mkdtempSync(join(tmpdir(), 'sg-recent-')), 'buffer.db')));
const rejected = (
  inputId: string,
  at: number,
  extra: Partial<IntakeRecord> = {},
): IntakeRecord => ({
  inputId,
  receivedAt: new Date(at),
  raw: Buffer.from('x'),
  outcome: 'rejected',
  reason: 'no rule matched',
  ...extra,
});

describe('recent activity for the health rules', () => {
  it('is empty for an empty buffer', () => {
    expect(queriesOf(open()).recentActivity(NOW - 60 * MIN)).toEqual({
      reads: 0,
      rejections: 0,
      rejectionsByInput: [],
      filesRefused: [],
      filesRefusedCount: 0,
      failedScans: 0,
    });
  });

  it('counts only what came in the window: reads, rejections by input, refused files newest first, failed scans', () => {
    const s = open();
    // 500 reads two hours ago (outside), then 29 within the hour (27 scans, 2 rejections) and 1 refused file, which was no read.
    s.intake.commitIntake(
      Array.from({ length: 500 }, (_, i) => scanAt(`OLD-${i}`, 'GI-01', NOW - 120 * MIN + i)),
      NOW - 120 * MIN,
    );
    s.intake.commitIntake(
      [
        rejected('gi-scanner', NOW - 125 * MIN),
        rejected('goods-in', NOW - 121 * MIN, {
          inputLevel: true,
          origin: { file: 'old.csv', movedTo: 'failed/old.csv' },
        }),
      ],
      NOW - 120 * MIN,
    );
    s.intake.commitIntake(
      Array.from({ length: 27 }, (_, i) => scanAt(`NEW-${i}`, 'GI-01', NOW - 30 * MIN + i)),
      NOW - 30 * MIN,
    );
    s.intake.commitIntake(
      [
        rejected('gi-scanner', NOW - 20 * MIN),
        rejected('gi-scanner', NOW - 19 * MIN),
        rejected('goods-in', NOW - 10 * MIN, {
          inputLevel: true,
          reason: 'the header has no column "barcode"',
          origin: { file: 'export.csv', movedTo: 'failed/export.csv' },
        }),
        // An empty frame on a serial input: an input-level rejection the input's column counts.
        rejected('gi-scanner', NOW - 9.5 * MIN, { inputLevel: true, reason: 'the read is empty' }),
        // A file whose content was stored before goes to processed/: not a refused file.
        rejected('goods-in', NOW - 9 * MIN, {
          inputLevel: true,
          reason: 'same content as export-1.csv',
          origin: { file: 'export-2.csv', movedTo: 'processed/2026-11-24/export-2.csv' },
        }),
      ],
      NOW - 10 * MIN,
    );
    const r = queriesOf(s).recentActivity(NOW - 60 * MIN);
    expect(r).toMatchObject({
      reads: 30,
      rejections: 3,
      rejectionsByInput: [{ inputId: 'gi-scanner', count: 3 }],
      filesRefusedCount: 1,
      failedScans: 0,
    });
    expect(r.filesRefused).toEqual([
      {
        inputId: 'goods-in',
        file: 'export.csv',
        reason: 'the header has no column "barcode"',
        at: new Date(NOW - 10 * MIN).toISOString(),
      },
    ]);
    // A later window: nothing.
    expect(queriesOf(s).recentActivity(NOW + MIN).reads).toBe(0);
    // The whole history.
    expect(queriesOf(s).recentActivity(NOW - 200 * MIN)).toMatchObject({
      reads: 531,
      rejections: 4,
      filesRefusedCount: 2,
    });
  });

  it('counts scans the service refused in batches finished in the window, not replayed ones', () => {
    const s = open();
    s.intake.commitIntake(
      ['A', 'B', 'C'].map((r) => scanAt(r, 'GI-01', NOW - 5 * MIN)),
      NOW - 5 * MIN,
    );
    const b = formBatch(s, {
      maxScans: 10,
      maxBytes: 100_000,
      mode: 'direct',
      nowIso: new Date(NOW - 4 * MIN).toISOString(),
    })!;
    s.batches.finishBatch(
      b.id,
      {
        state: 'HasFailures',
        failures: [
          { reference: 'A', reason: 'Invalid DCP' },
          { reference: 'B', reason: 'Invalid DCP' },
        ],
      },
      new Date(NOW - 3 * MIN).toISOString(),
    );
    expect(queriesOf(s).recentActivity(NOW - 60 * MIN).failedScans).toBe(2);
    expect(queriesOf(s).recentActivity(NOW - 2 * MIN).failedScans).toBe(0);
  });

  it('lists batches not finished since before the threshold, and shows their instants as ISO 8601', () => {
    const s = open();
    s.intake.commitIntake([scanAt('A', 'GI-01', NOW - 50 * MIN)], NOW - 50 * MIN);
    const b = formBatch(s, {
      maxScans: 10,
      maxBytes: 100_000,
      mode: 'direct',
      nowIso: new Date(NOW - 45 * MIN).toISOString(),
    })!;
    expect(queriesOf(s).stuckBatches(NOW - 30 * MIN)).toEqual([
      {
        id: b.id,
        state: 'ready',
        requestId: null,
        createdAt: new Date(NOW - 45 * MIN).toISOString(),
      },
    ]);
    expect(queriesOf(s).stuckBatches(NOW - 50 * MIN)).toEqual([]);
    s.batches.updateBatch(b.id, { nextAttemptAt: NOW });
    const view = batchView(s.batches.batch(b.id)!);
    expect(view.nextAttemptAt).toBe(new Date(NOW).toISOString());
    expect(view.putStartedAt).toBeNull();
    s.batches.finishBatch(b.id, { state: 'Success' }, new Date(NOW).toISOString());
    expect(queriesOf(s).stuckBatches(NOW)).toEqual([]);
  });
});
