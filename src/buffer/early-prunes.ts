import type Database from 'better-sqlite3';
import type { EarlyPruneRecord } from './pruning.js';

/**
 * The early prunes (disk-guard.ts) that took scans of `reference`, oldest first: when, why, how
 * many scans the prune took and the span of their read times. Empty for a buffer written before
 * the tables existed (a read-only `trace` does not migrate it). Read by `trace` (reports.ts).
 */
export function earlyPrunesOf(db: Database.Database, reference: string): EarlyPruneRecord[] {
  const exists = db
    .prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'early_pruned_refs'`)
    .get();
  if (!exists) return [];
  const rows = db
    .prepare(
      `SELECT p.at, p.reason, p.scans, p.first_read_at AS firstReadAt, p.last_read_at AS lastReadAt
         FROM early_pruned_refs r JOIN early_prunes p ON p.at = r.pruned_at
        WHERE r.reference = ? ORDER BY p.id`,
    )
    .all(reference) as {
    at: string;
    reason: string;
    scans: number;
    firstReadAt: string | null;
    lastReadAt: string | null;
  }[];
  return rows.map((r) => ({
    at: r.at,
    reason: r.reason,
    scans: r.scans,
    ...(r.firstReadAt ? { firstReadAt: r.firstReadAt } : {}),
    ...(r.lastReadAt ? { lastReadAt: r.lastReadAt } : {}),
  }));
}
