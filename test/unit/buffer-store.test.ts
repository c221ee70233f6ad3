import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { arrayBytes, BufferStore, type IntakeRecord } from '../../src/buffer/store.js';

let store: BufferStore | undefined;
afterEach(() => store?.close());

function open(): BufferStore {
  store = new BufferStore(join(mkdtempSync(join(tmpdir(), 'sg-store-')), 'buffer.db'));
  return store;
}

/** A scan record whose JSON body is exactly `bytes` long. */
function scanRecord(reference: string, bytes: number): IntakeRecord {
  const skeleton = JSON.stringify({ reference, pad: '' });
  const body = JSON.stringify({ reference, pad: 'x'.repeat(bytes - skeleton.length) });
  expect(Buffer.byteLength(body)).toBe(bytes);
  return {
    inputId: 'in',
    receivedAt: new Date(0),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: { reference, dcpKey: 'GI-01', instant: new Date(0), body },
  };
}

const nowIso = new Date(0).toISOString();

describe('buffer store', () => {
  it('uses WAL and synchronous=FULL', () => {
    const s = open();
    expect(s.db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(s.db.pragma('synchronous', { simple: true })).toBe(2);
  });

  it('counts a batch body exactly as sent: brackets and commas included', () => {
    const s = open();
    s.commitIntake([scanRecord('A', 100), scanRecord('B', 200), scanRecord('C', 50)], 0);
    const batch = s.formBatch({ maxScans: 10, maxBytes: 10_000, mode: 'direct', nowIso })!;
    expect(batch.bytes).toBe(arrayBytes(3, 350));
    expect(Buffer.byteLength(s.batchBody(batch.id))).toBe(batch.bytes);
    expect(JSON.parse(s.batchBody(batch.id))).toHaveLength(3);
  });

  it.each([
    ['one byte under the limit', 2 + 100 + 1 + 100 + 1, 2],
    ['exactly at the limit', 2 + 100 + 1 + 100, 2],
    ['one byte over the limit', 2 + 100 + 1 + 100 - 1, 1],
  ])('packs up to the byte limit: %s', (_name, maxBytes, expected) => {
    const s = open();
    s.commitIntake([scanRecord('A', 100), scanRecord('B', 100)], 0);
    const batch = s.formBatch({ maxScans: 10, maxBytes, mode: 'direct', nowIso })!;
    expect(batch.scanCount).toBe(expected);
    expect(batch.bytes).toBeLessThanOrEqual(maxBytes);
    expect(Buffer.byteLength(s.batchBody(batch.id))).toBe(batch.bytes);
  });

  it('never puts two scans with the same reference in one batch', () => {
    const s = open();
    s.commitIntake([scanRecord('A', 40), scanRecord('A', 40), scanRecord('B', 40)], 0);
    const first = s.formBatch({ maxScans: 10, maxBytes: 10_000, mode: 'direct', nowIso })!;
    expect(first.scanCount).toBe(2);
    const second = s.formBatch({ maxScans: 10, maxBytes: 10_000, mode: 'direct', nowIso })!;
    expect(second.scanCount).toBe(1);
    expect(s.formBatch({ maxScans: 10, maxBytes: 10_000, mode: 'direct', nowIso })).toBeUndefined();
  });

  it('splits a batch and maps each failure to its scan', () => {
    const s = open();
    s.commitIntake(['A', 'B', 'C', 'D'].map((r) => scanRecord(r, 40)), 0);
    const batch = s.formBatch({ maxScans: 10, maxBytes: 10_000, mode: 'direct', nowIso })!;
    expect(s.splitBatch(batch.id)).toBe(true);
    expect(s.batch(batch.id)?.scanCount).toBe(2);
    expect(s.pending().count).toBe(2);
    s.finishBatch(batch.id, { state: 'HasFailures', processed: 2, failed: 1, failures: [{ reference: 'B', reason: 'Invalid DCP' }] }, nowIso);
    expect(s.scanCounts()).toEqual({ delivered: 1, failed: 1, pending: 2 });
    expect(s.recentProblems(5)[0]).toMatchObject({ kind: 'failed', reference: 'B', reason: 'Invalid DCP' });
  });

  it('keeps everything across a reopen', () => {
    const s = open();
    s.commitIntake([scanRecord('A', 40), { inputId: 'in', receivedAt: new Date(0), raw: Buffer.from([0xff]), outcome: 'rejected', reason: 'not UTF-8' }], 0);
    s.close();
    const again = new BufferStore(s.path);
    store = again;
    expect(again.pending().count).toBe(1);
    expect(again.recentProblems(5)[0]).toMatchObject({ kind: 'rejected', reason: 'not UTF-8' });
  });
});
