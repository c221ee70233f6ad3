import type { DeliveryConfig } from '../config/schema.js';
import type { Logger } from '../log.js';
import type { BatchRow, BufferStore } from '../buffer/store.js';
import { MAX_DIRECT_BODY_BYTES, PRESIGNED_VALIDITY_MS, TERMINAL_STATES } from '../upstream/contract.js';
import { backoffDelay, classifyFailure } from './retry.js';
import type { DeliveryApi, ScanStatusLike } from './types.js';

export type CircuitState = 'closed' | 'open' | 'half-open';

/** What the health page shows of delivery. */
export interface DeliveryStatus {
  paused: boolean;
  circuit: CircuitState;
  consecutiveFailures: number;
  lastSuccessAt?: string;
  lastError?: { message: string; at: string; batchId?: number };
  nextRetryAt?: string;
  possibleDuplicates: number;
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
/** How many status polls run at once. */
const POLL_CONCURRENCY = 8;

/**
 * Moves scans from the outbox to the service: forms batches by count, age and byte size, uploads
 * them direct or pre-signed, retries with backoff, and follows each batch's status until it is
 * terminal (contract §4.3–4.8). All state lives in the buffer, so a restart resumes where it stopped:
 * a direct upload in flight at a crash is sent again and counted as a possible duplicate; a
 * pre-signed upload is checked against the status endpoint first and sent only if the service
 * does not know its requestId.
 */
export class Deliverer {
  private readonly now: () => number;
  private running = false;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private wakeRequested = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly recovered = new Set<number>();
  private consecutiveFailures = 0;
  private paused = false;
  private status: Omit<DeliveryStatus, 'circuit' | 'consecutiveFailures' | 'paused' | 'possibleDuplicates'> = {};
  private possibleDuplicates = 0;

  constructor(private readonly options: DelivererOptions) {
    this.now = options.now ?? Date.now;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.recover();
    this.loop = this.run();
  }

  /** Stops after the step in progress; an upload in flight is finished or left to crash recovery. */
  async stop(): Promise<void> {
    this.running = false;
    this.wake();
    await this.loop;
  }

  /** New scans were committed: form a batch now if one is due. */
  wake(): void {
    this.wakeRequested = true;
    this.wakeUp?.();
  }

  pause(paused: boolean): void {
    this.paused = paused;
    this.wake();
  }

  snapshot(): DeliveryStatus {
    const circuit: CircuitState =
      this.consecutiveFailures < OPEN_AFTER ? 'closed' : this.status.nextRetryAt && Date.parse(this.status.nextRetryAt) > this.now() ? 'open' : 'half-open';
    return { ...this.status, paused: this.paused, circuit, consecutiveFailures: this.consecutiveFailures, possibleDuplicates: this.possibleDuplicates };
  }

  private recover(): void {
    const { store, logger } = this.options;
    for (const b of store.batchesInState('uploading')) {
      // The POST may or may not have reached the service: send again, and say so.
      store.updateBatch(b.id, { state: 'ready', possibleDuplicate: 1, nextAttemptAt: 0 });
      this.possibleDuplicates++;
      logger.warn({ batchId: b.id, scans: b.scanCount }, 'direct upload was in flight at the last stop; sending again (possible duplicate)');
    }
    for (const b of store.batchesInState('presigned')) this.recovered.add(b.id);
  }

  private async run(): Promise<void> {
    while (this.running) {
      let waitMs: number;
      try {
        waitMs = await this.step();
      } catch (err) {
        this.options.logger.error({ err }, 'delivery step failed');
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

  /** One pass: poll due statuses, upload the due batch, form a new batch if due. Answers ms to wait. */
  private async step(): Promise<number> {
    const { store, config } = this.options;
    const now = this.now();
    const uploaded = store.batchesInState('uploaded').filter((b) => b.nextAttemptAt <= now);
    for (let i = 0; i < uploaded.length && this.running; i += POLL_CONCURRENCY) {
      await Promise.all(uploaded.slice(i, i + POLL_CONCURRENCY).map((b) => this.poll(b)));
    }
    if (!this.paused && this.running) {
      const due = store.batchesInState('ready', 'presigned').find((b) => b.nextAttemptAt <= this.now());
      if (due) {
        await this.upload(due);
        return 0;
      }
      const inFlight = store.batchesInState('ready', 'presigned').length;
      if (inFlight === 0) {
        const pending = store.pending();
        if (pending.count > 0) {
          const age = this.now() - (pending.oldestCreatedAt ?? this.now());
          if (pending.count >= config.maxBatchScans || age >= config.maxBatchDelayMs) {
            this.formBatch(pending.count);
            return 0;
          }
          return config.maxBatchDelayMs - age;
        }
      }
    }
    const next = [...store.batchesInState('ready', 'presigned', 'uploaded')].map((b) => b.nextAttemptAt - this.now());
    return next.length > 0 ? Math.max(0, Math.min(...next)) : 1000;
  }

  private formBatch(pendingCount: number): void {
    const { store, config } = this.options;
    // auto: a backlog (more than one direct batch waiting) goes pre-signed, in larger batches.
    const mode = config.mode === 'auto' ? (pendingCount > config.maxBatchScans ? 'presigned' : 'direct') : config.mode;
    const batch = store.formBatch(
      mode === 'direct'
        ? { mode, maxScans: config.maxBatchScans, maxBytes: MAX_DIRECT_BODY_BYTES, nowIso: new Date(this.now()).toISOString() }
        : { mode, maxScans: config.presignedMaxScans, maxBytes: config.presignedMaxBytes, nowIso: new Date(this.now()).toISOString() },
    );
    if (batch) this.options.logger.debug({ batchId: batch.id, mode, scans: batch.scanCount, bytes: batch.bytes }, 'batch formed');
  }

  private async upload(batch: BatchRow): Promise<void> {
    const { store, api, logger } = this.options;
    const body = store.batchBody(batch.id);
    try {
      let requestId: string;
      if (batch.mode === 'direct') {
        store.updateBatch(batch.id, { state: 'uploading', attempts: batch.attempts + 1 });
        requestId = (await api.uploadScans(body)).requestId;
      } else {
        requestId = await this.uploadPresigned(batch, body);
      }
      const at = new Date(this.now()).toISOString();
      store.updateBatch(batch.id, { state: 'uploaded', requestId, uploadedAt: at, nextAttemptAt: this.now() + this.options.config.statusPollMs, lastError: null });
      this.recovered.delete(batch.id);
      this.consecutiveFailures = 0;
      this.status = { ...this.status, lastSuccessAt: at };
      delete this.status.nextRetryAt;
      logger.info({ batchId: batch.id, requestId, mode: batch.mode, scans: batch.scanCount, bytes: batch.bytes }, 'batch uploaded');
    } catch (err) {
      this.uploadFailed(batch, err);
    }
  }

  /**
   * Pre-signed flow (contract §4.4, §4.5): the requestId is written down before any data is sent,
   * so after a crash the status endpoint says whether the PUT arrived.
   */
  private async uploadPresigned(batch: BatchRow, body: string): Promise<string> {
    const { store, api, logger } = this.options;
    let current = store.batch(batch.id) ?? batch;
    if (current.requestId && (this.recovered.has(batch.id) || current.attempts > 0)) {
      const status = await api.getScanStatus(current.requestId);
      if (status.state !== 'NotFound') {
        logger.info({ batchId: batch.id, requestId: current.requestId }, 'pre-signed upload had arrived; not sending again');
        return current.requestId;
      }
    }
    const expired = current.presignedExpiresAt !== null && current.presignedExpiresAt - 60_000 <= this.now();
    if (!current.requestId || !current.presignedUrl || expired) {
      const issuedAt = this.now();
      const address = await api.requestPresignedUpload();
      store.updateBatch(batch.id, {
        state: 'presigned',
        requestId: address.requestId,
        presignedUrl: address.url,
        presignedExpiresAt: issuedAt + PRESIGNED_VALIDITY_MS,
      });
      current = store.batch(batch.id) ?? current;
    }
    store.updateBatch(batch.id, { attempts: current.attempts + 1 });
    await api.putPresigned(current.presignedUrl!, body);
    return current.requestId!;
  }

  private uploadFailed(batch: BatchRow, err: unknown): void {
    const { store, logger, config } = this.options;
    const action = classifyFailure(err);
    const message = (err as Error).message;
    const at = new Date(this.now()).toISOString();
    this.status = { ...this.status, lastError: { message, at, batchId: batch.id } };
    if (action.action === 'split') {
      const split = store.splitBatch(batch.id);
      logger.warn({ batchId: batch.id, split }, 'batch refused as too large; split in two');
      if (!split) store.holdBatch(batch.id, `the service refused a single scan as too large: ${message}`);
      return;
    }
    if (action.action === 'newAddress') {
      store.updateBatch(batch.id, { state: 'ready', requestId: null, presignedUrl: null, presignedExpiresAt: null });
      logger.warn({ batchId: batch.id, err }, 'pre-signed address refused; asking for a new one');
      return;
    }
    if (action.action === 'hold') {
      store.holdBatch(batch.id, message);
      logger.error({ batchId: batch.id, err }, 'batch refused by the service; held with the answer (see failures, replay)');
      return;
    }
    this.consecutiveFailures++;
    const delay = backoffDelay(this.consecutiveFailures - 1, {
      baseMs: config.retryBaseMs,
      maxMs: config.retryMaxMs,
      ...(action.retryAfterMs !== undefined ? { retryAfterMs: action.retryAfterMs } : {}),
      ...(this.options.random ? { random: this.options.random } : {}),
    });
    const nextAttemptAt = this.now() + delay;
    const lostDirect = batch.mode === 'direct' && action.answerLost;
    if (lostDirect) this.possibleDuplicates++;
    const state = batch.mode === 'direct' ? 'ready' : (store.batch(batch.id)?.state ?? batch.state);
    store.updateBatch(batch.id, { state, nextAttemptAt, lastError: message, ...(lostDirect ? { possibleDuplicate: 1 } : {}) });
    this.status = { ...this.status, nextRetryAt: new Date(nextAttemptAt).toISOString() };
    logger.warn({ batchId: batch.id, err, retryInMs: delay }, 'upload failed; will retry');
  }

  private async poll(batch: BatchRow): Promise<void> {
    const { store, api, config, logger } = this.options;
    let status: ScanStatusLike;
    try {
      status = await api.getScanStatus(batch.requestId!);
    } catch (err) {
      const delay = backoffDelay(batch.polls, { baseMs: config.statusPollMs, maxMs: config.statusPollMaxMs });
      store.updateBatch(batch.id, { polls: batch.polls + 1, nextAttemptAt: this.now() + delay, lastError: (err as Error).message });
      return;
    }
    if ((TERMINAL_STATES as readonly string[]).includes(status.state)) {
      store.finishBatch(batch.id, status, new Date(this.now()).toISOString());
      const log = status.state === 'Success' ? logger.info.bind(logger) : logger.warn.bind(logger);
      log({ batchId: batch.id, requestId: batch.requestId, state: status.state, processed: status.processed, failed: status.failed }, 'batch processed');
      return;
    }
    const sinceUpload = this.now() - Date.parse(batch.uploadedAt ?? new Date(this.now()).toISOString());
    if (status.state === 'NotFound' && sinceUpload > config.notFoundGraceMs) {
      // The service does not know this batch after the grace window: it never arrived. Send again.
      const duplicate = batch.mode === 'direct';
      if (duplicate) this.possibleDuplicates++;
      store.updateBatch(batch.id, {
        state: 'ready',
        requestId: null,
        presignedUrl: null,
        presignedExpiresAt: null,
        nextAttemptAt: 0,
        ...(duplicate ? { possibleDuplicate: 1 } : {}),
      });
      logger.warn({ batchId: batch.id, requestId: batch.requestId }, 'service does not know an uploaded batch; sending again');
      return;
    }
    const interval = Math.min(config.statusPollMaxMs, Math.round(config.statusPollMs * 1.5 ** (batch.polls + 1)));
    store.updateBatch(batch.id, { polls: batch.polls + 1, nextAttemptAt: this.now() + interval, upstreamState: status.state });
  }
}
