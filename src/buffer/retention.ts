import type { Logger } from '../log.js';
import { connectionOf } from './connection.js';
import type { BufferStore } from './store.js';
import { isDiskFull } from '../errors.js';
import type { Clock } from '../clock.js';

/** What one prune removed. */
export interface PruneResult {
  /** Delivered scans (and the replayed dead letters they replaced). */
  scans: number;
  /** Reads left without any scan, and no-reads and duplicate reads. */
  reads: number;
  /** Finished batches left without any scan. */
  batches: number;
  /** File hashes (duplicate-file detection) older than the audit period. */
  files: number;
}

export interface RetentionOptions {
  store: BufferStore;
  /** Audit period: delivered scans are kept this many days after their batch finished. */
  retentionDays: number;
  logger: Logger;
  /** How often the prune runs, in ms. Default one hour. */
  intervalMs?: number;
  now?: Clock;
  /** Most rows one transaction deletes, so intake never waits long for the write lock. Default 2000. */
  chunk?: number;
}

const DAY_MS = 24 * 3600_000;

/**
 * The audit-period job: delivered scans stay with their batch (requestId, upstream state) for
 * `retentionDays` after the batch finished, then they, their reads and the emptied batches are
 * deleted. Undelivered data is never deleted: pending and batched scans, failed and held scans
 * (dead letters) that were not replayed, and rejected reads all stay. A dead letter that was
 * replayed goes together with the scan that replaced it, once that one is delivered and old enough.
 * No-reads and duplicate reads (never data to deliver) go after the same period.
 *
 * Deletes run in small transactions with a yield in between, so intake commits are not held up.
 */
export class Retention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<PruneResult> | undefined;
  private readonly now: Clock;
  private readonly chunk: number;
  lastRun: { at: string; result: PruneResult } | undefined;

  constructor(private readonly options: RetentionOptions) {
    this.now = options.now ?? Date.now;
    this.chunk = options.chunk ?? 2000;
  }

  /** Prunes once now (in the background) and then every `intervalMs`. */
  start(): void {
    const every = this.options.intervalMs ?? 3600_000;
    const tick = () => {
      void this.prune().catch((err: unknown) => {
        // A full disk also blocks deletes in WAL mode until room returns; the next run tries again.
        const level = isDiskFull(err) ? 'warn' : 'error';
        this.options.logger[level]({ err }, 'pruning delivered scans failed; will try again');
      });
    };
    this.timer = setInterval(tick, every);
    this.timer.unref();
    setImmediate(tick);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running?.catch(() => undefined);
  }

  /** Runs one prune (joins the one in progress). */
  prune(): Promise<PruneResult> {
    this.running ??= this.pruneAll().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /**
   * Under disk pressure (src/buffer/disk-guard.ts): prunes about `maxScans` delivered scans of the
   * oldest finished batches, whatever their age, with their reads and emptied batches, the same
   * way as {@link prune}. Undelivered scans are never touched. Joins no running prune: the two
   * delete disjoint or already-deleted rows, each in its own small transactions.
   */
  async pruneOldestDelivered(maxScans: number): Promise<PruneResult> {
    const db = connectionOf(this.options.store);
    const total: PruneResult = { scans: 0, reads: 0, batches: 0, files: 0 };
    const emptied = new Set<number>();
    let after = 0;
    while (total.scans < maxScans) {
      const batchId = db
        .prepare(`SELECT id FROM batches WHERE state = 'done' AND id > ? AND EXISTS (SELECT 1 FROM scan_rows WHERE batch_id = batches.id AND state IN ('delivered', 'batched')) ORDER BY id LIMIT 1`)
        .pluck()
        .get(after) as number | undefined;
      if (batchId === undefined) break;
      after = batchId;
      for (;;) {
        const done = db.transaction(() => this.pruneBatchChunk(batchId, total, emptied)).immediate();
        await yieldToEventLoop();
        if (done || total.scans >= maxScans) break;
      }
    }
    db.transaction(() => {
      for (const batchId of emptied) total.batches += this.deleteEmptyBatch(batchId);
    }).immediate();
    return total;
  }

  private async pruneAll(): Promise<PruneResult> {
    const { store, logger, retentionDays } = this.options;
    const cutoffMs = this.now() - retentionDays * DAY_MS;
    const cutoffIso = new Date(cutoffMs).toISOString();
    const total: PruneResult = { scans: 0, reads: 0, batches: 0, files: 0 };
    const db = connectionOf(store);

    const batchIds = db
      .prepare(`SELECT id FROM batches WHERE state = 'done' AND finished_at < ? ORDER BY id`)
      .pluck()
      .all(cutoffIso) as number[];
    // Batches of replayed dead letters, emptied while pruning later batches.
    const emptied = new Set<number>();
    for (const batchId of batchIds) {
      for (;;) {
        const done = db.transaction(() => this.pruneBatchChunk(batchId, total, emptied)).immediate();
        await yieldToEventLoop();
        if (done) break;
      }
    }
    db.transaction(() => {
      for (const batchId of emptied) total.batches += this.deleteEmptyBatch(batchId);
    }).immediate();

    for (const outcome of ['noRead', 'duplicate'] as const) {
      let after = 0;
      for (;;) {
        const rows = db
          .prepare(`SELECT id, received_at AS at FROM reads WHERE outcome = ? AND id > ? ORDER BY id LIMIT ?`)
          .all(outcome, after, this.chunk) as { id: number; at: string }[];
        if (rows.length === 0) break;
        const old = rows.filter((r) => r.at < cutoffIso);
        db.transaction(() => {
          const del = db.prepare(`DELETE FROM reads WHERE id = ? AND ${NOT_NEWEST('reads')}`);
          for (const r of old) total.reads += del.run(r.id).changes;
        }).immediate();
        after = rows[rows.length - 1]!.id;
        // Reads come in time order (near enough): once a chunk holds a recent one, the rest are recent.
        if (old.length < rows.length) break;
        await yieldToEventLoop();
      }
    }

    total.files = db.prepare(`DELETE FROM files WHERE committed_at < ?`).run(cutoffIso).changes;
    // MQTT message identities (a packet id's row is replaced by its next message anyway): what is
    // older than the audit period belongs to an input removed since, or to a session long gone.
    const messages = store.pruneMessages(cutoffMs);
    if (messages > 0) logger.info({ messages, before: cutoffIso }, 'pruned MQTT message identities past the audit period');
    // Progress of files left half-way (removed from the inbox before their last chunk).
    total.files += db.prepare(`DELETE FROM file_progress WHERE updated_at < ?`).run(cutoffIso).changes;
    this.lastRun = { at: new Date(this.now()).toISOString(), result: total };
    if (total.scans + total.reads + total.batches + total.files > 0) {
      logger.info({ ...total, retentionDays, before: cutoffIso }, 'pruned delivered scans past the audit period');
    }
    return total;
  }

  /**
   * Deletes up to `chunk` delivered scans of one finished batch (the callers pick only `done`
   * batches); answers true when the batch has none left.
   */
  private pruneBatchChunk(batchId: number, total: PruneResult, emptied: Set<number>): boolean {
    const db = connectionOf(this.options.store);
    // In a done batch a `batched` row is delivered (migration 13); the delete triggers count it so.
    const scans = db
      .prepare(`SELECT id, read_id AS readId FROM scan_rows WHERE batch_id = ? AND state IN ('delivered', 'batched') LIMIT ?`)
      .all(batchId, this.chunk) as { id: number; readId: number }[];
    const readIds = new Set<number>();
    const delScan = db.prepare(`DELETE FROM scan_rows WHERE id = ? AND ${NOT_NEWEST('scan_rows')}`);
    let replaced = scans.map((s) => s.id);
    for (const s of scans) {
      readIds.add(s.readId);
      total.scans += delScan.run(s.id).changes;
    }
    // The dead letters these scans replaced (replay), and theirs in turn.
    const findReplaced = db.prepare(`SELECT id, read_id AS readId, batch_id AS batchId FROM scan_rows WHERE replayed_by = ?`);
    for (let depth = 0; replaced.length > 0 && depth < 16; depth++) {
      const next: number[] = [];
      for (const id of replaced) {
        for (const old of findReplaced.all(id) as { id: number; readId: number; batchId: number | null }[]) {
          readIds.add(old.readId);
          if (old.batchId !== null) emptied.add(old.batchId);
          total.scans += delScan.run(old.id).changes;
          next.push(old.id);
        }
      }
      replaced = next;
    }
    const delRead = db.prepare(`DELETE FROM reads WHERE id = ? AND NOT EXISTS (SELECT 1 FROM scan_rows WHERE read_id = ?) AND ${NOT_NEWEST('reads')}`);
    for (const readId of readIds) total.reads += delRead.run(readId, readId).changes;
    if (scans.length === this.chunk) return false;
    total.batches += this.deleteEmptyBatch(batchId);
    return true;
  }

  /** Deletes a finished batch that has no scans left; answers 1 when it did. */
  private deleteEmptyBatch(batchId: number): number {
    return connectionOf(this.options.store)
      .prepare(`DELETE FROM batches WHERE id = ? AND state = 'done' AND NOT EXISTS (SELECT 1 FROM scan_rows WHERE batch_id = ?) AND ${NOT_NEWEST('batches')}`)
      .run(batchId, batchId).changes;
  }
}

/**
 * The newest row of a table is never pruned: ids are `INTEGER PRIMARY KEY` (max + 1, no
 * AUTOINCREMENT), so a buffer pruned empty would hand out batch 1 again, and logs, `replay
 * --batch N` and the audit trail would name two batches alike.
 */
const NOT_NEWEST = (table: 'batches' | 'scan_rows' | 'reads'): string => `id < (SELECT max(id) FROM ${table})`;

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
