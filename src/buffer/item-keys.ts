import type Database from 'better-sqlite3';
import type { Gs1Pair } from './rows.js';
import { isIdentifyingAi, parseBarcode } from '../gs1/index.js';

/**
 * The GS1 keys of each scan, written with it; the lookup of an item by them is the queries room's
 * (src/queries/key-search.ts).
 *
 * Every scan whose read (or reference) is GS1 data has its identifying elements in `scan_keys`
 * (value, AI, scan): the primary keys (00 SSCC, 01 GTIN, 8004 GIAI…) and key qualifiers (10
 * batch/lot, 21 serial, 22 CPV…), GS1 General Specifications 2 and the Digital Link URI Syntax's
 * key qualifiers. So a person's form of the label (bracketed text, a raw element string with or
 * without symbology identifier, a Digital Link on any domain) finds the item whatever reference the
 * buffer holds for it: the canonical one of `{ gs1: canonical }`, or the raw read an older
 * configuration sent. A value alone (a serial, an SSCC, a lot, a GTIN) lists the items carrying it.
 * Written at intake rather than computed from the references at lookup: a raw reference holds the
 * item's keys in an order and carrier of its own, which no query on the reference column can match.
 */

/** One (AI, value) pair of a scan. */
export type Gs1Key = readonly [ai: string, value: string];

/** Whether text may be GS1 data: a symbology identifier, a bracketed AI, a URI. Plain references skip the parser. */
function mayBeGs1(text: string): boolean {
  const c = text.charAt(0);
  return c === ']' || c === '(' || c === 'h' || c === 'H';
}

function keysOf(text: string, into: Map<string, Gs1Key>): void {
  if (!mayBeGs1(text)) return;
  const parse = parseBarcode(text, { checkPairings: false });
  if (parse.kind !== 'gs1') return;
  for (const e of parse.elements)
    if (isIdentifyingAi(e.ai)) into.set(`${e.ai}\u0000${e.value}`, [e.ai, e.value]);
}

/**
 * The identifying (AI, value) pairs of a scan: of its read's text (UTF-8), else of its reference
 * (a reference taken from a field of a JSON payload, say). Empty for plain codes and for GS1 data
 * that fails its checks. A reference made from a GS1 read holds none of the read's keys it lacks,
 * so it is parsed only when the read gave none: each parse costs intake tens of microseconds.
 */
export function gs1Keys(raw: Buffer | string | null | undefined, reference: string): Gs1Key[] {
  const found = new Map<string, Gs1Key>();
  const text =
    raw === null || raw === undefined
      ? undefined
      : typeof raw === 'string'
        ? raw
        : raw.toString('utf8');
  if (text !== undefined) keysOf(text, found);
  if (found.size === 0 && reference !== text) keysOf(reference, found);
  return [...found.values()];
}

/** Scans read a time by {@link fillStoredKeys}: its memory stays small whatever the buffer's size. */
const FILL_CHUNK = 10_000;

/**
 * Gives the scans stored before `scan_keys` existed their keys, once, right after the migrations
 * (open.ts), in one transaction: the migration that made the table marks the last scan to fill in
 * `scan_keys_fill`, this drops the mark. A start killed half way fills again from the start; the
 * inserts are idempotent. Answers the scans read (0 when there was nothing to fill).
 */
export function fillStoredKeys(db: Database.Database): number {
  const marked =
    db
      .prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'scan_keys_fill'`)
      .get() !== undefined;
  if (!marked) return 0;
  const upTo =
    (db.prepare(`SELECT max(up_to) FROM scan_keys_fill`).pluck().get() as number | null) ?? 0;
  const page = db.prepare(
    `SELECT r.id AS id, r.reference AS reference, d.raw AS raw FROM scan_rows r LEFT JOIN reads d ON d.id = r.read_id
      WHERE r.id > ? AND r.id <= ? ORDER BY r.id LIMIT ${FILL_CHUNK}`,
  );
  const keys = new ScanKeys(db);
  let read = 0;
  db.transaction(() => {
    for (let after = 0; ;) {
      const rows = page.all(after, upTo) as { id: number; reference: string; raw: Buffer | null }[];
      for (const row of rows) keys.write(row.id, row.raw, row.reference);
      read += rows.length;
      if (rows.length < FILL_CHUNK) break;
      after = rows[rows.length - 1]!.id;
    }
    db.exec(`DROP TABLE scan_keys_fill`);
  }).immediate();
  return read;
}

/** Writes the keys of each new scan (ScanInsert); prepared once. */
export class ScanKeys {
  private readonly insert: Database.Statement;
  constructor(db: Database.Database) {
    this.insert = db.prepare(
      `INSERT OR IGNORE INTO scan_keys (value, ai, scan_id) VALUES (?, ?, ?)`,
    );
  }
  write(scanId: number | bigint, raw: Buffer | string | null | undefined, reference: string): void {
    for (const [ai, value] of gs1Keys(raw, reference)) this.insert.run(value, ai, scanId);
  }
  /** As {@link write}, from the read's elements as the mapping parsed them (none: not GS1 data). */
  writeParsed(scanId: number | bigint, elements: readonly Gs1Pair[], reference: string): void {
    let written = 0;
    for (const e of elements) {
      if (!isIdentifyingAi(e.ai)) continue;
      this.insert.run(e.value, e.ai, scanId);
      written++;
    }
    if (written === 0)
      for (const [ai, value] of gs1Keys(null, reference)) this.insert.run(value, ai, scanId);
  }
}
