import { httpStatusOf, isDiskFull, type GatewayError } from '../errors.js';
import type { BatchRow } from '../buffer/store.js';
import { failureFields } from '../failure-log.js';
import { classifyFailure } from './retry.js';
import type { PresignedStep } from './presigned-route.js';
import { isUnreadableAcceptance, SFTP_HOLDS } from './upload-errors.js';
import type { UploaderOptions } from './uploader-options.js';

/**
 * What the uploader writes to the buffer once an upload has its answer: an accepted batch becomes
 * `uploaded` for the status tracker ({@link recordAccepted}); a failed one is split, held, handed to
 * the status tracker, or put back with the circuit's backoff ({@link recordFailure}).
 */

/**
 * Records a batch the service accepted (direct, or pre-signed with its PUT answered): `uploaded`
 * with its requestId, the status asked after `statusPollMs`; `setLastSuccess` gets the time.
 *
 * @throws the buffer's error when the batch cannot be marked (a full disk), after logging the
 *   requestId: the batch's stored state then says what is sent again.
 */
export function recordAccepted(
  batch: BatchRow,
  outcome: { requestId: string; uploadedAt?: number },
  options: UploaderOptions,
  setLastSuccess: (at: string) => void,
): void {
  const { store, logger, config } = options;
  const uploadedAt = outcome.uploadedAt ?? options.now();
  const at = new Date(uploadedAt).toISOString();
  try {
    store.batches.updateBatch(batch.id, {
      state: 'uploaded',
      requestId: outcome.requestId,
      uploadedAt: at,
      nextAttemptAt: options.now() + config.statusPollMs,
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
  setLastSuccess(at);
  options.onUploaded();
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
  if (batch.possibleDuplicate > 0)
    logger.warn(
      { batchId: batch.id, requestId: outcome.requestId, scans: batch.scanCount },
      'a batch sent again after an upload answer was lost was accepted: a possible duplicate at the service until the status of this requestId is known',
    );
}

/**
 * Records a failed upload of `batch` (an upstream answer, or none): an SFTP batch held or retried;
 * a batch too large split; a single-use address found used already followed by its status; a
 * refusal held; an accepted upload with an unreadable answer held; anything else retried after
 * the circuit's backoff (a refused address with a new one). `presignedStep` is the pre-signed call
 * that failed.
 */
export function recordFailure(
  batch: BatchRow,
  err: GatewayError,
  presignedStep: PresignedStep['current'],
  options: UploaderOptions,
): void {
  const { store, logger, config } = options;
  const action = classifyFailure(err);
  const message = (err as Error).message;
  if (batch.mode === 'sftp') {
    sftpFailed(batch, err, options);
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
    const now = options.now();
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
  const delay = options.circuit.failed(retryAfterMs);
  const nextAttemptAt = options.now() + delay;
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
  options.circuit.retryAt(nextAttemptAt);
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

/** An SFTP transfer failed: held (permission, conflict) or back to `ready` with backoff. */
function sftpFailed(batch: BatchRow, err: GatewayError, options: UploaderOptions): void {
  const { store, logger } = options;
  if (SFTP_HOLDS.includes(err.code)) {
    store.batches.holdBatch(batch.id, err.message);
    logger.error(
      { batchId: batch.id, ...failureFields(err) },
      'SFTP server refused the batch file; batch held with the reason (see failures, replay)',
    );
    return;
  }
  const delay = options.circuit.failed();
  const nextAttemptAt = options.now() + delay;
  // `ready` again: the next attempt asks the server first, whatever this one left there.
  store.batches.updateBatch(batch.id, { state: 'ready', nextAttemptAt, lastError: err.message });
  options.circuit.retryAt(nextAttemptAt);
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
