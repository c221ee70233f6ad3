import type Database from 'better-sqlite3';
import { printableRaw } from '../format/printable.js';
import { firstReadSince } from './recent-activity.js';
import { scanStateSql } from '../buffer/scan-state.js';

/**
 * The station screen's questions (src/health/station.ts), read-only. A station is a
 * DCP; its reads are those mapped to it (`reads.dcp_key`), and those without a DCP (a read refused
 * before one was known) from the inputs configured for it. Both are found through the expression
 * index `reads_station` on `coalesce(dcp_key, '@' || input_id)`: the callers pass the DCP key and
 * `@<input id>` for each of its inputs ({@link stationKeys}).
 */

/** One read as the station screen shows it. */
export interface StationRead {
  id: number;
  /** `coalesce(dcp_key, '@' || input_id)`: the DCP, or `@` and the input for a read without one. */
  station: string;
  inputId: string;
  receivedAt: string;
  /** scan (taken), rejected (refused), duplicate (taken before), noRead. */
  outcome: string;
  /** Why it was refused (or the note of a taken read). */
  reason: string | null;
  /** The scan's reference, for a taken read. */
  reference: string | null;
  /** The read as received, control bytes as `<GS>`. */
  raw: string;
  /** The scan's state now (pending, batched, delivered, failed, held), for a taken read. */
  scanState: string | null;
  /** Why the service refused the scan, when it did. */
  failureReason: string | null;
}

/** The index keys of a station: its DCP key, and `@<input>` for each input configured with that DCP. */
export function stationKeys(dcpKey: string, inputIds: readonly string[]): string[] {
  return [dcpKey, ...inputIds.map((i) => `@${i}`)];
}

const COLUMNS = `r.id, coalesce(r.dcp_key, '@' || r.input_id) AS station, r.input_id AS inputId, r.received_at AS receivedAt, r.outcome,
  r.reason, r.raw, s.reference, ${scanStateSql('s.')} AS scanState, s.failure_reason AS failureReason`;
// The latest scan of the read (a replayed read has two).
const JOIN = `LEFT JOIN scan_rows s ON s.id = (SELECT max(id) FROM scan_rows WHERE read_id = r.id)`;

type Row = Omit<StationRead, 'raw'> & { raw: Buffer };
const toRead = (r: Row): StationRead => ({ ...r, raw: printableRaw(r.raw) });

/** The latest `limit` reads of the station, newest first (one index range per key, merged). */
export function stationRecent(
  db: Database.Database,
  keys: readonly string[],
  limit: number,
): StationRead[] {
  const st = db.prepare(
    `SELECT ${COLUMNS} FROM reads r ${JOIN} WHERE coalesce(r.dcp_key, '@' || r.input_id) = ? AND coalesce(r.input_level, 0) = 0 ORDER BY r.id DESC LIMIT ?`,
  );
  const rows = keys.flatMap((k) => st.all(k, limit) as Row[]);
  return rows
    .sort((a, b) => b.id - a.id)
    .slice(0, limit)
    .map(toRead);
}

/** Reads of the station since `sinceIso`, by outcome; cost grows with the station's reads in that span. */
export function stationCounts(
  db: Database.Database,
  keys: readonly string[],
  sinceIso: string,
): Record<string, number> {
  const first = firstReadSince(db, sinceIso);
  const out: Record<string, number> = {};
  if (first === null) return out;
  const st = db.prepare(
    `SELECT outcome, count(*) AS n FROM reads WHERE coalesce(dcp_key, '@' || input_id) = ? AND id >= ? AND coalesce(input_level, 0) = 0 GROUP BY outcome`,
  );
  for (const k of keys)
    for (const r of st.all(k, first) as { outcome: string; n: number }[])
      out[r.outcome] = (out[r.outcome] ?? 0) + r.n;
  return out;
}

/**
 * Reads committed after read `afterId`, oldest first, at most `limit` (the live feed's poll: a
 * range of the rowid). Input-level rejections (a file refused whole) are included, flagged
 * `inputLevel`, so the caller's cursor passes them; the screen does not show them.
 */
export function readsAfter(
  db: Database.Database,
  afterId: number,
  limit: number,
): (StationRead & { inputLevel: boolean })[] {
  return (
    db
      .prepare(
        `SELECT ${COLUMNS}, coalesce(r.input_level, 0) AS inputLevel FROM reads r ${JOIN} WHERE r.id > ? ORDER BY r.id LIMIT ?`,
      )
      .all(afterId, limit) as (Row & { inputLevel: number })[]
  ).map((r) => ({ ...toRead(r), inputLevel: r.inputLevel === 1 }));
}

/** Id of the latest read, 0 when none. */
export function lastReadId(db: Database.Database): number {
  return (db.prepare(`SELECT max(id) FROM reads`).pluck().get() as number | null) ?? 0;
}
