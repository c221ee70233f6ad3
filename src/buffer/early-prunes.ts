import type Database from 'better-sqlite3';
import { referenceHash, type EarlyPruneRecord } from './pruning.js';

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
  const times = new Set(
    db
      .prepare(`SELECT pruned_at FROM early_pruned_refs WHERE ref_hash = ?`)
      .pluck()
      .all(referenceHash(reference)) as number[],
  );
  if (times.size === 0) return [];
  const rows = (
    db
      .prepare(
        `SELECT at, reason, scans, first_read_at AS firstReadAt, last_read_at AS lastReadAt FROM early_prunes ORDER BY id`,
      )
      .all() as {
      at: string;
      reason: string;
      scans: number;
      firstReadAt: string | null;
      lastReadAt: string | null;
    }[]
  ).filter((p) => times.has(Date.parse(p.at)));
  return rows.map((r) => ({
    at: r.at,
    reason: r.reason,
    scans: r.scans,
    ...(r.firstReadAt ? { firstReadAt: r.firstReadAt } : {}),
    ...(r.lastReadAt ? { lastReadAt: r.lastReadAt } : {}),
  }));
}
