import PQueue from 'p-queue';
import { isDiskFull, isGatewayError, type GatewayError } from '../errors.js';
import type { BatchRow } from '../buffer/store.js';
import { LoopSleep } from '../loop.js';
import {
  BATCH_THREAD_MIN_BODY_BYTES,
  BatchThreadUnavailable,
  threadWritesEnded,
} from './batch-thread.js';
import { PresignedRoute, type PresignedOutcome, type PresignedStep } from './presigned-route.js';
import { uploadSftp } from './sftp-upload.js';
import { errorKind } from './upload-errors.js';
import { recordAccepted, recordFailure } from './upload-outcome.js';
import type { UploaderOptions, UploaderSnapshot } from './uploader-options.js';

export type { ErrorKind } from './upload-errors.js';
export type { UploaderOptions, UploaderSnapshot } from './uploader-options.js';

/**
 * While the circuit is open, how often the service is asked whether it is back (a status request,
 * contract §4.6: a few hundred bytes), in ms: catch-up after an outage starts within this, not
 * after the backoff, which may have grown to `retryMaxMs`.
 */
export const OUTAGE_PROBE_MS = 5_000;

/** The requestId the outage probe asks about before the service ever gave one: never issued. */
const UNISSUED_REQUEST_ID = '0';

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
  /** The outage probe in flight, and when the last one began (ms on the clock). */
  private probing = false;
  private lastProbeAt = 0;
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
    await this.options.batcher.settled();
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
    // A batch still being written in steps is whole only after its last step.
    const { batcher } = this.options;
    const waiting = store.batches
      .batchesInState('ready', 'presigned')
      .filter((b) => !this.inFlight.has(b.id) && !batcher.unfinished(b.id));
    const left: BatchRow[] = [];
    for (const b of waiting) {
      const startable = this.inFlight.size < slots && !(b.mode === 'sftp' && this.sftpInFlight);
      if (startable && b.nextAttemptAt <= now()) this.begin(b);
      else left.push(b);
    }
    if (slots === 0) {
      const retryAt = this.options.circuit.snapshot().nextRetryAt;
      const untilRetry = retryAt ? Math.max(0, Date.parse(retryAt) - now()) : wait;
      return Math.min(untilRetry, this.probeOutage(untilRetry));
    }
    const failing = this.options.circuit.snapshot().consecutiveFailures > 0;
    const full = this.inFlight.size >= slots;
    // Batches that could start once due (not blocked by a full set of slots or an SFTP transfer).
    const next = left
      .filter((b) => !full && !(b.mode === 'sftp' && this.sftpInFlight))
      .map((b) => b.nextAttemptAt - now());
    if (next.length > 0) wait = Math.max(0, Math.min(...next));
    // After a failure, the next try may be a long backoff away: the service is asked meanwhile.
    if (failing && this.inFlight.size === 0 && next.length > 0)
      wait = Math.min(wait, this.probeOutage(wait));
    // One batch formed ahead of the free slots while uploads flow (never after a failure, and not
    // at uploadConcurrency 1, which keeps the one-batch-open behaviour of before).
    const ahead = slots > 1 ? 1 : 0;
    if (left.length === 0 && this.inFlight.size < slots + ahead) {
      const formed = this.options.batcher.formIfDue();
      if (formed !== undefined) wait = Math.min(wait, formed);
    }
    return wait;
  }

  /**
   * After a failure, while the next try is further off than {@link OUTAGE_PROBE_MS}: asks the
   * service the status of the last requestId it gave, every {@link OUTAGE_PROBE_MS}. An answer (any
   * state) means it is back: the waiting batches are due at once, and an open circuit half-opens,
   * so one upload goes (and, when it passes, the rest follow). A failed probe changes nothing.
   * Without any requestId yet (no upload ever answered: a new site, or a buffer filled while the
   * WAN was down since the start), requestId 0 is asked, which the service answers NotFound.
   *
   * @returns ms until the next probe is due.
   */
  private probeOutage(untilRetryMs: number): number {
    const { store, now, api, logger } = this.options;
    if (untilRetryMs <= OUTAGE_PROBE_MS || this.probing) return OUTAGE_PROBE_MS;
    const due = this.lastProbeAt + OUTAGE_PROBE_MS - now();
    if (due > 0) return due;
    // Before any upload was ever answered there is no requestId of ours to ask about: 0, which an
    // auto-numbering service never hands out (requestIds are integers, contract §2.8), is asked
    // instead, and its NotFound is an answer (§4.6).
    const requestId = store.batches.latestRequestId() ?? UNISSUED_REQUEST_ID;
    this.probing = true;
    this.lastProbeAt = now();
    void api
      .getScanStatus(requestId)
      .then(
        () => {
          if (!this.running || this.options.circuit.snapshot().consecutiveFailures === 0) return;
          const at = now();
          for (const b of store.batches.batchesInState('ready', 'presigned'))
            if (b.nextAttemptAt > at) store.batches.updateBatch(b.id, { nextAttemptAt: at });
          this.options.circuit.retryAt(at);
          logger.info(
            { probe: 'status', requestId },
            'the service answers again: the waiting batches are tried now, not after the backoff',
          );
        },
        () => undefined,
      )
      .catch((err: unknown) => this.stepFailed(err))
      .finally(() => {
        this.probing = false;
        this.wake();
      });
    return OUTAGE_PROBE_MS;
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

  /**
   * A direct batch's body: at most 5.8 MiB (MAX_DIRECT_BODY_BYTES), built whole by SQLite as bytes
   * outside V8's heap (batchBodyBytes); a large one in the batch thread when there is one, so the
   * event loop does not wait for SQLite to join it.
   * @throws what SQLite threw: not an upstream answer, so the batch stays as it is.
   */
  private async directBody(batch: BatchRow): Promise<Buffer> {
    const { store, thread } = this.options;
    if (thread?.usable && batch.bytes >= BATCH_THREAD_MIN_BODY_BYTES) {
      try {
        return await thread.body(batch.id);
      } catch (err) {
        if (!(err instanceof BatchThreadUnavailable)) throw err;
      }
    }
    return store.batches.batchBodyBytes(batch.id);
  }

  private async upload(batch: BatchRow): Promise<void> {
    const { store, api } = this.options;
    const presignedStep: PresignedStep = { current: undefined };
    const body = batch.mode === 'direct' ? await this.directBody(batch) : undefined;
    try {
      if (batch.mode === 'sftp') {
        await uploadSftp(batch, this.options, (at) => this.succeededAt(at));
        return;
      }
      let outcome: PresignedOutcome;
      if (body) {
        await threadWritesEnded(this.options.thread);
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
      await threadWritesEnded(this.options.thread);
      recordAccepted(batch, outcome, this.options, (at) => this.succeededAt(at));
    } catch (err) {
      // Not an upstream answer (a failed write to the buffer, a full disk): the stored state says
      // what happened; the loop logs it and the next pass (recoverDirect) takes it from there.
      if (!isGatewayError(err)) throw err;
      await threadWritesEnded(this.options.thread);
      this.uploadFailed(batch, err, presignedStep.current);
    }
  }

  /** The time of the last upload that succeeded, for the status page. */
  private succeededAt(at: string): void {
    this.status = { ...this.status, lastSuccessAt: at };
  }

  /** Notes a failed upload for the status page, then records it in the buffer ({@link recordFailure}). */
  private uploadFailed(
    batch: BatchRow,
    err: GatewayError,
    presignedStep: PresignedStep['current'],
  ): void {
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
    recordFailure(batch, err, presignedStep, this.options);
  }
}
