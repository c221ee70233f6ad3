import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/buffer/migrations.js';
import { BufferReader } from '../../src/queries/reader.js';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { queriesOf } from '../helpers/queries.js';

/**
 * Lookup by any form of a GS1 identifier and search by an AI's value (src/buffer/item-keys.ts, src/queries/key-search.ts,
 * item-lookup.ts) on real SQLite files: canonical references, raw references an older
 * configuration stored, and an older buffer upgraded in place.
 */

const GS = '\u001d';
const at = new Date('2026-11-24T08:00:00Z');
const CANONICAL = 'https://id.gs1.org/01/09521234543213/21/C2611030001234';
const DATAMATRIX = `]d2010952123454321310B2611-03${GS}21C2611030001234`;

function record(raw: string, reference: string, dcpKey = 'GI-01'): IntakeRecord {
  const body = JSON.stringify({
    reference,
    timeStamp: '2026-11-24T09:00:00',
    dcpKey,
    parents: [],
    attributes: [],
  });
  return {
    inputId: 'scanner',
    receivedAt: at,
    raw: Buffer.from(raw),
    outcome: 'scan',
    scan: { reference, dcpKey, instant: at, body },
  };
}

function tempPath(): string {
  return join(mkdtempSync(join(tmpdir(), 'sg-item-keys-')), 'buffer.db');
}

/** Every form a person may have of the pack C2611030001234 (GTIN 09521234543213, lot B2611-03). */
const LABEL_FORMS = [
  '(01)09521234543213(10)B2611-03(21)C2611030001234',
  '(01)09521234543213(21)C2611030001234',
  DATAMATRIX,
  ']d2010952123454321310B2611-03<GS>21C2611030001234',
  ']C1010952123454321310B2611-03\\x1d21C2611030001234',
  ']Q3010952123454321310B2611-03^]21C2611030001234',
  '010952123454321310B2611-03<GS>21C2611030001234',
  '0109521234543213' + '21C2611030001234',
  'https://id.gs1.org/01/09521234543213/10/B2611-03/21/C2611030001234',
  'https://brand.example.com/01/09521234543213/21/C2611030001234?17=281231',
  CANONICAL,
  'C2611030001234',
];

describe('lookup by any form of a GS1 identifier', () => {
  it('finds an item stored under its canonical reference by every form of its label', () => {
    const store = BufferStore.openAt(tempPath());
    store.intake.commitIntake(
      [record(DATAMATRIX, CANONICAL), record('PK-000815', 'PK-000815')],
      at.getTime(),
    );
    for (const form of LABEL_FORMS) {
      const t = queriesOf(store).trace(form);
      expect(t.found, form).toBe(true);
      expect(t.reference, form).toBe(CANONICAL);
      expect(t.scans).toHaveLength(1);
    }
    expect(queriesOf(store).trace('(01)09521234543213(21)C2611030001234').canonical).toBe(
      CANONICAL,
    );
    // A plain reference is found exactly as it always was.
    expect(queriesOf(store).trace('PK-000815')).toMatchObject({
      found: true,
      reference: 'PK-000815',
    });
    store.close();
  });

  it('finds an item stored under raw references (GS1 DataMatrix and GS1-128) by every form, naming the other reference of the same item', () => {
    const gs1128 = `]C1010952123454321321C2611030001234${GS}10B2611-03`;
    const store = BufferStore.openAt(tempPath());
    store.intake.commitIntake(
      [record(DATAMATRIX, DATAMATRIX, 'GI-01'), record(gs1128, gs1128, 'EOL-3')],
      at.getTime(),
    );
    for (const form of LABEL_FORMS) {
      const t = queriesOf(store).trace(form);
      expect(t.found, form).toBe(true);
      expect([DATAMATRIX, gs1128], form).toContain(t.reference);
      expect(t.sameItem, form).toHaveLength(1);
    }
    store.close();
  });

  it('lists the items of a lot and of a GTIN, latest first, paged by cursor, with counts', () => {
    const store = BufferStore.openAt(tempPath());
    const packs = Array.from({ length: 7 }, (_, i) => `C26110300${String(i).padStart(5, '0')}`);
    const records = packs.flatMap((sn, i) => {
      const lot = i < 5 ? 'B2611-03' : 'B2611-04';
      const raw = `]d2010952123454321310${lot}${GS}21${sn}`;
      const ref = `https://id.gs1.org/01/09521234543213/21/${sn}`;
      // The first pack is scanned twice (Goods In and End of Line): listed once, with 2 scans.
      return i === 0 ? [record(raw, ref, 'GI-01'), record(raw, ref, 'EOL-3')] : [record(raw, ref)];
    });
    store.intake.commitIntake(records, at.getTime());

    const lot = queriesOf(store).trace('B2611-03');
    expect(lot.found).toBe(false);
    expect(lot.byValue).toHaveLength(1);
    expect(lot.byValue![0]).toMatchObject({
      ai: '10',
      title: 'BATCH/LOT',
      value: 'B2611-03',
      scans: 6,
      next: null,
    });
    expect(lot.byValue![0]!.items.map((i) => i.reference.slice(-5))).toEqual([
      '00004',
      '00003',
      '00002',
      '00001',
      '00000',
    ]);
    expect(lot.byValue![0]!.items.at(-1)).toMatchObject({ scans: 2 });

    // The lot typed as GS1 data: the same list.
    expect(
      queriesOf(store).trace('(01)09521234543213(10)B2611-03').byValue?.[0]?.items,
    ).toHaveLength(5);

    // A GTIN (and its GTIN-13 form): all the items of the product model, three a page.
    const first = queriesOf(store).searchByValue('09521234543213', { limit: 3 });
    expect(first).toHaveLength(1);
    expect(first[0]).toMatchObject({ ai: '01', scans: 8 });
    const seen = [...first[0]!.items.map((i) => i.reference)];
    let next = first[0]!.next;
    while (next !== null) {
      const page = queriesOf(store).searchByValue('09521234543213', { cursor: next, limit: 3 });
      seen.push(...page[0]!.items.map((i) => i.reference));
      next = page[0]!.next;
    }
    expect(seen).toHaveLength(7);
    expect(new Set(seen).size).toBe(7);
    expect(queriesOf(store).trace('9521234543213').byValue?.[0]).toMatchObject({
      ai: '01',
      value: '09521234543213',
    });

    // A serial alone names one item: traced.
    expect(queriesOf(store).trace('C2611030000006')).toMatchObject({
      found: true,
      reference: 'https://id.gs1.org/01/09521234543213/21/C2611030000006',
    });
    store.close();
  });

  it('finds an SSCC alone, and searches by index seeks only', () => {
    const store = BufferStore.openAt(tempPath());
    store.intake.commitIntake(
      [record(']C100106141411234567897', 'https://id.gs1.org/00/106141411234567897')],
      at.getTime(),
    );
    expect(queriesOf(store).trace('106141411234567897')).toMatchObject({
      found: true,
      reference: 'https://id.gs1.org/00/106141411234567897',
    });
    expect(queriesOf(store).trace('(00)106141411234567897').found).toBe(true);
    const db = sqlOf(store);
    const plan = (
      db
        .prepare(
          `EXPLAIN QUERY PLAN SELECT k.scan_id FROM scan_keys k JOIN scan_rows r ON r.id = k.scan_id WHERE k.value = ? AND k.ai = ? AND k.scan_id < ? ORDER BY k.scan_id DESC LIMIT 10`,
        )
        .all('x', '21', 5) as { detail: string }[]
    )
      .map((r) => r.detail)
      .join('; ');
    expect(plan).toMatch(/SEARCH k USING PRIMARY KEY/);
    expect(plan).not.toMatch(/TEMP B-TREE/);
    // Deleting the scan takes its keys along (retention).
    db.prepare(`DELETE FROM scan_rows`).run();
    expect(db.prepare(`SELECT count(*) FROM scan_keys`).pluck().get()).toBe(0);
    store.close();
  });

  it('indexes the keys of scans already stored when an older buffer is upgraded, so raw references answer the label forms', () => {
    const path = tempPath();
    const old = new Database(path);
    const keys = MIGRATIONS.findIndex((m) => m.includes('CREATE TABLE scan_keys'));
    for (const m of MIGRATIONS.slice(0, keys)) old.exec(m);
    old.pragma(`user_version = ${keys}`);
    old
      .prepare(
        `INSERT INTO reads (id, input_id, received_at, raw, outcome) VALUES (1, 'scanner', ?, ?, 'scan'), (2, 'plc', ?, ?, 'scan')`,
      )
      .run(at.toISOString(), Buffer.from(DATAMATRIX), at.toISOString(), Buffer.from('PK-000815'));
    old
      .prepare(
        `INSERT INTO scan_rows (id, read_id, dcp_key, reference, time_utc, bytes, created_at) VALUES (1, 1, 'GI-01', ?, ?, 2, 0), (2, 2, 'EOL-3', 'PK-000815', ?, 2, 0)`,
      )
      .run(DATAMATRIX, at.toISOString(), at.toISOString());
    old.exec(
      `INSERT INTO scan_bodies (id, body) VALUES (1, '{"parents":[]}'), (2, '{"parents":[]}')`,
    );
    old.close();

    // Read-only on the old schema: the canonical and exact forms still answer, nothing fails.
    const reader = new BufferReader(path);
    expect(queriesOf(reader).trace(DATAMATRIX).found).toBe(true);
    expect(queriesOf(reader).trace('C2611030001234').found).toBe(false);
    reader.close();

    const store = BufferStore.openAt(path);
    expect(sqlOf(store).prepare(`SELECT ai, value FROM scan_keys ORDER BY ai`).all()).toEqual([
      { ai: '01', value: '09521234543213' },
      { ai: '10', value: 'B2611-03' },
      { ai: '21', value: 'C2611030001234' },
    ]);
    for (const form of LABEL_FORMS)
      expect(queriesOf(store).trace(form), form).toMatchObject({
        found: true,
        reference: DATAMATRIX,
      });
    // Filled once: the mark the migration left is gone.
    expect(
      sqlOf(store)
        .prepare(`SELECT count(*) FROM sqlite_master WHERE name = 'scan_keys_fill'`)
        .pluck()
        .get(),
    ).toBe(0);
    store.close();
  });
});
