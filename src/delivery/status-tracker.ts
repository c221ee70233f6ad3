import PQueue from 'p-queue';
import type { DeliveryConfig } from '../config/schema.js';
import { isGatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import type { BatchRow, BufferStore } from '../buffer/store.js';
import { failureFields } from '../failure-log.js';
import { backoffDelay, classifyFailure } from './retry.js';
import {
  applyStatus,
  transferredStatus,
  type StatusRef,
  type StatusSource,
} from './status-apply.js';
import type { DeliveryApi, ScanStatusLike } from './types.js';
import type { Clock } from '../clock.js';
import { LoopSleep } from '../loop.js';

export { TRANSFERRED, type StatusRef, type StatusSource } from './status-apply.js';

/** Options of {@link StatusTracker}. */
export interface StatusTrackerOptions {
  store: BufferStore;
  api: Pick<DeliveryApi, 'getScanStatus'>;
  config: DeliveryConfig;
  logger: Logger;
  now: Clock;
  random?: () => number;
  /** Most status polls in flight at once. */
  concurrency: number;
  /** A batch went back to be sent again (NotFound past the grace window): uploading should look now. */
  onResend: () => void;
  /**
   * The pace of polling now (status events): while `events` is true, events bring the
   * outcomes and each uploaded batch is polled only every `safetyPollMs` in case one never comes.
   * Without it (or false), the normal pace of `statusPollMs`.
   */
  pace?: () => PollPace;
  /**
   * The turn to write the buffer beside the batch thread (`BatchThread.writing`, write-turn.ts),
   * waited for before a poll's answer is applied, instead of SQLite's busy handler sleeping on the
   * event loop. Without it, applied at once.
   */
  otherWriter?: () => Promise<void> | undefined;
}

/** See {@link StatusTrackerOptions.pace}. */
export interface PollPace {
  events: boolean;
  safetyPollMs: number;
}

/** What the status page shows of status checks (contract §4.6). */
export interface StatusChecks {
  /** Status checks that failed in a row (any batch); reset by an answered one. */
  consecutiveFailures: number;
  lastError?: { message: string; at: string; batchId: number; code?: string };
}

/** Longest sleep of the tracker's loop, in ms: a clock moved by a test (or NTP) is noticed within it. */
const MAX_SLEEP_MS = 1000;

/**
 * Follows uploaded batches (state `uploaded`) until the service reports a terminal state
 * (contract §3, §4.6), apart from uploading: its own loop picks the batches whose poll is due and
 * runs their polls in a p-queue of bounded concurrency, so a slow status endpoint never delays an
 * upload, and a slow upload never delays a poll. Each batch is in the queue at most once.
 *
 * It only touches batches in state `uploaded` (re-read when the poll starts), and uploading only
 * touches `ready`, `presigned` and `uploading` ones, so the two never write the same batch at once.
 * Every decision is taken from the stored state, as before: a crash while a poll is in flight
 * leaves the batch `uploaded`, and polling resumes after the restart.
 */
export class StatusTracker {
  private readonly queue: PQueue;
  /** Batches queued or being polled. */
  private readonly tracked = new Set<number>();
  private running = false;
  private loop: Promise<void> | undefined;
  /** Between steps; new work ends it at once (also work that came during a step). */
  private readonly sleeps = new LoopSleep();
  private consecutiveFailures = 0;
  private lastError: StatusChecks['lastError'];
  /** The last buffer failure logged, so a full disk gives one line, not one per poll. */
  private lastStoreError: string | undefined;
  /**
   * When each uploaded batch was last polled (ms), for the safety pace while events flow. In
   * memory: after a start a batch counts from its upload, so each is polled once soon if events
   * are flowing and it is older than the safety interval (a reconciliation after a restart).
   */
  private readonly lastPolledAt = new Map<number, number>();

  constructor(private readonly options: StatusTrackerOptions) {
    this.queue = new PQueue({ concurrency: options.concurrency });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Stops picking batches, drops queued polls and waits for those in flight (bounded by the client's deadline). */
  async stop(): Promise<void> {
    this.running = false;
    this.wake();
    await this.loop;
    this.queue.clear();
    await this.queue.onIdle();
  }

  /** A batch became `uploaded`, or the clock moved: look for due polls now. */
  wake(): void {
    this.sleeps.wake();
  }

  /** Whether a poll of `batchId` is queued or in flight. */
  isTracking(batchId: number): boolean {
    return this.tracked.has(batchId);
  }

  /** How many polls are in flight and waiting. */
  load(): { polling: number; queued: number } {
    return { polling: this.queue.pending, queued: this.queue.size };
  }

  snapshot(): StatusChecks {
    return {
      consecutiveFailures: this.consecutiveFailures,
      ...(this.lastError ? { lastError: this.lastError } : {}),
    };
  }

  private async run(): Promise<void> {
    while (this.running) {
      let waitMs = MAX_SLEEP_MS;
      try {
        waitMs = this.schedule();
      } catch (err) {
        this.storeFailed(err);
      }
      await this.sleeps.sleep(Math.min(waitMs, MAX_SLEEP_MS));
    }
  }

  /** Queues every due poll not queued yet; answers the ms until the next one is due. */
  private schedule(): number {
    const now = this.options.now();
    let next = MAX_SLEEP_MS;
    const pace = this.options.pace?.();
    const uploaded = this.options.store.batches.batchesInState('uploaded');
    if (this.lastPolledAt.size > uploaded.length) {
      const ids = new Set(uploaded.map((b) => b.id));
      for (const id of this.lastPolledAt.keys()) if (!ids.has(id)) this.lastPolledAt.delete(id);
    }
    for (const batch of uploaded) {
      if (this.tracked.has(batch.id)) continue;
      let due = batch.nextAttemptAt;
      if (pace?.events && batch.mode !== 'sftp' && !this.pastGrace(batch, now)) {
        // Events bring the outcome; a poll only now and then, in case one never comes. Not for an
        // SFTP batch: its "poll" asks nobody (it ends `transferred` at once), and an event for it
        // replaces `transferred` later. Nor for a batch the service has not confirmed past the
        // grace: only a poll decides to send it again, so it is polled at the normal pace.
        const lastContact =
          this.lastPolledAt.get(batch.id) ??
          (batch.uploadedAt ? Date.parse(batch.uploadedAt) : now);
        due = Math.max(due, lastContact + pace.safetyPollMs);
      }
      if (due > now) {
        next = Math.min(next, due - now);
        continue;
      }
      this.tracked.add(batch.id);
      this.lastPolledAt.set(batch.id, now);
      void this.queue.add(async () => {
        try {
          if (this.running) await this.poll(batch.id);
        } catch (err) {
          this.storeFailed(err);
        } finally {
          this.tracked.delete(batch.id);
        }
      });
    }
    return next;
  }

  /**
   * Whether the service has not confirmed `batch` (no status yet, or `NotFound`) `notFoundGraceMs`
   * after its upload: an event will not come for a batch the service does not know (a restart of
   * the gateway between the upload and its answer, a service that lost it).
   */
  private pastGrace(batch: BatchRow, now: number): boolean {
    if (batch.upstreamState !== null && batch.upstreamState !== 'NotFound') return false;
    const uploaded = batch.uploadedAt ? Date.parse(batch.uploadedAt) : now;
    return now - uploaded > this.options.config.notFoundGraceMs;
  }

  /** A failed write of the buffer (a full disk): logged once per message; the batch is polled again later. */
  private storeFailed(err: unknown): void {
    const message = (err as Error).message;
    if (message !== this.lastStoreError)
      this.options.logger.error({ err }, 'status tracking failed on the buffer; trying again');
    this.lastStoreError = message;
  }

  private async poll(batchId: number): Promise<void> {
    const { store, api } = this.options;
    const batch = store.batches.batch(batchId);
    // Re-read: the row may have moved on since it was queued.
    if (!batch || batch.state !== 'uploaded') return;
    if (batch.mode === 'sftp') {
      // The file is on the server with its size verified: all the gateway itself can know (§4.7).
      this.apply(batch.id, transferredStatus(batch));
      return;
    }
    if (batch.requestId === null) return;
    let status: ScanStatusLike;
    try {
      status = await api.getScanStatus(batch.requestId);
    } catch (err) {
      this.pollFailed(batch, err);
      return;
    }
    this.consecutiveFailures = 0;
    this.lastStoreError = undefined;
    const writing = this.options.otherWriter?.();
    if (writing) await writing;
    // Through the one door, which reads the row again: it may have been finished meanwhile.
    this.apply(batch.id, status);
  }

  /**
   * Applies a status answer to the batch it is about ({@link applyStatus}): THE one place that
   * moves an uploaded batch to its terminal state, for a poll's answer and a status event alike.
   *
   * @returns what became of the batch; `ignored` when no uploaded batch has that id or requestId.
   */
  apply(
    ref: StatusRef,
    status: ScanStatusLike,
    source: StatusSource = 'poll',
  ): 'done' | 'resend' | 'waiting' | 'ignored' {
    return applyStatus(ref, status, source, this.options);
  }

  private pollFailed(batch: BatchRow, err: unknown): void {
    const { store, config, logger, now } = this.options;
    const action = classifyFailure(err);
    const message = (err as Error).message;
    this.consecutiveFailures++;
    this.lastError = {
      message,
      at: new Date(now()).toISOString(),
      batchId: batch.id,
      ...(isGatewayError(err) ? { code: err.code } : {}),
    };
    const delay = backoffDelay(batch.polls, {
      baseMs: config.statusPollMs,
      maxMs: config.statusPollMaxMs,
      ...(action.action === 'retry' && action.retryAfterMs !== undefined
        ? { retryAfterMs: action.retryAfterMs }
        : {}),
      ...(this.options.random ? { random: this.options.random } : {}),
    });
    const nextAttemptAt = now() + delay;
    // The first failure of a batch, then every tenth in a row: enough to see, not a line per poll.
    if (batch.polls === 0 || this.consecutiveFailures % 10 === 1) {
      logger.warn(
        {
          batchId: batch.id,
          requestId: batch.requestId,
          ...failureFields(err),
          failuresInARow: this.consecutiveFailures,
          nextAttemptAt: new Date(nextAttemptAt).toISOString(),
        },
        'status check failed; will ask again',
      );
    }
    store.batches.updateBatch(batch.id, {
      polls: batch.polls + 1,
      nextAttemptAt,
      lastError: message,
    });
  }
}
