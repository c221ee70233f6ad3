import type { Logger } from '../log.js';
import type { BufferStore } from './store.js';
import type { PruneResult } from './pruning.js';
import { isDiskFull } from '../errors.js';
import type { Clock } from '../clock.js';

export type { PruneResult } from './pruning.js';

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
  async pruneOldestDelivered(
    maxScans: number,
    finishedBeforeIso = new Date(this.now()).toISOString(),
    earlyAt?: string,
  ): Promise<PruneResult> {
    const pruning = this.options.store.pruning;
    const total: PruneResult = { scans: 0, reads: 0, batches: 0, files: 0 };
    const emptied = new Set<number>();
    let after = 0;
    while (total.scans < maxScans) {
      const batchId = pruning.oldestDeliveredBatchAfter(after, finishedBeforeIso);
      if (batchId === undefined) break;
      after = batchId;
      // A chunk that took its last scans exactly does not see the batch empty: deleted at the end.
      emptied.add(batchId);
      for (;;) {
        // The chunk no larger than what is still wanted: early pruning takes only the shortfall.
        const chunk = Math.max(1, Math.min(this.chunk, maxScans - total.scans));
        const done = pruning.pruneBatchChunk(batchId, chunk, total, emptied, undefined, earlyAt);
        await yieldToEventLoop();
        if (done || total.scans >= maxScans) break;
      }
    }
    total.batches += pruning.deleteEmptyBatches(emptied);
    return total;
  }

  /** The audit period in force, in days. */
  get retentionDays(): number {
    return this.options.retentionDays;
  }

  /**
   * Changes the audit period (a reload of `buffer.retentionDays`) and prunes with it now, in the
   * background, so that a lower period frees its room without a restart.
   */
  setRetentionDays(days: number): void {
    if (days === this.options.retentionDays) return;
    this.options.retentionDays = days;
    void this.prune().catch((err: unknown) => {
      this.options.logger[isDiskFull(err) ? 'warn' : 'error'](
        { err },
        'pruning delivered scans failed; will try again',
      );
    });
  }

  /**
   * By hand (`scan-gateway buffer prune --before DATE`): deletes the delivered scans read before
   * `beforeIso`, of finished batches, with their reads and emptied batches; undelivered scans are
   * never touched. A batch is pruned only of its scans read before the date. With `earlyAt`, the
   * references of the scans removed are remembered under it (for `trace`).
   */
  async pruneDeliveredReadBefore(beforeIso: string, earlyAt?: string): Promise<PruneResult> {
    const pruning = this.options.store.pruning;
    const total: PruneResult = { scans: 0, reads: 0, batches: 0, files: 0 };
    const emptied = new Set<number>();
    for (const batchId of pruning.batchesWithDeliveredReadBefore(beforeIso)) {
      for (;;) {
        const done = pruning.pruneBatchChunk(
          batchId,
          this.chunk,
          total,
          emptied,
          beforeIso,
          earlyAt,
        );
        await yieldToEventLoop();
        if (done) break;
      }
    }
    total.batches += pruning.deleteEmptyBatches(emptied);
    return total;
  }

  private async pruneAll(): Promise<PruneResult> {
    const { store, logger, retentionDays } = this.options;
    const pruning = store.pruning;
    const cutoffMs = this.now() - retentionDays * DAY_MS;
    const cutoffIso = new Date(cutoffMs).toISOString();
    const total: PruneResult = { scans: 0, reads: 0, batches: 0, files: 0 };

    const batchIds = pruning.finishedBefore(cutoffIso);
    // Batches of replayed dead letters, emptied while pruning later batches.
    const emptied = new Set<number>();
    for (const batchId of batchIds) {
      for (;;) {
        const done = pruning.pruneBatchChunk(batchId, this.chunk, total, emptied);
        await yieldToEventLoop();
        if (done) break;
      }
    }
    total.batches += pruning.deleteEmptyBatches(emptied);

    for (const outcome of ['noRead', 'duplicate'] as const) {
      let after = 0;
      for (;;) {
        const rows = pruning.readsOf(outcome, after, this.chunk);
        if (rows.length === 0) break;
        const old = rows.filter((r) => r.at < cutoffIso);
        total.reads += pruning.deleteReads(old.map((r) => r.id));
        after = rows[rows.length - 1]!.id;
        // Reads come in time order (near enough): once a chunk holds a recent one, the rest are recent.
        if (old.length < rows.length) break;
        await yieldToEventLoop();
      }
    }

    total.files = pruning.pruneFiles(cutoffIso);
    // The record of early prunes lasts as long as the audit it stands for would have.
    pruning.early.forget(cutoffIso);
    // How each container ended is kept as long as its members' reads; open ones are never pruned.
    store.containers.forgetClosed(cutoffIso);
    // MQTT message identities (a packet id's row is replaced by its next message anyway): what is
    // older than the audit period belongs to an input removed since, or to a session long gone.
    const messages = pruning.pruneMessages(cutoffMs);
    if (messages > 0)
      logger.info(
        { messages, before: cutoffIso },
        'pruned MQTT message identities past the audit period',
      );
    // Progress of files left half-way (removed from the inbox before their last chunk).
    total.files += pruning.pruneFileProgress(cutoffIso);
    this.lastRun = { at: new Date(this.now()).toISOString(), result: total };
    if (total.scans + total.reads + total.batches + total.files > 0) {
      logger.info(
        { ...total, retentionDays, before: cutoffIso },
        'pruned delivered scans past the audit period',
      );
    }
    return total;
  }
}

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
