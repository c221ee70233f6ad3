import type Database from 'better-sqlite3';
import { EarlyPruneLog, referenceHash } from './early-prunes.js';

/** What one prune removed. */
export interface PruneResult {
  /** Delivered scans removed. */
  scans: number;
  /**
   * Replayed dead letters removed with the delivered scans that replaced them (not in `scans`:
   * they were never delivered). Absent when none.
   */
  deadLetters?: number;
  /** Reads left without any scan, and no-reads and duplicate reads. */
  reads: number;
  /** Finished batches left without any scan. */
  batches: number;
  /** File hashes (duplicate-file detection) older than the audit period. */
  files: number;
  /** Earliest read time (ISO 8601) of the delivered scans removed, when any were. */
  firstReadAt?: string;
  /** Latest read time (ISO 8601) of the delivered scans removed, when any were. */
  lastReadAt?: string;
}

/**
 * The newest row of a table is never pruned: ids are `INTEGER PRIMARY KEY` (max + 1, no
 * AUTOINCREMENT), so a buffer pruned empty would hand out batch 1 again, and logs, `replay
 * --batch N` and the audit trail would name two batches alike.
 */
const NOT_NEWEST = (table: 'batches' | 'scan_rows' | 'reads'): string =>
  `id < (SELECT max(id) FROM ${table})`;

/**
 * Names in table `counters` of the lifetime counts of pruned rows (never falling; they survive
 * restarts and go with a backup): delivered scans removed (past the audit period, or early), of
 * them those removed before the end of their audit period (disk low, `buffer prune`), and replayed
 * dead letters removed with the scans that replaced them. Counted from the gateway version that
 * writes them on; a prune by an older gateway is not in them.
 */
export const PRUNED_COUNTERS = {
  delivered: 'prunedDeliveredScans',
  early: 'prunedDeliveredScansEarly',
  deadLetters: 'prunedDeadLetters',
} as const;

/** How deep {@link Pruning.pruneBatchChunk} follows replayed dead letters (a replay of a replay…). */
const REPLAY_DEPTH = 16;

/**
 * The deletes of the audit period (retention.ts) and of early pruning under disk pressure
 * (disk-guard.ts): delivered scans of finished batches with their reads, the replayed dead letters
 * they replaced, emptied batches, old no-reads and duplicate reads, file hashes, file progress and
 * MQTT message identities. Undelivered data is never selected. Each write runs in a short IMMEDIATE
 * transaction of its own (see `BufferStore.atomically`), so intake waits at most one of them.
 * Built by `BufferStore.open` on its connection; every statement is prepared once, here.
 */
export class Pruning {
  private readonly s: Record<
    | 'finishedBefore'
    | 'oldestDeliveredAfter'
    | 'deliveredOfBatch'
    | 'deleteScan'
    | 'replacedBy'
    | 'deleteRead'
    | 'deleteEmptyBatch'
    | 'readsPage'
    | 'deleteOldRead'
    | 'files'
    | 'fileProgress'
    | 'messages'
    | 'eligible'
    | 'scanRows'
    | 'scanIdSpan'
    | 'deliveredBefore'
    | 'deliveredOfBatchBefore'
    | 'rememberRef'
    | 'addCounter',
    Database.Statement
  >;

  /** The early prunes remembered (table `early_prunes`), for the page, `trace` and retention. */
  readonly early: EarlyPruneLog;

  constructor(private readonly db: Database.Database) {
    this.early = new EarlyPruneLog(db);
    const prepare = (sql: string) => db.prepare(sql);
    this.s = {
      finishedBefore: prepare(
        `SELECT id FROM batches WHERE state = 'done' AND finished_at < ? ORDER BY id`,
      ).pluck(),
      oldestDeliveredAfter: prepare(
        `SELECT id FROM batches WHERE state = 'done' AND id > ? AND finished_at < ? AND EXISTS (SELECT 1 FROM scan_rows WHERE batch_id = batches.id AND state IN ('delivered', 'batched')) ORDER BY id LIMIT 1`,
      ).pluck(),
      // In a done batch a `batched` row is delivered (migration 13); the delete triggers count it so.
      deliveredOfBatch: prepare(
        `SELECT id, read_id AS readId, time_utc AS readAt, reference FROM scan_rows WHERE batch_id = ? AND state IN ('delivered', 'batched') LIMIT ?`,
      ),
      deliveredOfBatchBefore: prepare(
        `SELECT id, read_id AS readId, time_utc AS readAt, reference FROM scan_rows WHERE batch_id = ? AND state IN ('delivered', 'batched') AND time_utc < ? LIMIT ?`,
      ),
      rememberRef: prepare(
        `INSERT OR IGNORE INTO early_pruned_refs (ref_hash, pruned_at) VALUES (?, ?)`,
      ),
      addCounter: prepare(
        `INSERT INTO counters (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = value + excluded.value`,
      ),
      deleteScan: prepare(`DELETE FROM scan_rows WHERE id = ? AND ${NOT_NEWEST('scan_rows')}`),
      replacedBy: prepare(
        `SELECT id, read_id AS readId, batch_id AS batchId FROM scan_rows WHERE replayed_by = ?`,
      ),
      deleteRead: prepare(
        `DELETE FROM reads WHERE id = ? AND NOT EXISTS (SELECT 1 FROM scan_rows WHERE read_id = ?) AND ${NOT_NEWEST('reads')}`,
      ),
      deleteEmptyBatch: prepare(
        `DELETE FROM batches WHERE id = ? AND state = 'done' AND NOT EXISTS (SELECT 1 FROM scan_rows WHERE batch_id = ?) AND ${NOT_NEWEST('batches')}`,
      ),
      readsPage: prepare(
        `SELECT id, received_at AS at FROM reads WHERE outcome = ? AND id > ? ORDER BY id LIMIT ?`,
      ),
      deleteOldRead: prepare(`DELETE FROM reads WHERE id = ? AND ${NOT_NEWEST('reads')}`),
      files: prepare(`DELETE FROM files WHERE committed_at < ?`),
      fileProgress: prepare(`DELETE FROM file_progress WHERE updated_at < ?`),
      messages: prepare(`DELETE FROM mqtt_messages WHERE committed_at < ?`),
      eligible: prepare(
        `SELECT count(*) FROM scan_rows s JOIN batches b ON b.id = s.batch_id WHERE b.state = 'done' AND b.finished_at < ? AND s.state IN ('delivered', 'batched')`,
      ).pluck(),
      scanRows: prepare(`SELECT count(*) FROM scan_rows`).pluck(),
      // Two seeks of the rowid, not a count: asked every minute of a 10-million-row buffer.
      scanIdSpan: prepare(
        `SELECT (SELECT min(id) FROM scan_rows) AS first, (SELECT max(id) FROM scan_rows) AS last`,
      ),
      deliveredBefore: prepare(
        `SELECT DISTINCT s.batch_id FROM scan_rows s JOIN batches b ON b.id = s.batch_id WHERE b.state = 'done' AND s.state IN ('delivered', 'batched') AND s.time_utc < ? ORDER BY s.batch_id`,
      ).pluck(),
    };
  }

  /** Ids of the batches finished before `cutoffIso`, oldest first. */
  finishedBefore(cutoffIso: string): number[] {
    return this.s.finishedBefore.all(cutoffIso) as number[];
  }

  /**
   * The first batch after id `afterId`, finished before `finishedBeforeIso`, that still has
   * delivered scans, or undefined.
   */
  oldestDeliveredBatchAfter(afterId: number, finishedBeforeIso: string): number | undefined {
    return this.s.oldestDeliveredAfter.get(afterId, finishedBeforeIso) as number | undefined;
  }

  /** Delivered scans of batches finished before `finishedBeforeIso`: what early pruning may take. */
  eligibleScans(finishedBeforeIso: string): number {
    return this.s.eligible.get(finishedBeforeIso) as number;
  }

  /** Rows of `scan_rows`, of every state: the denominator of the bytes one scan takes. */
  scanRows(): number {
    return this.s.scanRows.get() as number;
  }

  /**
   * The oldest and newest scan ids (0 when empty): the newest counts the scans ever written (ids
   * only grow), the span about the scans held (retention deletes the oldest), with no count.
   */
  scanIdSpan(): { first: number; last: number } {
    const r = this.s.scanIdSpan.get() as { first: number | null; last: number | null };
    return { first: r.first ?? 0, last: r.last ?? 0 };
  }

  /** Ids of the finished batches holding delivered scans read before `beforeIso`, oldest first. */
  batchesWithDeliveredReadBefore(beforeIso: string): number[] {
    return this.s.deliveredBefore.all(beforeIso) as number[];
  }

  /**
   * Deletes up to `chunk` delivered scans of one finished batch (the callers pick only `done`
   * batches), the dead letters they replaced and the reads left without a scan, in one
   * transaction; adds what it removed to `total` and the batches of replaced dead letters to
   * `emptied` (for {@link deleteEmptyBatches}). Answers true when the batch has none left (it is
   * then deleted too). With `readBeforeIso`, only its scans read before that instant. With
   * `earlyAt` (an early prune's instant), the references of the scans removed are remembered
   * under it (table `early_pruned_refs`), for `trace`.
   */
  pruneBatchChunk(
    batchId: number,
    chunk: number,
    total: PruneResult,
    emptied: Set<number>,
    readBeforeIso?: string,
    earlyAt?: string,
  ): boolean {
    return this.db
      .transaction(() => {
        const scans = (
          readBeforeIso === undefined
            ? this.s.deliveredOfBatch.all(batchId, chunk)
            : this.s.deliveredOfBatchBefore.all(batchId, readBeforeIso, chunk)
        ) as {
          id: number;
          readId: number;
          readAt: string;
          reference?: string;
        }[];
        const readIds = new Set<number>();
        let replaced = scans.map((s) => s.id);
        let delivered = 0;
        let deadLetters = 0;
        for (const s of scans) {
          readIds.add(s.readId);
          const n = this.s.deleteScan.run(s.id).changes;
          delivered += n;
          if (n > 0) spanRead(total, s.readAt);
          if (n > 0 && earlyAt !== undefined && s.reference !== undefined)
            this.s.rememberRef.run(referenceHash(s.reference), Date.parse(earlyAt));
        }
        // The dead letters these scans replaced (replay), and theirs in turn.
        for (let depth = 0; replaced.length > 0 && depth < REPLAY_DEPTH; depth++) {
          const next: number[] = [];
          for (const id of replaced) {
            for (const old of this.s.replacedBy.all(id) as {
              id: number;
              readId: number;
              batchId: number | null;
            }[]) {
              readIds.add(old.readId);
              if (old.batchId !== null) emptied.add(old.batchId);
              deadLetters += this.s.deleteScan.run(old.id).changes;
              next.push(old.id);
            }
          }
          replaced = next;
        }
        for (const readId of readIds) total.reads += this.s.deleteRead.run(readId, readId).changes;
        total.scans += delivered;
        if (deadLetters > 0) total.deadLetters = (total.deadLetters ?? 0) + deadLetters;
        this.countPruned(delivered, deadLetters, earlyAt !== undefined);
        if (scans.length === chunk) return false;
        total.batches += this.deleteEmptyBatch(batchId);
        return true;
      })
      .immediate();
  }

  /**
   * Adds what one chunk removed to the lifetime counts in the buffer (table `counters`, read by
   * `OutboxCounts.pruned`, outbox-counts.ts), in the chunk's transaction: the rows of the scans are gone, so
   * these counts are the only record that they were there. Written only when something was removed,
   * so a prune of nothing writes no page.
   */
  private countPruned(delivered: number, deadLetters: number, early: boolean): void {
    if (delivered > 0) {
      this.s.addCounter.run(PRUNED_COUNTERS.delivered, delivered);
      if (early) this.s.addCounter.run(PRUNED_COUNTERS.early, delivered);
    }
    if (deadLetters > 0) this.s.addCounter.run(PRUNED_COUNTERS.deadLetters, deadLetters);
  }

  /** Deletes the finished batches of `batchIds` that have no scans left, in one transaction; answers how many. */
  deleteEmptyBatches(batchIds: Iterable<number>): number {
    return this.db
      .transaction(() => {
        let n = 0;
        for (const batchId of batchIds) n += this.deleteEmptyBatch(batchId);
        return n;
      })
      .immediate();
  }

  private deleteEmptyBatch(batchId: number): number {
    return this.s.deleteEmptyBatch.run(batchId, batchId).changes;
  }

  /** Up to `limit` reads with `outcome` after id `afterId`, in id order: their ids and reception times. */
  readsOf(
    outcome: 'noRead' | 'duplicate',
    afterId: number,
    limit: number,
  ): { id: number; at: string }[] {
    return this.s.readsPage.all(outcome, afterId, limit) as { id: number; at: string }[];
  }

  /** Deletes these reads (never the newest read), in one transaction; answers how many. */
  deleteReads(ids: readonly number[]): number {
    return this.db
      .transaction(() => {
        let n = 0;
        for (const id of ids) n += this.s.deleteOldRead.run(id).changes;
        return n;
      })
      .immediate();
  }

  /** Deletes the content hashes of files committed before `beforeIso`; answers how many. */
  pruneFiles(beforeIso: string): number {
    return this.s.files.run(beforeIso).changes;
  }

  /** Deletes the progress of files left half-way (not updated since `beforeIso`); answers how many. */
  pruneFileProgress(beforeIso: string): number {
    return this.s.fileProgress.run(beforeIso).changes;
  }

  /** Deletes message identities committed before `beforeMs` (ms); answers how many. */
  pruneMessages(beforeMs: number): number {
    return this.s.messages.run(beforeMs).changes;
  }
}

/** Widens the span of read times of `total` to take `readAt`. */
function spanRead(total: PruneResult, readAt: string): void {
  if (total.firstReadAt === undefined || readAt < total.firstReadAt) total.firstReadAt = readAt;
  if (total.lastReadAt === undefined || readAt > total.lastReadAt) total.lastReadAt = readAt;
}
