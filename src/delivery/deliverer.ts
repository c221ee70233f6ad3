import type { DeliveryConfig } from '../config/schema.js';
import { ErrorCodes, httpStatusOf, isGatewayError, isNotSent, isTokenFailure } from '../errors.js';
import type { Logger } from '../log.js';
import { isDiskFull, type BatchMode, type BatchRow, type BufferStore } from '../buffer/store.js';
import { MAX_DIRECT_BODY_BYTES, PRESIGNED_VALIDITY_MS } from '../upstream/contract.js';
import { failureFields } from '../upstream/failure-log.js';
import { backoffDelay, classifyFailure } from './retry.js';
import { StatusTracker, type StatusChecks } from './status-tracker.js';
import type { DeliveryApi } from './types.js';

export type CircuitState = 'closed' | 'open' | 'half-open';

/** What kind of failure the last upload attempt met (see {@link DeliveryStatus.lastError}). */
export type ErrorKind = 'token' | 'network' | 'auth' | 'answer' | 'http';

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
   * Scans that may be held twice by the service: they were in a direct upload whose answer was
   * lost and were sent again. Counted in the buffer, so the count survives restarts.
   */
  possibleDuplicates: number;
  /** How many such uploads (batches sent again). */
  possibleDuplicateUploads: number;
  /** A delivery step that failed on the buffer itself (a full disk), until a step succeeds. */
  stepError?: { message: string; at: string; diskFull: boolean };
  /** Status checks (contract §4.6) that failed in a row, and the latest failure. */
  statusChecks: StatusChecks;
}

export interface DelivererOptions {
  store: BufferStore;
  api: DeliveryApi;
  config: DeliveryConfig;
  logger: Logger;
  now?: () => number;
  random?: () => number;
}

/** Consecutive failures after which the circuit opens (waits out its backoff before the next try). */
const OPEN_AFTER = 3;
/** How many status polls run at once (uploads go one at a time; see docs/delivery.md). */
const POLL_CONCURRENCY = 8;
/** A pre-signed address this close to its expiry is not used for a PUT any more, in ms. */
const ADDRESS_MARGIN_MS = 60_000;

/** Outcome of one pre-signed attempt: sent (or found already sent), or left to the status poll. */
type PresignedOutcome = { requestId: string; uploadedAt?: number } | { waitForStatus: true };

/**
 * Moves scans from the outbox to the service: forms batches by count, age and byte size, uploads
 * them direct or pre-signed, retries with backoff, and follows each batch's status until it is
 * terminal (contract §4.3–4.8). Every decision is taken from the batch's state in the buffer, so a
 * restart (or a crash at any point) resumes where it stopped:
 *
 * - `uploading` (a direct POST was in flight): sent again and counted as a possible duplicate.
 * - `presigned` without a PUT started: the PUT is made (same address while valid, else a new one).
 * - `presigned` with a PUT started (`put_started_at`): the status endpoint is asked first. A known
 *   requestId is not sent again; an unknown one is given `notFoundGraceMs` from the PUT, then sent
 *   again: to the same address while it is valid and unused, else to a new one.
 * - `uploaded`: status polling resumes.
 *
 * Uploading runs in this class's loop, one batch at a time (batch order and the circuit's count of
 * failures in a row stay simple); status polling runs beside it in a {@link StatusTracker} with up
 * to 8 polls at once. Neither waits for the other.
 */
export class Deliverer {
  private readonly now: () => number;
  private running = false;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private wakeRequested = false;
  private timer: NodeJS.Timeout | undefined;
  private inFlight: number | undefined;
  /** The pre-signed step in progress, so a failure is pinned on the right call. */
  private presignedStep: 'status' | 'address' | 'put' | 'reput' | undefined;
  /** Status polling of uploaded batches, apart from uploading. */
  private readonly tracker: StatusTracker;
  private stepError: DeliveryStatus['stepError'];
  private consecutiveFailures = 0;
  private paused = false;
  private status: Omit<DeliveryStatus, 'circuit' | 'consecutiveFailures' | 'paused' | 'possibleDuplicates' | 'possibleDuplicateUploads' | 'statusChecks'> = {};

  constructor(private readonly options: DelivererOptions) {
    this.now = options.now ?? Date.now;
    this.tracker = new StatusTracker({
      store: options.store,
      api: options.api,
      config: options.config,
      logger: options.logger,
      now: this.now,
      ...(options.random ? { random: options.random } : {}),
      concurrency: POLL_CONCURRENCY,
      onResend: () => this.wake(),
    });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.recoverDirect();
    this.loop = this.run();
    this.tracker.start();
  }

  /**
   * Stops after the upload in progress (finished or left to crash recovery) and the status polls
   * in flight; queued polls are dropped (their batches stay `uploaded` and are polled after a start).
   */
  async stop(): Promise<void> {
    this.running = false;
    this.wake();
    await Promise.all([this.loop, this.tracker.stop()]);
  }

  /** New scans were committed, or the clock moved: form or send a batch, and poll, if one is due. */
  wake(): void {
    this.wakeRequested = true;
    this.wakeUp?.();
    this.tracker.wake();
  }

  /** Status polls in flight and waiting (for the status page and tests). */
  statusLoad(): { polling: number; queued: number } {
    return this.tracker.load();
  }

  pause(paused: boolean): void {
    this.paused = paused;
    this.wake();
  }

  snapshot(): DeliveryStatus {
    const circuit: CircuitState =
      this.consecutiveFailures < OPEN_AFTER ? 'closed' : this.status.nextRetryAt && Date.parse(this.status.nextRetryAt) > this.now() ? 'open' : 'half-open';
    const dup = this.options.store.possibleDuplicates();
    return {
      ...this.status,
      paused: this.paused,
      circuit,
      consecutiveFailures: this.consecutiveFailures,
      possibleDuplicates: dup.scans,
      possibleDuplicateUploads: dup.uploads,
      statusChecks: this.tracker.snapshot(),
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
    for (const b of store.batchesInState('uploading')) {
      if (b.id === this.inFlight) continue;
      store.updateBatch(b.id, { state: 'ready', nextAttemptAt: 0 }, { possibleDuplicate: true });
      logger.warn({ batchId: b.id, scans: b.scanCount }, 'direct upload was in flight and its answer was not recorded; sending again (possible duplicate)');
    }
  }

  private async run(): Promise<void> {
    while (this.running) {
      let waitMs: number;
      try {
        waitMs = await this.step();
        this.stepError = undefined;
      } catch (err) {
        // A failed write to the buffer (a full disk) lands here; the stored state is unchanged.
        const message = (err as Error).message;
        if (this.stepError?.message !== message) this.options.logger.error({ err }, 'delivery step failed; retrying every second');
        this.stepError = { message, at: new Date(this.now()).toISOString(), diskFull: isDiskFull(err) };
        waitMs = 1000;
      }
      if (!this.running) break;
      if (this.wakeRequested) {
        this.wakeRequested = false;
        continue;
      }
      await new Promise<void>((resolve) => {
        this.wakeUp = resolve;
        this.timer = setTimeout(resolve, Math.max(0, Math.min(waitMs, 1000)));
      });
      clearTimeout(this.timer);
      this.wakeUp = undefined;
      this.wakeRequested = false;
    }
  }

  /**
   * One pass of uploading: upload the due batch, form a new batch if due. Answers ms to wait.
   * Status polls are not awaited here: the {@link StatusTracker} runs them on its own.
   */
  private async step(): Promise<number> {
    const { store, config } = this.options;
    this.recoverDirect();
    if (!this.paused && this.running) {
      const open = store.batchesInState('ready', 'presigned');
      const due = open.find((b) => b.nextAttemptAt <= this.now());
      if (due) {
        await this.upload(due);
        return 0;
      }
      if (open.length === 0) {
        const pending = store.pending();
        if (pending.count > 0) {
          const age = this.now() - (pending.oldestCreatedAt ?? this.now());
          const full = pending.count >= config.maxBatchScans || store.totals().pendingBytes >= MAX_DIRECT_BODY_BYTES;
          if (full || age >= config.maxBatchDelayMs) {
            this.formBatch();
            return 0;
          }
          return config.maxBatchDelayMs - age;
        }
      }
    }
    const next = store.batchesInState('ready', 'presigned').map((b) => b.nextAttemptAt - this.now());
    return next.length > 0 ? Math.max(0, Math.min(...next)) : 1000;
  }

  /**
   * Forms the next batch. `auto` sends a backlog (more pending than one direct batch holds, by
   * count or bytes) pre-signed in larger batches, and anything else direct.
   */
  private formBatch(): void {
    const { store, config, logger } = this.options;
    const nowIso = new Date(this.now()).toISOString();
    const totals = store.totals();
    const backlog = totals.pendingScans > config.maxBatchScans || totals.pendingBytes > MAX_DIRECT_BODY_BYTES;
    const mode: BatchMode = config.mode === 'auto' ? (backlog ? 'presigned' : 'direct') : config.mode;
    const form = (m: BatchMode) =>
      m === 'direct'
        ? store.formBatch({ mode: m, maxScans: config.maxBatchScans, maxBytes: MAX_DIRECT_BODY_BYTES, nowIso, holdOversize: config.mode === 'direct' })
        : store.formBatch({ mode: m, maxScans: config.presignedMaxScans, maxBytes: config.presignedMaxBytes, nowIso, holdOversize: true });
    // In auto mode a scan too large for a direct upload still goes, pre-signed.
    const batch = form(mode) ?? (config.mode === 'auto' && mode === 'direct' ? form('presigned') : undefined);
    if (batch) logger.debug({ batchId: batch.id, mode: batch.mode, scans: batch.scanCount, bytes: batch.bytes }, 'batch formed');
  }

  private async upload(batch: BatchRow): Promise<void> {
    const { store, api, logger, config } = this.options;
    const body = store.batchBody(batch.id);
    this.inFlight = batch.id;
    try {
      let outcome: PresignedOutcome;
      if (batch.mode === 'direct') {
        store.updateBatch(batch.id, { state: 'uploading', attempts: batch.attempts + 1 });
        outcome = { requestId: (await api.uploadScans(body)).requestId };
      } else {
        outcome = await this.uploadPresigned(batch, body);
      }
      this.consecutiveFailures = 0;
      delete this.status.nextRetryAt;
      if ('waitForStatus' in outcome) {
        this.tracker.wake();
        return;
      }
      const uploadedAt = outcome.uploadedAt ?? this.now();
      const at = new Date(uploadedAt).toISOString();
      store.updateBatch(batch.id, { state: 'uploaded', requestId: outcome.requestId, uploadedAt: at, nextAttemptAt: this.now() + config.statusPollMs, lastError: null });
      this.status = { ...this.status, lastSuccessAt: at };
      this.tracker.wake();
      logger.info({ batchId: batch.id, requestId: outcome.requestId, mode: batch.mode, scans: batch.scanCount, bytes: batch.bytes }, 'batch uploaded');
    } catch (err) {
      // Not an upstream answer (a failed write to the buffer, a full disk): the stored state says
      // what happened; the loop logs it and the next pass (recoverDirect) takes it from there.
      if (!isGatewayError(err)) throw err;
      this.uploadFailed(batch, err);
    } finally {
      this.inFlight = undefined;
    }
  }

  /**
   * Pre-signed flow (contract §4.4, §4.5): the requestId is written down before any data is sent,
   * and the start of each PUT too, so after a crash or a lost answer the status endpoint says
   * whether the data arrived. When the service has not shown an upload within `notFoundGraceMs`,
   * the same single-use address is tried once more while it is valid: accepted means the first
   * PUT had not arrived; refused (403) means it had. Only a resend under a new address, after a
   * PUT that may have arrived, can duplicate: it is counted as a possible duplicate.
   */
  private async uploadPresigned(batch: BatchRow, body: string): Promise<PresignedOutcome> {
    const { store, api, logger, config } = this.options;
    let current = store.batch(batch.id) ?? batch;
    this.presignedStep = undefined;
    let mayHaveArrived = false;
    if (current.requestId && current.putStartedAt !== null) {
      this.presignedStep = 'status';
      const status = await api.getScanStatus(current.requestId);
      if (status.state !== 'NotFound') {
        logger.info({ batchId: batch.id, requestId: current.requestId }, 'pre-signed upload had arrived; not sending it again');
        return { requestId: current.requestId, uploadedAt: current.putStartedAt };
      }
      if (this.now() - current.putStartedAt < config.notFoundGraceMs) {
        // The service may not show an upload at once: wait out the grace window by polling.
        store.updateBatch(batch.id, {
          state: 'uploaded',
          uploadedAt: new Date(current.putStartedAt).toISOString(),
          nextAttemptAt: this.now() + config.statusPollMs,
        });
        logger.info({ batchId: batch.id, requestId: current.requestId }, 'pre-signed upload may have arrived; polling its status before sending again');
        return { waitForStatus: true };
      }
      mayHaveArrived = true;
    }
    const expired = current.presignedExpiresAt !== null && current.presignedExpiresAt - ADDRESS_MARGIN_MS <= this.now();
    const reuse = mayHaveArrived && current.presignedUrl !== null && !expired;
    if (reuse) {
      logger.warn(
        { batchId: batch.id, requestId: current.requestId, graceMs: config.notFoundGraceMs },
        'the service does not show the pre-signed upload; sending it again to the same single-use address (a refusal means the first one had arrived)',
      );
    } else if (!current.requestId || !current.presignedUrl || expired) {
      const issuedAt = this.now();
      this.presignedStep = 'address';
      const address = await api.requestPresignedUpload();
      store.updateBatch(
        batch.id,
        {
          state: 'presigned',
          requestId: address.requestId,
          presignedUrl: address.url,
          presignedExpiresAt: issuedAt + PRESIGNED_VALIDITY_MS,
          putStartedAt: null,
        },
        { possibleDuplicate: mayHaveArrived },
      );
      if (mayHaveArrived) {
        logger.warn(
          { batchId: batch.id, previousRequestId: current.requestId, requestId: address.requestId, scans: batch.scanCount },
          'the service never showed the earlier pre-signed upload; sending it again under a new address (counted as a possible duplicate)',
        );
      }
      current = store.batch(batch.id) ?? current;
    }
    const started = this.now();
    store.updateBatch(batch.id, { attempts: current.attempts + 1, putStartedAt: started });
    this.presignedStep = reuse ? 'reput' : 'put';
    await api.putPresigned(current.presignedUrl!, body);
    return { requestId: current.requestId!, uploadedAt: started };
  }

  private uploadFailed(batch: BatchRow, err: unknown): void {
    const { store, logger, config } = this.options;
    const action = classifyFailure(err);
    const message = (err as Error).message;
    const at = new Date(this.now()).toISOString();
    const code = isGatewayError(err) ? err.code : undefined;
    this.status = { ...this.status, lastError: { message, at, batchId: batch.id, kind: errorKind(err), ...(code ? { code } : {}) } };
    if (action.action === 'split') {
      const split = store.splitBatch(batch.id);
      logger.warn({ batchId: batch.id, split }, 'batch refused as too large; split in two');
      if (!split) store.holdBatch(batch.id, `the service refused a single scan as too large: ${message}`);
      return;
    }
    if (action.action === 'newAddress' && this.presignedStep === 'reput') {
      // §4.5: an address takes one upload. Refused now, it took the first one: follow its status
      // for another grace window; only then is the batch sent again, under a new address.
      const now = this.now();
      store.updateBatch(batch.id, {
        state: 'uploaded',
        presignedUrl: null,
        presignedExpiresAt: null,
        putStartedAt: now,
        uploadedAt: new Date(now).toISOString(),
        nextAttemptAt: now + config.statusPollMs,
        lastError: message,
      });
      logger.warn({ batchId: batch.id, requestId: batch.requestId }, 'the single-use address was used already, so the earlier upload had arrived; following its status');
      return;
    }
    if (action.action === 'hold') {
      store.holdBatch(batch.id, message);
      logger.error({ batchId: batch.id, ...failureFields(err) }, 'batch refused by the service; held with the answer (see failures, replay)');
      return;
    }
    if (batch.mode === 'direct' && isUnreadableAcceptance(err)) {
      // Sending again would duplicate a batch the service most likely has, on every retry.
      store.holdBatch(batch.id, `the service accepted the upload but its answer could not be read (${message}); not sent again, to avoid duplicates`);
      logger.error({ batchId: batch.id, ...failureFields(err) }, 'upload accepted with an answer that cannot be read; batch held, not sent again (see failures, replay)');
      return;
    }
    // A refused address waits like any other failure: asked for again at once, every time, it
    // would use up an address (and a requestId at the service) per loop.
    this.consecutiveFailures++;
    const retryAfterMs = action.action === 'retry' ? action.retryAfterMs : undefined;
    const answerLost = action.action === 'retry' && action.answerLost;
    const delay = backoffDelay(this.consecutiveFailures - 1, {
      baseMs: config.retryBaseMs,
      maxMs: config.retryMaxMs,
      ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
      ...(this.options.random ? { random: this.options.random } : {}),
    });
    const nextAttemptAt = this.now() + delay;
    const current = store.batch(batch.id) ?? batch;
    if (action.action === 'newAddress') {
      store.updateBatch(batch.id, { state: 'ready', requestId: null, presignedUrl: null, presignedExpiresAt: null, putStartedAt: null, nextAttemptAt, lastError: message });
    } else if (batch.mode === 'direct') {
      // A lost answer means the service may have the batch: the resend is counted.
      store.updateBatch(batch.id, { state: 'ready', nextAttemptAt, lastError: message }, { possibleDuplicate: answerLost });
    } else {
      // A 4xx/429 answer to the PUT itself means the data did not arrive: no status check needed
      // next time. A 5xx may come after the object was stored (a proxy's 502/504, an object store's
      // 500), and a lost answer says nothing: the status is asked first. A failed status check or
      // address request says nothing about an earlier PUT.
      const httpStatus = httpStatusOf(err);
      const putStep = this.presignedStep === 'put' || this.presignedStep === 'reput';
      const refused = putStep && !answerLost && httpStatus !== undefined && httpStatus < 500 && current.putStartedAt !== null;
      store.updateBatch(batch.id, { nextAttemptAt, lastError: message, ...(refused ? { putStartedAt: null } : {}) });
    }
    this.status = { ...this.status, nextRetryAt: new Date(nextAttemptAt).toISOString() };
    // One line: code, cause, next attempt; a stack only for an error that is not an upstream failure (a bug).
    logger.warn(
      { batchId: batch.id, ...failureFields(err), retryInMs: delay, nextAttemptAt: new Date(nextAttemptAt).toISOString() },
      action.action === 'newAddress' ? 'pre-signed address refused; asking for a new one' : 'upload failed; will retry',
    );
  }
}

/**
 * A 2xx answer to an upload that the client could not read (no requestId, HTML from a proxy, an
 * empty body): the service most likely has the batch, but it cannot be followed.
 */
function isUnreadableAcceptance(err: unknown): boolean {
  if (!isGatewayError(err) || isNotSent(err)) return false;
  if (err.code !== ErrorCodes.UPSTREAM_RESPONSE && err.code !== ErrorCodes.UPSTREAM_ANSWER_TOO_LARGE) return false;
  const status = err.details.status;
  return typeof status !== 'number' || (status >= 200 && status < 300);
}

function errorKind(err: unknown): ErrorKind {
  if (!isGatewayError(err)) return 'network';
  if (isTokenFailure(err)) return 'token';
  if (err.code === ErrorCodes.UPSTREAM_AUTH) return 'auth';
  if (err.code === ErrorCodes.UPSTREAM_RESPONSE || err.code === ErrorCodes.UPSTREAM_ANSWER_TOO_LARGE) return 'answer';
  if (err.code === ErrorCodes.UPSTREAM_NETWORK) return 'network';
  return 'http';
}
