import PQueue from 'p-queue';
import type { DeliveryConfig } from '../config/schema.js';
import { httpStatusOf, isDiskFull, isGatewayError, type GatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import type { BatchRow, BufferStore } from '../buffer/store.js';
import { failureFields } from '../failure-log.js';
import type { Batcher } from './batcher.js';
import type { Circuit } from './circuit.js';
import { classifyFailure } from './retry.js';
import type { DeliveryApi } from './types.js';
import type { SftpConnector } from '../upstream/sftp-client.js';
import { transferBatch } from './sftp-transfer.js';
import type { Clock } from '../clock.js';
import { LoopSleep } from '../loop.js';
import { PresignedRoute, type PresignedOutcome, type PresignedStep } from './presigned-route.js';
import { errorKind, isUnreadableAcceptance, SFTP_HOLDS, type ErrorKind } from './upload-errors.js';

export type { ErrorKind } from './upload-errors.js';

/** What the status page shows of uploading. */
export interface UploaderSnapshot {
  paused: boolean;
  lastSuccessAt?: string;
  /**
   * `kind`: `token` (no token could be had: refused, unreadable, unreachable; the upload was not
   * sent), `network` (no answer), `auth` (credentials refused by the API), `answer` (unreadable),
   * `http` (an error status), `sftp` (an SFTP transfer failed: host key, login, permission, disk).
   * `code`: the error's stable `SCANGW_E_…` code.
   */
  lastError?: { message: string; at: string; batchId?: number; kind?: ErrorKind; code?: string };
  /** A delivery step that failed on the buffer itself (a full disk), until a step succeeds. */
  stepError?: { message: string; at: string; diskFull: boolean };
}

/** Options of {@link Uploader}. */
export interface UploaderOptions {
  store: BufferStore;
  api: Pick<
    DeliveryApi,
    | 'uploadScans'
    | 'requestPresignedUpload'
    | 'putPresigned'
    | 'putPresignedStream'
    | 'getScanStatus'
  >;
  config: DeliveryConfig;
  logger: Logger;
  now: Clock;
  /** Forms the next batch when none is open. */
  batcher: Batcher;
  /** Counts failures in a row and draws the backoff. */
  circuit: Circuit;
  /** A batch became `uploaded` (or waits for its status): status tracking should look now. */
  onUploaded: () => void;
  /** A step failed on a full disk (SQLITE_FULL): the disk guard releases its reserve and prunes. */
  onDiskFull?: (err: unknown) => void;
  /** The SFTP route: how to reach the server and name the files. Needed by `sftp` batches. */
  sftp?: { connector: SftpConnector; siteId: string; fileNameTemplate: string };
}

/** How long the loop waits after a step failed on the buffer itself (a full disk), in real ms. */
const STEP_RETRY_MS = 1000;

/**
 * Uploads batches (contract §4.3–4.5) from its own loop: asks the {@link Batcher} for a batch when
 * none is waiting, sends due ones direct or pre-signed, up to `uploadConcurrency` at once (a
 * p-queue), retries with the {@link Circuit}'s backoff, and recovers what a crash left in flight.
 * Every decision is taken from the batch's state in the buffer, so a restart (or a crash at any
 * point) resumes where it stopped:
 *
 * - `uploading` (a direct POST was in flight): sent again and counted as a possible duplicate.
 * - `presigned` without a PUT started: the PUT is made (same address while valid, else a new one).
 * - `presigned` with a PUT started (`put_started_at`): the status endpoint is asked first. A known
 *   requestId is not sent again; an unknown one is PUT again at once to the same single-use
 *   address while it is valid (contract §4.4, §8: a second PUT cannot double), so a lost answer
 *   costs a backoff step. Only when a new address is needed (expired, or refused because the first
 *   PUT took it) is `notFoundGraceMs` from the PUT waited out first (presigned-route.ts).
 * - `uploading` of an SFTP batch (its `.part` was being written): back to `ready`; the transfer
 *   asks the server first (sftp-transfer.ts), so nothing is counted as a possible duplicate.
 *
 * It only writes batches in states `ready`, `presigned` and `uploading` (and moves them to
 * `uploaded` or `held`); `uploaded` ones belong to the status tracker.
 *
 * Concurrency: each upload in flight is one batch's own state machine, as above; they
 * share nothing but the circuit and the token. Each batch is in flight at most once (`inFlight`),
 * and crash recovery skips the ones in flight. The next batch is formed while uploads are in
 * flight, one ahead of the free slots, so a finished upload's slot is filled at once. A failure
 * changes its own batch only: the uploads already in flight finish and record their own outcome
 * (the service has them or not, whatever the others met). After a failure, one upload at a time
 * is started (and none is formed ahead) until one succeeds; while the circuit is open, none. SFTP
 * batches go one at a time (one session to the server). {@link stop} waits for every upload in
 * flight.
 */
export class Uploader {
  private running = false;
  private loop: Promise<void> | undefined;
  /** Between steps; new work ends it at once (also work that came during a step). */
  private readonly sleeps = new LoopSleep();
  /** Batches whose upload is in flight (each at most once). */
  private readonly inFlight = new Set<number>();
  /** Whether an SFTP batch is in flight: SFTP batches go one at a time. */
  private sftpInFlight = false;
  /** Runs the uploads in flight; never holds more than it runs (a batch is added when a slot is free). */
  private readonly queue: PQueue;
  /** After a step failed on the buffer, no new work before this (performance.now(), real ms). */
  private holdOffUntil = 0;
  private stepError: UploaderSnapshot['stepError'];
  private paused = false;
  private status: Pick<UploaderSnapshot, 'lastSuccessAt' | 'lastError'> = {};
  /** Sends `presigned` batches (presigned-route.ts). */
  private readonly presigned: PresignedRoute;

  constructor(private readonly options: UploaderOptions) {
    this.queue = new PQueue({ concurrency: Math.max(1, options.config.uploadConcurrency) });
    this.presigned = new PresignedRoute(options);
  }

  /** Sends again what a crash left `uploading`, then starts the loop. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.recoverDirect();
    this.loop = this.run();
  }

  /** Stops after the uploads in flight (each finished or left to crash recovery); starts no new one. */
  async stop(): Promise<void> {
    this.running = false;
    this.wake();
    await this.loop;
    await this.queue.onIdle();
  }

  /** New scans were committed, a batch went back to be sent, or the clock moved: look now. */
  wake(): void {
    this.sleeps.wake();
  }

  pause(paused: boolean): void {
    this.paused = paused;
    this.wake();
  }

  snapshot(): UploaderSnapshot {
    return {
      ...this.status,
      paused: this.paused,
      ...(this.stepError ? { stepError: this.stepError } : {}),
    };
  }

  /**
   * A batch left `uploading` by a crash (or by a failed write of the answer) had its POST in flight:
   * the service may or may not have it. It is sent again and counted as a possible duplicate, in
   * one transaction.
   */
  private recoverDirect(): void {
    const { store, logger } = this.options;
    for (const b of store.batches.batchesInState('uploading')) {
      if (this.inFlight.has(b.id)) continue;
      if (b.mode === 'sftp') {
        // The server decides what happened to an SFTP transfer (sftp-transfer.ts): never a duplicate.
        store.batches.updateBatch(b.id, { state: 'ready', nextAttemptAt: 0 });
        logger.info(
          { batchId: b.id, remotePath: b.remotePath },
          'SFTP transfer was in flight; the server decides whether it had finished',
        );
        continue;
      }
      store.batches.updateBatch(
        b.id,
        { state: 'ready', nextAttemptAt: 0 },
        { possibleDuplicate: true },
      );
      logger.warn(
        { batchId: b.id, scans: b.scanCount },
        'direct upload was in flight and its answer was not recorded; sending again (possible duplicate)',
      );
    }
  }

  private async run(): Promise<void> {
    while (this.running) {
      let waitMs: number;
      const holdOff = this.holdOffUntil - performance.now();
      if (holdOff > 0) {
        waitMs = holdOff;
      } else {
        try {
          waitMs = this.step();
          this.stepError = undefined;
        } catch (err) {
          this.stepFailed(err);
          waitMs = STEP_RETRY_MS;
        }
      }
      if (!this.running) break;
      await this.sleeps.sleep(Math.min(waitMs, 1000));
    }
  }

  /** A step failed on the buffer itself (a full disk): the stored state is unchanged; retried after a second. */
  private stepFailed(err: unknown): void {
    const message = (err as Error).message;
    if (this.stepError?.message !== message)
      this.options.logger.error({ err }, 'delivery step failed; retrying every second');
    this.stepError = {
      message,
      at: new Date(this.options.now()).toISOString(),
      diskFull: isDiskFull(err),
    };
    if (this.stepError.diskFull) this.options.onDiskFull?.(err);
  }

  /**
   * How many uploads may be in flight now: none while the circuit is open (waiting out its
   * backoff), one after a failure until an upload succeeds (the half-open probe, and a service
   * that just failed is not sent `uploadConcurrency` batches at once), else `uploadConcurrency`.
   */
  private slots(): number {
    const circuit = this.options.circuit.snapshot();
    if (circuit.circuit === 'open') return 0;
    if (circuit.consecutiveFailures > 0) return 1;
    return Math.max(1, this.options.config.uploadConcurrency);
  }

  /**
   * One pass of uploading: starts the due batches while slots are free, forms a new batch when
   * none waits (one ahead of the free slots). Answers ms to wait; a finished upload wakes the loop.
   * Neither uploads nor status polls are awaited here.
   */
  private step(): number {
    const { store, now } = this.options;
    this.recoverDirect();
    let wait = 1000;
    if (this.paused || !this.running) return wait;
    const slots = this.slots();
    const waiting = store.batches
      .batchesInState('ready', 'presigned')
      .filter((b) => !this.inFlight.has(b.id));
    const left: BatchRow[] = [];
    for (const b of waiting) {
      const startable = this.inFlight.size < slots && !(b.mode === 'sftp' && this.sftpInFlight);
      if (startable && b.nextAttemptAt <= now()) this.begin(b);
      else left.push(b);
    }
    if (slots === 0) {
      const retryAt = this.options.circuit.snapshot().nextRetryAt;
      return retryAt ? Math.max(0, Date.parse(retryAt) - now()) : wait;
    }
    const full = this.inFlight.size >= slots;
    // Batches that could start once due (not blocked by a full set of slots or an SFTP transfer).
    const next = left
      .filter((b) => !full && !(b.mode === 'sftp' && this.sftpInFlight))
      .map((b) => b.nextAttemptAt - now());
    if (next.length > 0) wait = Math.max(0, Math.min(...next));
    // One batch formed ahead of the free slots while uploads flow (never after a failure, and not
    // at uploadConcurrency 1, which keeps the one-batch-open behaviour of before).
    const ahead = slots > 1 ? 1 : 0;
    if (left.length === 0 && this.inFlight.size < slots + ahead) {
      const formed = this.options.batcher.formIfDue();
      if (formed !== undefined) wait = Math.min(wait, formed);
    }
    return wait;
  }

  /** Starts the upload of `batch` in the queue (a slot is free); the loop is woken when it ends. */
  private begin(batch: BatchRow): void {
    this.inFlight.add(batch.id);
    if (batch.mode === 'sftp') this.sftpInFlight = true;
    void this.queue.add(async () => {
      try {
        await this.upload(batch);
        this.stepError = undefined;
      } catch (err) {
        // Not an upstream answer (a failed write to the buffer, a full disk): the stored state says
        // what happened; the next pass (recoverDirect) takes it from there, after a second.
        this.stepFailed(err);
        this.holdOffUntil = performance.now() + STEP_RETRY_MS;
      } finally {
        this.inFlight.delete(batch.id);
        if (batch.mode === 'sftp') this.sftpInFlight = false;
        this.wake();
      }
    });
  }

  private async upload(batch: BatchRow): Promise<void> {
    const { store, api, logger, config } = this.options;
    const presignedStep: PresignedStep = { current: undefined };
    try {
      if (batch.mode === 'sftp') {
        await this.uploadSftp(batch);
        return;
      }
      let outcome: PresignedOutcome;
      if (batch.mode === 'direct') {
        // A direct body is at most 5.8 MiB (MAX_DIRECT_BODY_BYTES): built whole, by SQLite, as
        // bytes outside V8's heap (batchBodyBytes).
        const body = store.batches.batchBodyBytes(batch.id);
        store.batches.updateBatch(batch.id, { state: 'uploading', attempts: batch.attempts + 1 });
        outcome = { requestId: (await api.uploadScans(body)).requestId };
      } else {
        outcome = await this.presigned.uploadPresigned(batch, presignedStep);
      }
      this.options.circuit.succeeded();
      if ('waitForStatus' in outcome) {
        this.options.onUploaded();
        return;
      }
      const uploadedAt = outcome.uploadedAt ?? this.options.now();
      const at = new Date(uploadedAt).toISOString();
      try {
        store.batches.updateBatch(batch.id, {
          state: 'uploaded',
          requestId: outcome.requestId,
          uploadedAt: at,
          nextAttemptAt: this.options.now() + config.statusPollMs,
          lastError: null,
        });
      } catch (err) {
        // The service has the batch but the buffer cannot say so (a full disk at this moment). A
        // direct batch stays `uploading`: recoverDirect sends it again once the disk has room and
        // counts it as a possible duplicate (at-least-once). Logged here with the requestId the
        // service gave, the only place it is known, so the duplicate can be traced upstream.
        logger.error(
          {
            err,
            batchId: batch.id,
            requestId: outcome.requestId,
            mode: batch.mode,
            scans: batch.scanCount,
            diskFull: isDiskFull(err),
          },
          batch.mode === 'direct'
            ? 'the service accepted the batch but its answer could not be recorded; it will be sent again (possible duplicate)'
            : 'the pre-signed upload was sent but could not be recorded; its status is asked before anything is sent again',
        );
        throw err;
      }
      this.status = { ...this.status, lastSuccessAt: at };
      this.options.onUploaded();
      logger.info(
        {
          batchId: batch.id,
          requestId: outcome.requestId,
          mode: batch.mode,
          scans: batch.scanCount,
          bytes: batch.bytes,
        },
        'batch uploaded',
      );
    } catch (err) {
      // Not an upstream answer (a failed write to the buffer, a full disk): the stored state says
      // what happened; the loop logs it and the next pass (recoverDirect) takes it from there.
      if (!isGatewayError(err)) throw err;
      this.uploadFailed(batch, err, presignedStep.current);
    }
  }

  /**
   * Sends an SFTP batch by the crash-safe transfer (sftp-transfer.ts). The batch is `uploading`
   * while its `.part` file is written; once the file is renamed and its size verified (or found
   * complete after a crash), it is `uploaded` and the status tracker ends it in `transferred`.
   */
  private async uploadSftp(batch: BatchRow): Promise<void> {
    const { store, logger } = this.options;
    const sftp = this.options.sftp;
    if (!sftp) {
      store.batches.holdBatch(
        batch.id,
        'an SFTP batch, but upstream.sftp is not configured; configure it, then replay the batch',
      );
      logger.error({ batchId: batch.id }, 'SFTP batch held: upstream.sftp is not configured');
      return;
    }
    const result = await transferBatch(batch, {
      store,
      connector: sftp.connector,
      logger,
      siteId: sftp.siteId,
      fileNameTemplate: sftp.fileNameTemplate,
      onWriting: () =>
        store.batches.updateBatch(batch.id, {
          state: 'uploading',
          attempts: (store.batches.batch(batch.id)?.attempts ?? batch.attempts) + 1,
        }),
    });
    this.options.circuit.succeeded();
    const at = new Date(this.options.now()).toISOString();
    store.batches.updateBatch(batch.id, {
      state: 'uploaded',
      uploadedAt: at,
      nextAttemptAt: 0,
      lastError: null,
    });
    this.status = { ...this.status, lastSuccessAt: at };
    this.options.onUploaded();
    logger.info(
      {
        batchId: batch.id,
        remotePath: result.remotePath,
        sha256: result.sha256,
        scans: batch.scanCount,
        bytes: batch.bytes,
        outcome: result.outcome,
      },
      'batch transferred by SFTP',
    );
  }

  /** An SFTP transfer failed: held (permission, conflict) or back to `ready` with backoff. */
  private sftpFailed(batch: BatchRow, err: GatewayError): void {
    const { store, logger } = this.options;
    if (SFTP_HOLDS.includes(err.code)) {
      store.batches.holdBatch(batch.id, err.message);
      logger.error(
        { batchId: batch.id, ...failureFields(err) },
        'SFTP server refused the batch file; batch held with the reason (see failures, replay)',
      );
      return;
    }
    const delay = this.options.circuit.failed();
    const nextAttemptAt = this.options.now() + delay;
    // `ready` again: the next attempt asks the server first, whatever this one left there.
    store.batches.updateBatch(batch.id, { state: 'ready', nextAttemptAt, lastError: err.message });
    this.options.circuit.retryAt(nextAttemptAt);
    logger.warn(
      {
        batchId: batch.id,
        ...failureFields(err),
        retryInMs: delay,
        nextAttemptAt: new Date(nextAttemptAt).toISOString(),
      },
      'SFTP transfer failed; will retry',
    );
  }

  private uploadFailed(
    batch: BatchRow,
    err: GatewayError,
    presignedStep: PresignedStep['current'],
  ): void {
    const { store, logger, config } = this.options;
    const action = classifyFailure(err);
    const message = (err as Error).message;
    const at = new Date(this.options.now()).toISOString();
    const code = isGatewayError(err) ? err.code : undefined;
    this.status = {
      ...this.status,
      lastError: {
        message,
        at,
        batchId: batch.id,
        kind: errorKind(err),
        ...(code ? { code } : {}),
      },
    };
    if (batch.mode === 'sftp') {
      this.sftpFailed(batch, err);
      return;
    }
    if (action.action === 'split') {
      // A split drops the address: its halves go under new requestIds. After a second PUT the
      // earlier one may have arrived under the old requestId, so that resend is counted.
      if (presignedStep === 'reput' && batch.scanCount > 1)
        store.batches.updateBatch(batch.id, {}, { possibleDuplicate: true });
      const split = store.batches.splitBatch(batch.id);
      logger.warn({ batchId: batch.id, split }, 'batch refused as too large; split in two');
      if (!split)
        store.batches.holdBatch(
          batch.id,
          `the service refused a single scan as too large: ${message}`,
        );
      return;
    }
    if (action.action === 'newAddress' && presignedStep === 'reput') {
      // §4.4, §8: an address takes one upload. Refused now, it took an earlier one: follow its
      // status; only after `notFoundGraceMs` of NotFound is the batch sent again, under a new
      // address (counted as a possible duplicate).
      const now = this.options.now();
      store.batches.updateBatch(batch.id, {
        state: 'uploaded',
        presignedUrl: null,
        presignedExpiresAt: null,
        putStartedAt: now,
        uploadedAt: new Date(now).toISOString(),
        nextAttemptAt: now + config.statusPollMs,
        lastError: message,
      });
      logger.warn(
        { batchId: batch.id, requestId: batch.requestId },
        'the single-use address was used already, so the earlier upload had arrived; following its status',
      );
      return;
    }
    if (action.action === 'hold') {
      store.batches.holdBatch(batch.id, message);
      logger.error(
        { batchId: batch.id, ...failureFields(err) },
        'batch refused by the service; held with the answer (see failures, replay)',
      );
      return;
    }
    if (batch.mode === 'direct' && isUnreadableAcceptance(err)) {
      // Sending again would duplicate a batch the service most likely has, on every retry.
      store.batches.holdBatch(
        batch.id,
        `the service accepted the upload but its answer could not be read (${message}); not sent again, to avoid duplicates`,
      );
      logger.error(
        { batchId: batch.id, ...failureFields(err) },
        'upload accepted with an answer that cannot be read; batch held, not sent again (see failures, replay)',
      );
      return;
    }
    // A refused address waits like any other failure: asked for again at once, every time, it
    // would use up an address (and a requestId at the service) per loop.
    const retryAfterMs = action.action === 'retry' ? action.retryAfterMs : undefined;
    const answerLost = action.action === 'retry' && action.answerLost;
    const delay = this.options.circuit.failed(retryAfterMs);
    const nextAttemptAt = this.options.now() + delay;
    const current = store.batches.batch(batch.id) ?? batch;
    if (action.action === 'newAddress') {
      store.batches.updateBatch(batch.id, {
        state: 'ready',
        requestId: null,
        presignedUrl: null,
        presignedExpiresAt: null,
        putStartedAt: null,
        nextAttemptAt,
        lastError: message,
      });
    } else if (batch.mode === 'direct') {
      // A lost answer means the service may have the batch: the resend is counted.
      store.batches.updateBatch(
        batch.id,
        { state: 'ready', nextAttemptAt, lastError: message },
        { possibleDuplicate: answerLost },
      );
    } else {
      // A 4xx/429 answer to the first PUT to an address means the data did not arrive: no status
      // check needed next time. A 5xx may come after the object was stored (a proxy's 502/504, an
      // object store's 500), and a lost answer says nothing: the status is asked first, then the
      // same address is tried again on this backoff (presigned-route.ts). A 4xx to a second PUT
      // says only that this one did not arrive, not the earlier one: `put_started_at` stays, or a
      // later 403 would look like a fresh address refused and be resent uncounted. A failed status
      // check or address request says nothing about an earlier PUT.
      const httpStatus = httpStatusOf(err);
      const refused =
        presignedStep === 'put' &&
        !answerLost &&
        httpStatus !== undefined &&
        httpStatus < 500 &&
        current.putStartedAt !== null;
      store.batches.updateBatch(batch.id, {
        nextAttemptAt,
        lastError: message,
        ...(refused ? { putStartedAt: null } : {}),
      });
    }
    this.options.circuit.retryAt(nextAttemptAt);
    // One line: code, cause, next attempt; a stack only for an error that is not an upstream failure (a bug).
    logger.warn(
      {
        batchId: batch.id,
        ...failureFields(err),
        retryInMs: delay,
        nextAttemptAt: new Date(nextAttemptAt).toISOString(),
      },
      action.action === 'newAddress'
        ? 'pre-signed address refused; asking for a new one'
        : 'upload failed; will retry',
    );
  }
}
