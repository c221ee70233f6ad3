import type { DeliveryConfig } from '../config/schema.js';
import type { Logger } from '../log.js';
import type { BufferStore } from '../buffer/store.js';
import { Batcher } from './batcher.js';
import { BatchThread } from './batch-thread.js';
import { Circuit, type CircuitState } from './circuit.js';
import {
  StatusTracker,
  type PollPace,
  type StatusChecks,
  type StatusRef,
  type StatusSource,
} from './status-tracker.js';
import type { DeliveryApi, ScanStatusLike } from './types.js';
import {
  Uploader,
  type ErrorKind,
  type UploaderOptions,
  type UploaderSnapshot,
} from './uploader.js';
import type { Clock } from '../clock.js';

export type { CircuitState } from './circuit.js';
export type { ErrorKind } from './uploader.js';

/** What the health page shows of delivery. */
export interface DeliveryStatus {
  paused: boolean;
  circuit: CircuitState;
  consecutiveFailures: number;
  lastSuccessAt?: string;
  /**
   * `kind`: `token` (no token could be had: refused, unreadable, unreachable; the upload was not
   * sent), `network` (no answer), `auth` (credentials refused by the API), `answer` (unreadable),
   * `http` (an error status). `code`: the error's stable `SCANGW_E_…` code.
   */
  lastError?: { message: string; at: string; batchId?: number; kind?: ErrorKind; code?: string };
  nextRetryAt?: string;
  /**
   * Scans that may be held twice by the service: they were in an upload whose answer was lost
   * and were sent again, and the service's status of their batch is not known yet. Counted from
   * the buffer's batches, so the count survives restarts and falls back once the statuses are known.
   */
  possibleDuplicates: number;
  /** How many such batches. */
  possibleDuplicateUploads: number;
  /** Scans ever sent again after a lost answer (lifetime, never falls). */
  possibleDuplicatesTotal: number;
  /** A delivery step that failed on the buffer itself (a full disk), until a step succeeds. */
  stepError?: UploaderSnapshot['stepError'];
  /** Status checks (contract §4.6) that failed in a row, and the latest failure. */
  statusChecks: StatusChecks;
}

export interface DelivererOptions {
  store: BufferStore;
  api: DeliveryApi;
  config: DeliveryConfig;
  logger: Logger;
  now?: Clock;
  random?: () => number;
  /** A delivery step failed on a full disk (SQLITE_FULL); see `UploaderOptions.onDiskFull`. */
  onDiskFull?: (err: unknown) => void;
  /** The pace of status polling (status events); see `StatusTrackerOptions.pace`. */
  pollPace?: () => PollPace;
  /** A batch became `uploaded` (status events look again at events that came before it). */
  onUploaded?: () => void;
  /** The SFTP route; see `UploaderOptions.sftp`. */
  sftp?: UploaderOptions['sftp'];
  /**
   * Forms a backlog's batches and reads their bodies in a thread of their own (batch-thread.ts).
   * Default true for a buffer in a file; a buffer in memory has no second connection.
   */
  batchThread?: boolean;
}

/** How many status polls run at once (uploads: `delivery.uploadConcurrency`; see docs/delivery.md). */
const POLL_CONCURRENCY = 8;

/**
 * Moves scans from the outbox to the service (contract §4.3–4.8, docs/delivery.md). A composition
 * of the parts of delivery, each in its own file:
 *
 * - {@link Batcher} (`batcher.ts`): forms batches by count, age and byte size; asked by the uploader.
 * - {@link BatchThread} (`batch-thread.ts`): forms a backlog's batches and reads their bodies off
 *   the event loop, on a connection of its own.
 * - {@link Uploader} (`uploader.ts`): its own loop, up to `uploadConcurrency` uploads in flight:
 *   direct, pre-signed, retries and crash recovery.
 * - {@link Circuit} (`circuit.ts`): failures in a row, backoff, open/half-open/closed.
 * - {@link StatusTracker} (`status-tracker.ts`): its own loop, up to 8 status polls at once; the one
 *   place that moves an uploaded batch to its terminal state.
 *
 * Uploading and status tracking run beside each other; neither waits for the other.
 */
export class Deliverer {
  private readonly batcher: Batcher;
  /** The backlog's batches formed and read off the event loop; none for a buffer in memory. */
  private readonly thread: BatchThread | undefined;
  private readonly circuit: Circuit;
  private readonly uploader: Uploader;
  /** Status tracking of uploaded batches, apart from uploading. */
  private readonly tracker: StatusTracker;

  constructor(private readonly options: DelivererOptions) {
    const now = options.now ?? Date.now;
    const { store, api, config, logger } = options;
    const random = options.random ? { random: options.random } : {};
    this.thread =
      (options.batchThread ?? true) && store.path !== ':memory:'
        ? new BatchThread({ path: store.path, logger })
        : undefined;
    this.batcher = new Batcher({
      store,
      config,
      logger,
      now,
      ...(this.thread ? { thread: this.thread } : {}),
      onFormed: () => this.uploader.wake(),
    });
    this.circuit = new Circuit({ config, now, ...random });
    this.tracker = new StatusTracker({
      store,
      api,
      config,
      logger,
      now,
      ...random,
      concurrency: POLL_CONCURRENCY,
      onResend: () => this.wake(),
      otherWriter: () => this.threadWriting(),
      ...(options.pollPace ? { pace: options.pollPace } : {}),
    });
    const onUploaded = () => {
      this.tracker.wake();
      options.onUploaded?.();
    };
    this.uploader = new Uploader({
      store,
      api,
      config,
      logger,
      now,
      batcher: this.batcher,
      ...(this.thread ? { thread: this.thread } : {}),
      circuit: this.circuit,
      onUploaded,
      ...(options.onDiskFull ? { onDiskFull: options.onDiskFull } : {}),
      ...(options.sftp ? { sftp: options.sftp } : {}),
    });
  }

  start(): void {
    this.uploader.start();
    this.tracker.start();
  }

  /**
   * Stops after the uploads in flight (finished or left to crash recovery) and the status polls
   * in flight; queued polls are dropped (their batches stay `uploaded` and are polled after a start).
   */
  async stop(): Promise<void> {
    await Promise.all([this.uploader.stop(), this.tracker.stop()]);
    await this.thread?.close();
  }

  /** New scans were committed, or the clock moved: form or send a batch, and poll, if one is due. */
  wake(): void {
    this.uploader.wake();
    this.tracker.wake();
  }

  /**
   * Settles when the batch thread's writes in flight end; undefined when it writes nothing now
   * (`BatchThread.writing`): intake waits for it before its group commit.
   */
  threadWriting(): Promise<void> | undefined {
    return this.thread?.writing();
  }

  /** Status polls in flight and waiting (for the status page and tests). */
  statusLoad(): { polling: number; queued: number } {
    return this.tracker.load();
  }

  /**
   * A status answer for an uploaded batch, named by id or requestId (a status event, say): applied
   * by the status tracker, the one place that moves a batch to its terminal state. See
   * {@link StatusTracker.apply}.
   */
  applyStatus(
    ref: StatusRef,
    status: ScanStatusLike,
    source: StatusSource = 'poll',
  ): ReturnType<StatusTracker['apply']> {
    return this.tracker.apply(ref, status, source);
  }

  pause(paused: boolean): void {
    this.uploader.pause(paused);
    this.tracker.wake();
  }

  snapshot(): DeliveryStatus {
    const { stepError, ...upload } = this.uploader.snapshot();
    const dup = this.options.store.reports.possibleDuplicates();
    return {
      ...upload,
      ...this.circuit.snapshot(),
      possibleDuplicates: dup.scans,
      possibleDuplicateUploads: dup.uploads,
      possibleDuplicatesTotal: dup.totalScans,
      statusChecks: this.tracker.snapshot(),
      ...(stepError ? { stepError } : {}),
    };
  }
}
