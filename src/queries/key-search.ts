import type Database from 'better-sqlite3';
import type { Gs1Key } from '../buffer/item-keys.js';
import {
  canonicalReference,
  lookupAi,
  normaliseTyped,
  parseBarcode,
  type CanonicalReference,
  type Gs1Element,
} from '../gs1/index.js';

/*
 * The lookup of an item by any form of its GS1 identifier, and the search by an AI's value, on the
 * keys the buffer writes with each scan (`scan_keys`, src/buffer/item-keys.ts).
 */

/** Most references one lookup by keys looks at before it lists them instead of tracing one. */
const MAX_KEY_REFERENCES = 20;
/** Largest page of a search by value; the default. */
export const MAX_VALUE_PAGE = 200;
export const DEFAULT_VALUE_PAGE = 50;
/** Scans counted for a value at most: counting a GTIN's million scans would cost seconds. */
export const MAX_VALUE_COUNT = 10_000;

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
