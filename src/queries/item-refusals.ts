import type Database from 'better-sqlite3';
import { printableRaw } from '../format/printable.js';
import { readQuery } from './key-search.js';
import type { ContainerRow } from '../buffer/rows.js';

/** Most refusals of one item listed (the latest). */
export const MAX_ITEM_REFUSALS = 50;

/** A read of the item that was not made into a scan: when, where, and why. */
export interface ItemRefusal {
  /** The read's id in the buffer. */
  id: number;
  /** When the gateway received it (ISO 8601). */
  at: string;
  inputId: string;
  /** The station: the DCP it was mapped to, or the input's when none was known. */
  station: string | null;
  /** `rejected` (refused by a rule, a container, a check digit…); `duplicate` is not listed. */
  outcome: string;
  reason: string;
  /** The read as received, control bytes as `<GS>`. */
  raw: string;
  /** Where it came from (file and line, port, topic), as stored (JSON). */
  origin: string | null;
}

/**
 * What a lookup searches the refused reads for: the query as typed and, for a GS1 label, its most
 * specific identifying value (the serial of a serialised GTIN, the SSCC…), which a raw read
 * carries whatever the form it was typed in.
 */
function needles(query: string, reference: string): string[] {
  const out = new Set([query, reference].filter((n) => n.length >= 4));
  const canonical = readQuery(query).canonical;
  const last = canonical?.identifying[canonical.identifying.length - 1];
  if (last && last.value.length >= 4) out.add(last.value);
  return [...out];
}

/**
 * The refused reads (outcome `rejected`) whose raw bytes hold the item's reference or its most
 * specific GS1 value, latest first, at most {@link MAX_ITEM_REFUSALS}: a refused read has no
 * scan, so no reference of its own. Walks the refused reads by the `reads_outcome` index, newest
 * first, and looks into each read's bytes: the cost grows with the refused reads kept (the audit
 * period), not with the scans. A read matched by accident (the serial inside another label) is
 * possible; the raw read is listed, so a person tells.
 */
export function refusalsOf(db: Database.Database, query: string, reference: string): ItemRefusal[] {
  const found = needles(query, reference);
  if (found.length === 0) return [];
  const match = found.map(() => 'instr(raw, ?) > 0').join(' OR ');
  const rows = db
    .prepare(
      `SELECT id, received_at AS at, input_id AS inputId, dcp_key AS station, outcome, coalesce(reason, '') AS reason, raw, origin
         FROM reads WHERE outcome = 'rejected' AND (${match}) ORDER BY id DESC LIMIT ?`,
    )
    .all(...found.map((n) => Buffer.from(n, 'utf8')), MAX_ITEM_REFUSALS) as (Omit<
    ItemRefusal,
    'raw'
  > & { raw: Buffer })[];
  return rows.map((r) => ({ ...r, raw: printableRaw(r.raw) }));
}

/** The containers the item was the label of (how each ended), oldest first; none on a buffer without the table. */
export function containersOf(db: Database.Database, reference: string): ContainerRow[] {
  const exists = db
    .prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'containers'`)
    .get();
  if (exists === undefined) return [];
  return (
    db
      .prepare(
        `SELECT container, per, station, parent, opened_at AS openedAt, last_read_at AS lastReadAt, members, expected, state, closed_at AS closedAt, why, closed_by AS "by"
           FROM containers WHERE parent = ? ORDER BY id LIMIT 50`,
      )
      .all(reference) as (ContainerRow & Record<string, unknown>)[]
  ).map((r) => {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(r)) if (v !== null) out[k] = v;
    return out as unknown as ContainerRow;
  });
}
