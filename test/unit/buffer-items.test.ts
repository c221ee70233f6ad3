import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { MAX_NODE_FANOUT } from '../../src/queries/items.js';
import { MIGRATIONS } from '../../src/buffer/migrations.js';
import { BufferReader } from '../../src/queries/reader.js';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { queriesOf } from '../helpers/queries.js';

/** Item lookup (src/queries/items.ts) on real SQLite files: bounds, loops, old buffers, the index. */

const at = new Date('2026-11-24T08:00:00Z');
function scan(reference: string, parents: string[] = [], dcpKey = 'SOP-3'): IntakeRecord {
  const body = JSON.stringify({
    reference,
    timeStamp: '2026-11-24T09:00:00',
    dcpKey,
    productModelKey: 'MOD-48V',
    parents,
    attributes: [{ key: 'line', value: '3' }],
  });
  return {
    inputId: 'plc',
    receivedAt: at,
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: { reference, dcpKey, instant: at, body },
  };
}

function bufferWith(records: IntakeRecord[]): { store: BufferStore; path: string } {
  const path = join(mkdtempSync(join(tmpdir(), 'sg-items-')), 'buffer.db');
  const store = BufferStore.openAt(path);
  store.intake.commitIntake(records, at.getTime());
  return { store, path };
}

describe('item lookup in the buffer', () => {
  it('marks a loop in the parents data once and does not follow it', () => {
    const { store } = bufferWith([scan('A', ['B']), scan('B', ['A'])]);
    const t = queriesOf(store).trace('A');
    expect(t.parents).toMatchObject([
      { reference: 'B', nodes: [{ reference: 'A', cycle: true, nodes: [] }] },
    ]);
    expect(t.children).toMatchObject([
      { reference: 'B', nodes: [{ reference: 'A', cycle: true, nodes: [] }] },
    ]);
    store.close();
  });

  it('lists at most MAX_NODE_FANOUT relatives per node and counts the rest; stops at the depth and counts below it', () => {
    const chain = ['C0', 'C1', 'C2', 'C3'].map((r, i, all) =>
      scan(r, i === 0 ? [] : [all[i - 1]!]),
    );
    const many = Array.from({ length: MAX_NODE_FANOUT + 50 }, (_, i) =>
      scan(`CELL-${String(i).padStart(3, '0')}`, ['PAL-1']),
    );
    const { store } = bufferWith([...chain, ...many]);
    const pallet = queriesOf(store).trace('PAL-1');
    expect(pallet.found).toBe(true); // named as a parent only, never scanned here
    expect(pallet.scans).toEqual([]);
    expect(pallet.children).toHaveLength(MAX_NODE_FANOUT);
    expect(pallet.childrenMore).toBe(50);

    const top = queriesOf(store).trace('C0', { depth: 2 });
    expect(top.children).toMatchObject([
      { reference: 'C1', more: 0, nodes: [{ reference: 'C2', nodes: [], more: 1 }] },
    ]);
    const bottom = queriesOf(store).trace('C3', { depth: 10 });
    expect(bottom.parents).toMatchObject([
      {
        reference: 'C2',
        nodes: [{ reference: 'C1', nodes: [{ reference: 'C0', nodes: [], more: 0 }] }],
      },
    ]);
    store.close();
  });

  it('searches a prefix as a range over the index: LIKE wildcards are plain characters', () => {
    const { store } = bufferWith([scan('A%1'), scan('AB1'), scan('A_1'), scan('A%2'), scan('B1')]);
    expect(
      queriesOf(store)
        .searchItems('A%')
        .map((m) => m.reference),
    ).toEqual(['A%1', 'A%2']);
    expect(
      queriesOf(store)
        .searchItems('A')
        .map((m) => m.reference),
    ).toEqual(['A%1', 'A%2', 'AB1', 'A_1']);
    expect(queriesOf(store).searchItems('')).toEqual([]);
    const plan = (
      sqlOf(store)
        .prepare(
          `EXPLAIN QUERY PLAN SELECT reference, count(*) FROM scans WHERE reference >= ? AND reference < ? GROUP BY reference LIMIT 5`,
        )
        .all('A', 'B') as { detail: string }[]
    )
      .map((r) => r.detail)
      .join('; ');
    expect(plan).toMatch(/USING (COVERING )?INDEX scans_reference/);
    store.close();
  });

  it('keeps scan_parents with the scans: a deleted scan takes its parent rows along', () => {
    const { store } = bufferWith([scan('M-1', ['P-1']), scan('M-2', ['P-1', 'P-2'])]);
    const db = sqlOf(store);
    expect(
      db
        .prepare(`SELECT parent, count(*) AS n FROM scan_parents GROUP BY parent ORDER BY parent`)
        .all(),
    ).toEqual([
      { parent: 'P-1', n: 2 },
      { parent: 'P-2', n: 1 },
    ]);
    db.prepare(`DELETE FROM scan_rows WHERE reference = 'M-2'`).run();
    expect(db.prepare(`SELECT parent FROM scan_parents`).pluck().all()).toEqual(['P-1']);
    expect(queriesOf(store).trace('P-2').found).toBe(false);
    store.close();
  });

  it('fills the lookup indexes from the scans already stored when an older buffer is upgraded', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'sg-items-old-')), 'buffer.db');
    const old = new Database(path);
    // The buffer as it was before the items migration (found by what it creates: later migrations are appended after it).
    const items = MIGRATIONS.findIndex((m) => m.includes('CREATE INDEX scans_reference'));
    for (const m of MIGRATIONS.slice(0, items)) old.exec(m);
    old.pragma(`user_version = ${items}`);
    old
      .prepare(
        `INSERT INTO reads (id, input_id, received_at, raw, outcome) VALUES (1, 'plc', ?, x'00', 'scan'), (2, 'plc', ?, x'00', 'scan')`,
      )
      .run(at.toISOString(), at.toISOString());
    old
      .prepare(
        `INSERT INTO scans (read_id, dcp_key, reference, time_utc, body, bytes, created_at) VALUES (1, 'SOP-3', 'MOD-1', ?, ?, 1, 0), (2, 'SOP-3', 'CELL-1', ?, ?, 1, 0)`,
      )
      .run(
        at.toISOString(),
        JSON.stringify({ reference: 'MOD-1', parents: ['PK-1'] }),
        at.toISOString(),
        JSON.stringify({ reference: 'CELL-1', parents: ['MOD-1'] }),
      );
    old.close();

    // Read-only on the old schema (a backup): children by a full scan, and the answer says so.
    const reader = new BufferReader(path);
    const slow = queriesOf(reader).trace('PK-1');
    expect(slow.slow).toBe(true);
    expect(slow.children).toMatchObject([{ reference: 'MOD-1', nodes: [{ reference: 'CELL-1' }] }]);
    reader.close();

    const store = BufferStore.openAt(path);
    const t = queriesOf(store).trace('PK-1');
    expect(t.slow).toBeUndefined();
    expect(t.children).toMatchObject([{ reference: 'MOD-1', nodes: [{ reference: 'CELL-1' }] }]);
    store.close();
  });
});
