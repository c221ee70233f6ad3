import type Database from 'better-sqlite3';
import type { Gs1Pair } from './rows.js';
import {
  canonicalReference,
  isIdentifyingAi,
  lookupAi,
  normaliseTyped,
  parseBarcode,
  type CanonicalReference,
  type Gs1Element,
} from '../gs1/index.js';

/**
 * The GS1 keys of each scan and the lookup of an item by any form of its GS1 identifier.
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

/** Most references one lookup by keys looks at before it lists them instead of tracing one. */
const MAX_KEY_REFERENCES = 20;
/** Largest page of a search by value; the default. */
export const MAX_VALUE_PAGE = 200;
export const DEFAULT_VALUE_PAGE = 50;
/** Scans counted for a value at most: counting a GTIN's million scans would cost seconds. */
export const MAX_VALUE_COUNT = 10_000;

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

/** An item found by a search. */
export interface KeyItem {
  reference: string;
  /** Its scans in the buffer, and the time of the latest (ISO 8601). */
  scans: number;
  lastAt: string;
}

/** The items whose scans carry one AI's value, latest first, one page of them. */
export interface ValueMatches {
  ai: string;
  /** GS1 data title of the AI, e.g. `SERIAL`, `BATCH/LOT`. */
  title: string;
  value: string;
  /** Scans carrying it, counted up to {@link MAX_VALUE_COUNT}; `scansAtLeast` when the count stopped there. */
  scans: number;
  scansAtLeast?: true;
  items: KeyItem[];
  /** Give as `cursor` for the next page; null on the last. */
  next: string | null;
}

/** Whether the buffer has `scan_keys` (a buffer opened read-only may predate it). */
export function hasScanKeys(db: Database.Database): boolean {
  return (
    db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'scan_keys'`).get() !==
    undefined
  );
}

/**
 * The AIs that carry `value` in some scan: one index seek per AI found (a skip over the
 * (value, ai) prefix), never a pass over the scans of a value.
 */
function aisOfValue(db: Database.Database, value: string): string[] {
  const next = db
    .prepare(`SELECT ai FROM scan_keys WHERE value = ? AND ai > ? ORDER BY ai LIMIT 1`)
    .pluck();
  const ais: string[] = [];
  let after = '';
  for (
    let found = next.get(value, after) as string | undefined;
    found !== undefined && ais.length < 20;
    found = next.get(value, after) as string | undefined
  ) {
    ais.push(found);
    after = found;
  }
  return ais;
}

/** Parses a cursor `AI.scanId` of {@link ValueMatches.next}. */
export function parseCursor(cursor: string): { ai: string; before: number } | undefined {
  const m = /^(\d{2,4})\.(\d{1,15})$/.exec(cursor);
  return m ? { ai: m[1]!, before: Number(m[2]) } : undefined;
}

/**
 * The items whose scans carry `value` under one AI, or under each AI that has it: latest scan
 * first, `limit` items a page (at most {@link MAX_VALUE_PAGE}). An item is listed once, on the
 * page of its latest scan carrying the value. Each page costs index seeks only: the rows of the
 * page, one seek per item for its own scans, and a count that stops at {@link MAX_VALUE_COUNT}.
 */
export function searchByValue(
  db: Database.Database,
  value: string,
  options: { ai?: string; limit?: number; cursor?: string } = {},
): ValueMatches[] {
  if (value === '' || !hasScanKeys(db)) return [];
  const limit = Math.max(
    1,
    Math.min(Math.trunc(options.limit ?? DEFAULT_VALUE_PAGE) || DEFAULT_VALUE_PAGE, MAX_VALUE_PAGE),
  );
  const cursor = options.cursor !== undefined ? parseCursor(options.cursor) : undefined;
  const ais = cursor
    ? [cursor.ai]
    : options.ai !== undefined
      ? [options.ai]
      : aisOfValue(db, value);
  const page = db.prepare(
    `SELECT k.scan_id AS id, r.reference AS reference FROM scan_keys k JOIN scan_rows r ON r.id = k.scan_id
      WHERE k.value = ? AND k.ai = ? AND k.scan_id < ? ORDER BY k.scan_id DESC LIMIT ?`,
  );
  const latest = db
    .prepare(
      `SELECT max(k.scan_id) FROM scan_rows r JOIN scan_keys k ON k.scan_id = r.id AND k.value = ? AND k.ai = ? WHERE r.reference = ?`,
    )
    .pluck();
  const summary = db.prepare(
    `SELECT count(*) AS scans, max(time_utc) AS lastAt FROM scan_rows WHERE reference = ?`,
  );
  const count = db
    .prepare(
      `SELECT count(*) FROM (SELECT 1 FROM scan_keys WHERE value = ? AND ai = ? LIMIT ${MAX_VALUE_COUNT + 1})`,
    )
    .pluck();
  const out: ValueMatches[] = [];
  for (const ai of ais) {
    const items: KeyItem[] = [];
    let before = cursor?.before ?? Number.MAX_SAFE_INTEGER;
    // Rows of items already listed are skipped. The page ends before the next item's first row, so
    // `next` is null exactly when no item is left; a few rounds keep a page full, bounded all the same.
    let more: boolean | undefined;
    for (let round = 0; round < 8 && more === undefined; round++) {
      const rows = page.all(value, ai, before, limit * 4) as { id: number; reference: string }[];
      for (const row of rows) {
        const first = (latest.get(value, ai, row.reference) as number | null) === row.id;
        if (first && items.length >= limit) {
          more = true;
          break;
        }
        before = row.id;
        if (!first) continue;
        const s = summary.get(row.reference) as { scans: number; lastAt: string };
        items.push({ reference: row.reference, scans: s.scans, lastAt: s.lastAt });
      }
      if (more === undefined && rows.length < limit * 4) more = false;
    }
    const scans = count.get(value, ai) as number;
    if (scans === 0) continue;
    out.push({
      ai,
      title: lookupAi(ai)?.title ?? ai,
      value,
      scans: Math.min(scans, MAX_VALUE_COUNT),
      ...(scans > MAX_VALUE_COUNT ? { scansAtLeast: true as const } : {}),
      items,
      next: more !== false ? `${ai}.${before}` : null,
    });
  }
  return out;
}

/** What a typed query says as GS1 data. */
export interface QueryReading {
  /** The query's canonical reference, when it holds a primary key. */
  canonical?: CanonicalReference;
  /** Its elements, when it is GS1 data. */
  elements?: Gs1Element[];
  /** Values to search when it is not GS1 data: itself, and a GTIN-8/12/13 as GTIN-14. */
  values: string[];
}

/**
 * Reads a query as a person typed it: a GS1 form (bracketed, a raw element string with or without
 * symbology identifier, the GS written `<GS>`, `\x1d` or `^]`, a Digital Link URI), or a value alone.
 */
export function readQuery(query: string): QueryReading {
  const text = normaliseTyped(query);
  // A raw element string typed without its symbology identifier: `01…21…` is read as `]C1`.
  const candidates = /^\d{2}/.test(text) && text.length >= 16 ? [text, `]C1${text}`] : [text];
  for (const candidate of candidates) {
    const parse = parseBarcode(candidate, { checkPairings: false });
    if (parse.kind !== 'gs1') continue;
    const canonical = canonicalReference(parse.elements);
    // A bare SSCC or GTIN of 18 digits is also an element string `00…`/`01…` only by accident.
    if (candidate !== text && !canonical) continue;
    return { ...(canonical ? { canonical } : {}), elements: parse.elements, values: [] };
  }
  const values = [text];
  if (/^(\d{8}|\d{12}|\d{13})$/.test(text)) values.push(text.padStart(14, '0'));
  return { values };
}

/**
 * References of scans carrying all these (AI, value) pairs, latest first, at most
 * {@link MAX_KEY_REFERENCES}. Seeks the first pair, checks the others per scan.
 */
export function referencesWithKeys(db: Database.Database, keys: readonly Gs1Key[]): string[] {
  if (keys.length === 0 || !hasScanKeys(db)) return [];
  // The last identifying element (the serial, or the key itself) is the most selective.
  const [first, ...others] = [...keys].reverse();
  const exists = others
    .map(
      () =>
        `AND EXISTS (SELECT 1 FROM scan_keys o WHERE o.value = ? AND o.ai = ? AND o.scan_id = k.scan_id)`,
    )
    .join(' ');
  const rows = db
    .prepare(
      `SELECT r.reference FROM scan_keys k JOIN scan_rows r ON r.id = k.scan_id
        WHERE k.value = ? AND k.ai = ? ${exists} ORDER BY k.scan_id DESC LIMIT 1000`,
    )
    .pluck()
    .all(first![1], first![0], ...others.flatMap(([ai, value]) => [value, ai])) as string[];
  return [...new Set(rows)].slice(0, MAX_KEY_REFERENCES);
}

/**
 * Whether a canonical reference names one instance (a serialised GTIN, an SSCC, a GIAI…), so that
 * every scan carrying its keys is that item; a GTIN alone or GTIN + lot names a class of items.
 */
export function namesInstance(canonical: CanonicalReference): boolean {
  const key = canonical.identifying[0]?.ai;
  if (key === '01' || key === '8006')
    return canonical.identifying.some((e) => e.ai === '21' || e.ai === '235');
  return true;
}

/** The canonical reference of a stored reference, or the reference itself when it is not GS1 data. */
export function canonicalOf(reference: string): string {
  const parse = parseBarcode(reference, { checkPairings: false });
  return (parse.kind === 'gs1' ? canonicalReference(parse.elements)?.uri : undefined) ?? reference;
}
