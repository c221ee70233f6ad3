import { containersOf, refusalsOf } from './item-refusals.js';
import { earlyPrunesOf } from '../buffer/early-prunes.js';
import type Database from 'better-sqlite3';
import { OutboxCounts, type PrunedCounts } from '../buffer/outbox-counts.js';
import {
  lastReadId,
  readsAfter,
  stationCounts,
  stationRecent,
  type StationRead,
} from './station.js';
import { lookupItem } from './item-lookup.js';
import { searchByValue, type ValueMatches } from './key-search.js';
import { searchItems, type ItemMatch, type ItemTrace, type TraceOptions } from './items.js';
import {
  batchCounts,
  failuresReport,
  queueReport,
  statsReport,
  type FailuresReport,
  type FailuresSelection,
  type QueueReport,
  type StatsReport,
} from './ops-reports.js';
import {
  batchesPastGrace,
  recentActivity,
  stuckBatches,
  type BatchPastGrace,
  type RecentActivity,
} from './recent-activity.js';
import { BATCH_COLUMNS, type BatchRow, type BufferTotals } from '../buffer/rows.js';
import { indexedState } from '../buffer/scan-state.js';

/**
 * Read-only questions about the SQLite buffer: what the status and the health page show on every
 * refresh (totals, scan counts, the last batches and problems, the last upload), and what plant IT
 * asks (what is waiting, what failed, how big is it; ops-reports.ts), the item lookup (items.ts),
 * the station screen (station.ts) and what happened lately (recent-activity.ts). Never a write.
 */

/**
 * A batch as `/api/v1/status` shows it: instants as ISO 8601 (the buffer keeps some as ms since
 * the epoch), everything else as stored but the pre-signed address: until it expires, it lets
 * whoever holds it write the batch's object (contract §4.4), so it never leaves the process.
 */
export function batchView<
  T extends {
    presignedUrl?: string | null;
    presignedExpiresAt?: number | null;
    putStartedAt?: number | null;
    nextAttemptAt?: number | null;
  },
>(
  b: T,
): Omit<T, 'presignedUrl' | 'presignedExpiresAt' | 'putStartedAt' | 'nextAttemptAt'> & {
  presignedExpiresAt?: string | null;
  putStartedAt?: string | null;
  nextAttemptAt?: string | null;
} {
  const iso = (ms: number | null | undefined) =>
    ms === null || ms === undefined ? ms : ms === 0 ? null : new Date(ms).toISOString();
  const { presignedUrl: _signed, ...rest } = b;
  return {
    ...(rest as Omit<T, 'presignedUrl' | 'presignedExpiresAt' | 'putStartedAt' | 'nextAttemptAt'>),
    ...('presignedExpiresAt' in b ? { presignedExpiresAt: iso(b.presignedExpiresAt) } : {}),
    ...('putStartedAt' in b ? { putStartedAt: iso(b.putStartedAt) } : {}),
    // 0 means "due now" in the buffer; as an instant that is no time at all.
    ...('nextAttemptAt' in b ? { nextAttemptAt: iso(b.nextAttemptAt) } : {}),
  };
}

/** A failed scan (not yet replayed) or a rejected read, as the status lists it. */
export interface RecentProblem {
  kind: 'failed' | 'rejected';
  inputId: string;
  reference?: string;
  reason: string;
  raw: Buffer;
  at: string;
  origin?: string;
}

/**
 * The read-only reports of one open buffer connection (the daemon's store, `store.reports`, or
 * the CLI's read-only {@link BufferReader}); the connection itself never leaves `src/buffer/`.
 * The status reads run on every health refresh and every submit (the quota's totals): their
 * statements are prepared at their first use and kept, not in the constructor, because the
 * CLI's reader may open a buffer of an older schema that lacks a table one of them reads (it
 * asks only for the reports that older buffers can answer).
 */
export class BufferReports {
  /** Statements prepared at their first use, by name. */
  private readonly kept = new Map<string, Database.Statement>();
  /** The outbox's own counts, read on this connection. */
  private readonly counts: OutboxCounts;

  constructor(
    private readonly db: Database.Database,
    private readonly path: string,
  ) {
    this.counts = new OutboxCounts(db);
  }

  private statement(name: string, sql: () => string, pluck = false): Database.Statement {
    let st = this.kept.get(name);
    if (!st) {
      st = this.db.prepare(sql());
      if (pluck) st.pluck();
      this.kept.set(name, st);
    }
    return st;
  }

  /** Undelivered scans and their bytes: see {@link OutboxCounts.totals}. */
  totals(): BufferTotals {
    return this.counts.totals();
  }

  /** Scan counts by state: see {@link OutboxCounts.scanCounts}. */
  scanCounts(): Record<string, number> {
    return this.counts.scanCounts();
  }

  /** What pruning removed, lifetime: see {@link OutboxCounts.pruned}. */
  pruned(): PrunedCounts {
    return this.counts.pruned();
  }

  /**
   * `created_at` (ms) of the oldest scan not yet delivered: pending, or in a batch the service has
   * not finished; null when there is none. What "how far behind is delivery" is measured by.
   */
  oldestUndeliveredCreatedAt(): number | null {
    const times = [this.oldestCreatedAt('pending'), this.oldestCreatedAt('batched')].filter(
      (t): t is number => t !== null,
    );
    return times.length > 0 ? Math.min(...times) : null;
  }

  /**
   * `created_at` (ms) of the first scan in `state`, or null: a pending one by id through the
   * scans_state index; a batched one (in flight) as the earliest of each open batch's first scan
   * (scans_batch, one index step per batch: the status page asks on every refresh, and walking
   * every in-flight scan took about 4 ms at 40,000 of them).
   */
  private oldestCreatedAt(state: 'pending' | 'batched'): number | null {
    const st =
      state === 'pending'
        ? this.statement(
            'oldestPending',
            () =>
              `SELECT created_at FROM scan_rows WHERE state = 'pending' AND ${indexedState()} ORDER BY id LIMIT 1`,
            true,
          )
        : this.statement(
            'oldestBatched',
            () =>
              `SELECT min((SELECT created_at FROM scan_rows WHERE batch_id = b.id AND state = 'batched' ORDER BY id LIMIT 1)) FROM batches b WHERE b.state <> 'done'`,
            true,
          );
    return (st.get() as number | null | undefined) ?? null;
  }

  /** When the latest batch was uploaded (ISO 8601), or null before the first; by index (migration 3). */
  lastUploadAt(): string | null {
    return (
      (this.statement('lastUploadAt', () => `SELECT max(uploaded_at) FROM batches`, true).get() as
        string | null) ?? null
    );
  }

  /** The latest `limit` batches, newest first (shown through {@link batchView}). */
  recentBatches(limit: number): BatchRow[] {
    return this.statement(
      'recentBatches',
      () => `SELECT ${BATCH_COLUMNS} FROM batches ORDER BY id DESC LIMIT ?`,
    ).all(limit) as BatchRow[];
  }

  /** The latest failed scans (not yet replayed) and rejected reads, newest first, at most `limit`, for people. */
  recentProblems(limit: number): RecentProblem[] {
    return this.statement(
      'recentProblems',
      () =>
        // Each part limited before the union and the join, each by an index in reverse (the latest
        // failed and held scans by scan id, the latest rejections by read id): sorting every dead
        // letter with its raw read took about 50 ms at 10,000 of them, on each health refresh.
        `SELECT * FROM (
           SELECT 'failed' AS kind, r.input_id AS inputId, s.reference AS reference, s.failure_reason AS reason, r.raw AS raw, r.received_at AS at, r.origin AS origin, r.id AS rid
             FROM (SELECT * FROM (SELECT id, read_id, reference, failure_reason FROM scan_rows WHERE state = 'failed' AND ${indexedState()} AND replayed_by IS NULL ORDER BY id DESC LIMIT ?)
                   UNION ALL
                   SELECT * FROM (SELECT id, read_id, reference, failure_reason FROM scan_rows WHERE state = 'held' AND ${indexedState()} AND replayed_by IS NULL ORDER BY id DESC LIMIT ?)) s
             JOIN reads r ON r.id = s.read_id
           UNION ALL
           SELECT * FROM (SELECT 'rejected', input_id, NULL, reason, raw, received_at, origin, id FROM reads WHERE outcome = 'rejected' ORDER BY id DESC LIMIT ?)
         ) ORDER BY rid DESC LIMIT ?`,
    ).all(limit, limit, limit, limit) as RecentProblem[];
  }

  /** Uploads sent again after their answer was lost: see {@link OutboxCounts.possibleDuplicates}. */
  possibleDuplicates(): ReturnType<OutboxCounts['possibleDuplicates']> {
    return this.counts.possibleDuplicates();
  }

  /**
   * High availability: reads stored as possible duplicates (sent again by the broker after a
   * takeover), their lifetime count and the latest `limit` with their references.
   */
  haPossibleDuplicates(limit: number): {
    reads: number;
    recent: {
      reference: string | null;
      dcpKey: string | null;
      receivedAt: string;
      epoch: number | null;
    }[];
  } {
    const reads =
      (this.statement(
        'haPossibleDuplicateReads',
        () => `SELECT value FROM counters WHERE name = 'haPossibleDuplicateReads'`,
        true,
      ).get() as number | undefined) ?? 0;
    const recent = this.statement(
      'haPossibleDuplicateRecent',
      () => `SELECT s.reference AS reference, r.dcp_key AS dcpKey, r.received_at AS receivedAt, r.leader_epoch AS epoch
               FROM (SELECT * FROM reads WHERE possible_duplicate = 1 ORDER BY id DESC LIMIT ?) r LEFT JOIN scan_rows s ON s.read_id = r.id ORDER BY r.id DESC`,
    ).all(limit) as {
      reference: string | null;
      dcpKey: string | null;
      receivedAt: string;
      epoch: number | null;
    }[];
    return { reads, recent };
  }

  /** See {@link queueReport}. */
  queue(nowMs: number): QueueReport {
    return queueReport(this.db, nowMs);
  }

  /** See {@link failuresReport}. */
  failures(selection: FailuresSelection): FailuresReport {
    return failuresReport(this.db, selection);
  }

  /** See {@link statsReport}; the file sizes are those of this buffer's path. */
  stats(): StatsReport {
    return statsReport(this.db, this.path, this.counts);
  }

  /** See {@link batchCounts}. */
  batchCounts(): { mode: string; state: string; count: number }[] {
    return batchCounts(this.db);
  }

  /** See {@link recentActivity}. */
  recentActivity(sinceMs: number): RecentActivity {
    return recentActivity(this.db, sinceMs);
  }

  /** What happened to one item, found by its reference or any form of its GS1 identifier: see {@link lookupItem}. */
  trace(reference: string, options: TraceOptions = {}): ItemTrace {
    const t = lookupItem(this.db, reference, options);
    // Scans of it taken by early pruning under a full disk: trace says when and why (early-prunes.ts).
    const prunedEarly = earlyPrunesOf(this.db, t.reference);
    // Its refused reads beside its scans, and how the containers it labelled ended (item-refusals.ts).
    const refusals = refusalsOf(this.db, reference, t.reference);
    const containers = containersOf(this.db, t.reference);
    return {
      ...t,
      ...(prunedEarly.length > 0 ? { prunedEarly } : {}),
      ...(refusals.length > 0 ? { refusals } : {}),
      ...(containers.length > 0 ? { containers } : {}),
    };
  }

  /** The items carrying an AI's value, a page each: see {@link searchByValue}. */
  searchByValue(
    value: string,
    options: { ai?: string; limit?: number; cursor?: string } = {},
  ): ValueMatches[] {
    return searchByValue(this.db, value, options);
  }

  /** References starting with `prefix`: see {@link searchItems}. */
  searchItems(prefix: string, limit?: number): ItemMatch[] {
    return searchItems(this.db, prefix, limit);
  }

  /** The station screen's last reads (src/queries/station.ts {@link stationRecent}). */
  stationRecent(keys: readonly string[], limit: number): StationRead[] {
    return stationRecent(this.db, keys, limit);
  }

  /** See {@link stationCounts}. */
  stationCounts(keys: readonly string[], sinceIso: string): Record<string, number> {
    return stationCounts(this.db, keys, sinceIso);
  }

  /** See {@link readsAfter}. */
  readsAfter(afterId: number, limit: number): (StationRead & { inputLevel: boolean })[] {
    return readsAfter(this.db, afterId, limit);
  }

  /** See {@link lastReadId}. */
  lastReadId(): number {
    return lastReadId(this.db);
  }

  /** See {@link batchesPastGrace}. */
  batchesPastGrace(uploadedBeforeMs: number): BatchPastGrace[] {
    return batchesPastGrace(this.db, uploadedBeforeMs);
  }

  /** See {@link stuckBatches}. */
  stuckBatches(
    beforeMs: number,
  ): { id: number; state: string; requestId: string | null; createdAt: string }[] {
    return stuckBatches(this.db, beforeMs);
  }
}
