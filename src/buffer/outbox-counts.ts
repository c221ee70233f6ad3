import type Database from 'better-sqlite3';
import type { BufferTotals } from './rows.js';
import { PRUNED_COUNTERS } from './pruning.js';

/**
 * What pruning removed from the buffer, lifetime (table `counters`, written by
 * `Pruning.pruneBatchChunk` in the same transaction as the deletes). The scan counts by state
 * count the rows still in the buffer; these are the rows no longer there. Counted from the gateway
 * version that writes them on: a prune by an older gateway is not in them.
 */
export interface PrunedCounts {
  /** Delivered scans removed: past their audit period (`buffer.retentionDays`), or early. */
  deliveredScans: number;
  /** Of {@link deliveredScans}, those removed before the end of their audit period (disk low, `buffer prune`). */
  deliveredScansEarly: number;
  /** Replayed dead letters removed with the delivered scans that replaced them (not in {@link deliveredScans}). */
  deadLetters: number;
}

/**
 * The outbox's own counts: what is undelivered (back-pressure asks on every group commit, the
 * batcher before each batch), scans by state, uploads sent twice. They are asked on the store's
 * connection, inside its transactions, so they see the writes not yet committed; the queries
 * room (src/queries/reports.ts) asks the same on its read-only connection for the status.
 *
 * Statements are prepared at their first use and kept, not in the constructor: a reader may open
 * a buffer of an older schema that lacks a table one of them reads.
 */
export class OutboxCounts {
  /** Statements prepared at their first use, by name. */
  private readonly kept = new Map<string, Database.Statement>();

  constructor(private readonly db: Database.Database) {}

  private statement(name: string, sql: () => string): Database.Statement {
    let st = this.kept.get(name);
    if (!st) {
      st = this.db.prepare(sql());
      this.kept.set(name, st);
    }
    return st;
  }

  /** Undelivered scans and their bytes, from the trigger-maintained totals: one row read (back-pressure asks on every group commit). */
  totals(): BufferTotals {
    return this.statement(
      'totals',
      () => `SELECT pending_scans AS pendingScans, pending_bytes AS pendingBytes,
         undelivered_scans AS undeliveredScans, undelivered_bytes AS undeliveredBytes FROM buffer_totals WHERE id = 1`,
    ).get() as BufferTotals;
  }

  /**
   * Scan counts by state; dead letters that were replayed are counted as `replayed`, not
   * `failed`/`held`. Its three reads are one read transaction: on the queries' connection each
   * statement alone would see its own snapshot, and a batch finished between the first and the
   * second would count its scans twice (still `batched` in the totals, `delivered` already).
   */
  scanCounts(): Record<string, number> {
    return this.db.transaction(() => this.scanCountsNow())();
  }

  private scanCountsNow(): Record<string, number> {
    const counts: Record<string, number> = {};
    // Kept by triggers (migration 3): a GROUP BY over a month of delivered scans blocked the event
    // loop for about 150 ms per million rows on every health refresh.
    const totals = this.totals();
    if (totals.pendingScans > 0) counts.pending = totals.pendingScans;
    if (totals.undeliveredScans > totals.pendingScans)
      counts.batched = totals.undeliveredScans - totals.pendingScans;
    for (const r of this.statement(
      'stateCounts',
      () => `SELECT state, scans AS n FROM scan_state_counts WHERE scans > 0`,
    ).all() as { state: string; n: number }[])
      counts[r.state] = r.n;
    // INDEXED BY: for the GROUP BY the planner otherwise walks scans_state, every row of it.
    const replayed = this.statement(
      'replayed',
      () =>
        `SELECT state, count(*) AS n FROM scan_rows INDEXED BY scans_replayed WHERE replayed_by IS NOT NULL GROUP BY state`,
    ).all() as {
      state: string;
      n: number;
    }[];
    for (const r of replayed) {
      counts[r.state] = (counts[r.state] ?? 0) - r.n;
      if (counts[r.state] === 0) delete counts[r.state];
      counts.replayed = (counts.replayed ?? 0) + r.n;
    }
    return counts;
  }

  /** What pruning removed, lifetime: see {@link PrunedCounts}. One read of a table of a few rows. */
  pruned(): PrunedCounts {
    const rows = this.statement(
      'pruned',
      () => `SELECT name, value FROM counters WHERE name IN (?, ?, ?)`,
    ).all(PRUNED_COUNTERS.delivered, PRUNED_COUNTERS.early, PRUNED_COUNTERS.deadLetters) as {
      name: string;
      value: number;
    }[];
    const get = (n: string) => rows.find((r) => r.name === n)?.value ?? 0;
    return {
      deliveredScans: get(PRUNED_COUNTERS.delivered),
      deliveredScansEarly: get(PRUNED_COUNTERS.early),
      deadLetters: get(PRUNED_COUNTERS.deadLetters),
    };
  }

  /**
   * Possible duplicates: batches sent again after their answer was lost, and their scans. `uploads`
   * and `scans` count the batches whose status from the service is not known yet (not `done` or
   * `held`): once it is, the service has said what it holds, and they no longer count. `total*`
   * are the lifetime counts.
   */
  possibleDuplicates(): {
    uploads: number;
    scans: number;
    totalUploads: number;
    totalScans: number;
  } {
    const rows = this.statement(
      'possibleDuplicates',
      () => `SELECT name, value FROM counters WHERE name LIKE 'possibleDuplicate%'`,
    ).all() as { name: string; value: number }[];
    const get = (n: string) => rows.find((r) => r.name === n)?.value ?? 0;
    const open = this.statement(
      'openPossibleDuplicates',
      () =>
        `SELECT count(*) AS uploads, coalesce(sum(scan_count), 0) AS scans FROM batches
          WHERE possible_duplicate > 0 AND state IN ('ready', 'uploading', 'presigned', 'uploaded')`,
    ).get() as { uploads: number; scans: number };
    return {
      uploads: open.uploads,
      scans: open.scans,
      totalUploads: get('possibleDuplicateUploads'),
      totalScans: get('possibleDuplicateScans'),
    };
  }
}
