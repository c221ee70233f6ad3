import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferStore } from '../../src/buffer/store.js';
import { ErrorCodes } from '../../src/errors.js';
import { BufferQueries } from '../../src/queries/queries.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { scanAt } from '../helpers/records.js';

// The queries room answers on a read-only connection of its own: what the store commits, it sees;
// what is not committed yet, it does not; it cannot write; it outlives nothing it should not.

const NOW = Date.parse('2026-12-31T12:00:00Z');
const stores: BufferStore[] = [];
const queries: BufferQueries[] = [];
afterEach(() => {
  for (const q of queries.splice(0)) q.close();
  for (const s of stores.splice(0)) s.close();
});

function opened(path: string): { store: BufferStore; q: BufferQueries } {
  const store = BufferStore.openAt(path);
  stores.push(store);
  const q = new BufferQueries(store);
  queries.push(q);
  return { store, q };
}

const fileBuffer = () => join(mkdtempSync(join(tmpdir(), 'sg-queries-')), 'buffer.db');

describe('the queries room (src/queries/queries.ts)', () => {
  it('is not open before open() nor after close(): its questions say so with a code', () => {
    const { q } = opened(fileBuffer());
    expect(() => q.reports).toThrow(expect.objectContaining({ code: ErrorCodes.NOT_RUNNING }));
    q.open();
    expect(q.isOpen).toBe(true);
    q.close();
    expect(q.isOpen).toBe(false);
    expect(() => q.reports).toThrow(expect.objectContaining({ code: ErrorCodes.NOT_RUNNING }));
  });

  it('sees what the store committed, not what it has not committed yet, on a connection of its own', () => {
    const { store, q } = opened(fileBuffer());
    q.open();
    store.intake.commitIntake([scanAt('A-1', 'GI-01', NOW)], NOW);
    expect(q.reports.totals().pendingScans).toBe(1);
    expect(q.reports.trace('A-1').scans).toHaveLength(1);
    store.atomically(() => {
      store.intake.commitIntake([scanAt('A-2', 'GI-01', NOW)], NOW);
      // The store's own counts see its transaction; the queries' connection sees the last commit.
      expect(store.reports.totals().pendingScans).toBe(2);
      expect(q.reports.totals().pendingScans).toBe(1);
    });
    expect(q.reports.totals().pendingScans).toBe(2);
    // Its own connection: it answers after the store has closed its one.
    store.close();
    expect(q.reports.scanCounts()).toEqual({ pending: 2 });
  });

  it('cannot write the buffer: its connection is read-only', () => {
    const { q } = opened(fileBuffer());
    q.open();
    const db = (q as unknown as { reader: { db: { exec(sql: string): void } } }).reader.db;
    expect(() => db.exec(`DELETE FROM reads`)).toThrow(/readonly/i);
  });

  it("asks a buffer in memory on the store's connection (it cannot be opened twice)", () => {
    const { store, q } = opened(':memory:');
    q.open();
    store.intake.commitIntake([scanAt('M-1', 'GI-01', NOW)], NOW);
    expect(q.reports.totals().pendingScans).toBe(1);
    expect(sqlOf(store).prepare(`SELECT count(*) FROM reads`).pluck().get()).toBe(1);
  });
});
