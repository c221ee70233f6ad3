import { createHash } from 'node:crypto';
import type Database from 'better-sqlite3';

/** One early prune as remembered in the buffer (table `early_prunes`). */
export interface EarlyPruneRecord {
  /** ISO 8601 instant of the prune. */
  at: string;
  /** Why, in words (the free space against the mark, or SQLite's full disk). */
  reason: string;
  /** Delivered scans removed. */
  scans: number;
  /** Earliest and latest read time (ISO 8601) of those scans. */
  firstReadAt?: string;
  lastReadAt?: string;
}

/** The early prunes remembered in the buffer, summed: count of scans and the span of their read times. */
export interface EarlyPruneSummary {
  scans: number;
  firstReadAt?: string;
  lastReadAt?: string;
  /** The latest prune. */
  last?: EarlyPruneRecord;
}

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
  return rows.map(withoutNulls);
}

/**
 * The early prunes remembered in the buffer (tables `early_prunes` and `early_pruned_refs`): each
 * prune of delivered scans before the end of their audit period (disk-guard.ts, `buffer prune`),
 * kept until that period has passed, so the page, the metric and `trace` can say what was lost.
 */
export class EarlyPruneLog {
  private readonly s: Record<
    'recordEarly' | 'earlySummary' | 'lastEarly' | 'earlyCovering' | 'forgetRefs' | 'forgetPrunes',
    Database.Statement
  >;

  constructor(private readonly db: Database.Database) {
    const prepare = (sql: string) => db.prepare(sql);
    this.s = {
      recordEarly: prepare(
        `INSERT INTO early_prunes (at, reason, scans, first_read_at, last_read_at) VALUES (?, ?, ?, ?, ?)`,
      ),
      earlySummary: prepare(
        `SELECT coalesce(sum(scans), 0) AS scans, min(first_read_at) AS firstReadAt, max(last_read_at) AS lastReadAt FROM early_prunes`,
      ),
      lastEarly: prepare(
        `SELECT at, reason, scans, first_read_at AS firstReadAt, last_read_at AS lastReadAt FROM early_prunes ORDER BY id DESC LIMIT 1`,
      ),
      earlyCovering: prepare(
        `SELECT at, reason, scans, first_read_at AS firstReadAt, last_read_at AS lastReadAt FROM early_prunes ORDER BY id`,
      ),
      forgetRefs: prepare(`DELETE FROM early_pruned_refs WHERE pruned_at < ?`),
      forgetPrunes: prepare(`DELETE FROM early_prunes WHERE at < ?`),
    };
  }

  /** Remembers one early prune (table `early_prunes`). */
  record(r: EarlyPruneRecord): void {
    this.s.recordEarly.run(r.at, r.reason, r.scans, r.firstReadAt ?? null, r.lastReadAt ?? null);
  }

  /** Forgets the early prunes (and their references) made before `beforeIso`: past the audit period. */
  forget(beforeIso: string): number {
    return this.db
      .transaction(
        () =>
          this.s.forgetRefs.run(Date.parse(beforeIso)).changes +
          this.s.forgetPrunes.run(beforeIso).changes,
      )
      .immediate();
  }

  /** Every early prune remembered, summed, with the latest. */
  summary(): EarlyPruneSummary {
    const sum = this.s.earlySummary.get() as {
      scans: number;
      firstReadAt: string | null;
      lastReadAt: string | null;
    };
    const last = this.s.lastEarly.get() as
      | (Omit<EarlyPruneRecord, 'firstReadAt' | 'lastReadAt'> & {
          firstReadAt: string | null;
          lastReadAt: string | null;
        })
      | undefined;
    return {
      scans: sum.scans,
      ...(sum.firstReadAt ? { firstReadAt: sum.firstReadAt } : {}),
      ...(sum.lastReadAt ? { lastReadAt: sum.lastReadAt } : {}),
      ...(last ? { last: withoutNulls(last) } : {}),
    };
  }

  /** Every early prune remembered, oldest first. */
  all(): EarlyPruneRecord[] {
    return (
      this.s.earlyCovering.all() as (Omit<EarlyPruneRecord, 'firstReadAt' | 'lastReadAt'> & {
        firstReadAt: string | null;
        lastReadAt: string | null;
      })[]
    ).map(withoutNulls);
  }
}

/**
 * 64 bits of the SHA-256 of a reference, as SQLite stores an INTEGER: what `early_pruned_refs`
 * keeps of a pruned scan's reference (a false match is one in 2^64).
 */
export function referenceHash(reference: string): bigint {
  return createHash('sha256').update(reference).digest().readBigInt64BE(0);
}

function withoutNulls(r: {
  at: string;
  reason: string;
  scans: number;
  firstReadAt: string | null;
  lastReadAt: string | null;
}): EarlyPruneRecord {
  return {
    at: r.at,
    reason: r.reason,
    scans: r.scans,
    ...(r.firstReadAt ? { firstReadAt: r.firstReadAt } : {}),
    ...(r.lastReadAt ? { lastReadAt: r.lastReadAt } : {}),
  };
}
