import { TERMINAL_STATES } from '@scan-gateway/contract';
import type { BatchRow } from '../buffer/store.js';
import type { StatusTrackerOptions } from './status-tracker.js';
import type { ScanStatusLike } from './types.js';

/** Where a status answer came from: a poll (contract §4.6) or a status event (§6). */
export type StatusSource = 'poll' | 'event';

/**
 * What a status answer is about: a batch id, its requestId, or (SFTP) the name of its
 * remote file, or the references of its scans (an event whose `failures` name them).
 */
export type StatusRef =
  number | { requestId: string } | { fileName: string } | { references: readonly string[] };

/** The final state of an SFTP batch whose file is on the server, size verified. */
export const TRANSFERRED = 'transferred';

/** The status an SFTP batch ends with when the service tells nothing more: remote path and sha256 for audit. */
export function transferredStatus(batch: BatchRow): ScanStatusLike {
  return {
    state: TRANSFERRED,
    requestId: '',
    description: `SFTP ${batch.remotePath ?? '?'} sha256 ${batch.sha256 ?? '?'}`,
  };
}

/** What {@link applyStatus} needs of the tracker's options. */
export type ApplyOptions = Pick<
  StatusTrackerOptions,
  'store' | 'config' | 'logger' | 'now' | 'onResend'
>;

/**
 * Applies a status answer to the uploaded batch it is about, named by its id or its requestId:
 * THE one place that moves an uploaded batch to its terminal state (contract §2.8: `done`, each
 * failure's reason on its scan). A poll's answer goes through here today; a status event (pushed
 * by the service) goes through the same door. A batch that is not `uploaded` any more (finished
 * already, or gone back to be sent) is left alone, so a late or repeated answer changes nothing.
 *
 * - terminal (`Success`, `HasFailures`, `Failed`): the batch is `done`; a pre-signed batch with
 *   more scans `processed` than it holds is counted as a possible duplicate (a service that
 *   broke the single-use rule of its address, §8);
 * - `NotFound` past `notFoundGraceMs` from the upload: the batch goes back to be sent again;
 * - anything else: the state is recorded and the next poll scheduled (`statusPollMs` × 1.5ⁿ,
 *   at most `statusPollMaxMs`).
 *
 * An SFTP batch (named by its file name, or by the references of its scans) is handled by
 * `applySftp`: `transferred` ends it, and a terminal answer later replaces `transferred`.
 *
 * @returns what became of the batch; `ignored` when no uploaded batch has that id or requestId.
 */
export function applyStatus(
  ref: StatusRef,
  status: ScanStatusLike,
  source: StatusSource,
  options: ApplyOptions,
): 'done' | 'resend' | 'waiting' | 'ignored' {
  const { store } = options;
  const batch =
    typeof ref === 'number'
      ? store.batches.batch(ref)
      : 'fileName' in ref
        ? store.batches.batchByRemoteName(ref.fileName)
        : 'references' in ref
          ? store.batches.transferredBatchOfReferences(ref.references)
          : store.batches.batchByRequestId(ref.requestId);
  if (!batch) return 'ignored';
  if (batch.mode === 'sftp') return applySftp(batch, status, options);
  if (batch.state !== 'uploaded' || batch.requestId === null) return 'ignored';
  return applyTo(batch, status, source, options);
}

/**
 * An SFTP batch: `transferred` ends an uploaded one (the file is there, size
 * verified). A status the service tells later (an event naming the batch's file) replaces
 * `transferred` when it is terminal; anything else about a transferred batch is recorded as
 * nothing, since the gateway has no request id to follow it by (docs/delivery.md, "SFTP").
 */
function applySftp(
  batch: BatchRow,
  status: ScanStatusLike,
  options: ApplyOptions,
): 'done' | 'waiting' | 'ignored' {
  const { store, logger, now } = options;
  const terminal = (TERMINAL_STATES as readonly string[]).includes(status.state);
  if (batch.state === 'uploaded' && (status.state === TRANSFERRED || terminal)) {
    store.batches.finishBatch(batch.id, status, new Date(now()).toISOString());
    // The service's word came before `transferred` was recorded: its requestId is kept, as below.
    if (terminal && status.requestId)
      store.batches.updateBatch(batch.id, { requestId: String(status.requestId) });
    logger.info(
      {
        batchId: batch.id,
        remotePath: batch.remotePath,
        sha256: batch.sha256,
        state: status.state,
      },
      'batch processed',
    );
    return 'done';
  }
  if (batch.state === 'done' && batch.upstreamState === TRANSFERRED && terminal) {
    store.batches.finishBatch(
      batch.id,
      { ...status, description: status.description ?? batch.description ?? undefined },
      new Date(now()).toISOString(),
    );
    if (status.requestId)
      store.batches.updateBatch(batch.id, { requestId: String(status.requestId) });
    logger.info(
      {
        batchId: batch.id,
        remotePath: batch.remotePath,
        state: status.state,
        processed: status.processed,
        failed: status.failed,
      },
      'the service reported on a transferred batch',
    );
    return 'done';
  }
  return 'ignored';
}

/** A status answer for an uploaded batch sent direct or pre-signed (see {@link applyStatus}). */
function applyTo(
  batch: BatchRow,
  status: ScanStatusLike,
  source: StatusSource,
  options: ApplyOptions,
): 'done' | 'resend' | 'waiting' {
  const { store, config, logger, now } = options;
  const terminal = (TERMINAL_STATES as readonly string[]).includes(status.state);
  if (source === 'event' && !terminal) {
    // An intermediate state (or NotFound) by event: recorded, the poll schedule left alone. A
    // resend after NotFound is decided by a poll only: an event may be late or out of order.
    if (status.state !== batch.upstreamState && status.state !== 'NotFound')
      store.batches.updateBatch(batch.id, { upstreamState: status.state });
    return 'waiting';
  }
  if (terminal) {
    store.batches.finishBatch(batch.id, status, new Date(now()).toISOString());
    if (
      batch.mode === 'presigned' &&
      status.processed !== undefined &&
      status.processed > batch.scanCount
    ) {
      // A pre-signed batch may be PUT twice to its one address: safe only because the address
      // takes one upload (§4.4, §8). A service that took both shows it here, under the one
      // requestId (§4.5): more scans processed than the batch holds. Counted, not hidden.
      store.batches.updateBatch(batch.id, {}, { possibleDuplicate: true });
      logger.warn(
        {
          batchId: batch.id,
          requestId: batch.requestId,
          scans: batch.scanCount,
          processed: status.processed,
        },
        'the service processed more scans than the pre-signed batch holds: it took a second upload to a single-use address (counted as a possible duplicate)',
      );
    }
    const log = status.state === 'Success' ? logger.info.bind(logger) : logger.warn.bind(logger);
    const reasons = [...new Set((status.failures ?? []).map((f) => f.reason))].slice(0, 5);
    log(
      {
        batchId: batch.id,
        requestId: batch.requestId,
        state: status.state,
        processed: status.processed,
        failed: status.failed,
        ...(status.state !== 'Success' && status.description
          ? { description: status.description }
          : {}),
        ...(reasons.length > 0 ? { reasons } : {}),
        // Sent again after a lost answer: the service's status is known now, so it no longer counts.
        ...(batch.possibleDuplicate > 0 ? { possibleDuplicateCleared: true } : {}),
        source,
      },
      'batch processed',
    );
    return 'done';
  }
  const sinceUpload = now() - Date.parse(batch.uploadedAt ?? new Date(now()).toISOString());
  if (status.state === 'NotFound' && sinceUpload > config.notFoundGraceMs) {
    if (batch.mode === 'direct') {
      // The service gave a requestId, then forgot it: send again, and say so.
      store.batches.updateBatch(
        batch.id,
        { state: 'ready', requestId: null, nextAttemptAt: 0 },
        { possibleDuplicate: true },
      );
    } else {
      // Back to the pre-signed step: it asks once more, then PUTs to the same address if valid, else a new one.
      store.batches.updateBatch(batch.id, { state: 'presigned', nextAttemptAt: 0 });
    }
    logger.warn(
      { batchId: batch.id, requestId: batch.requestId, graceMs: config.notFoundGraceMs },
      'the service does not know an uploaded batch; sending it again',
    );
    options.onResend();
    return 'resend';
  }
  const interval = Math.min(
    config.statusPollMaxMs,
    Math.round(config.statusPollMs * 1.5 ** (batch.polls + 1)),
  );
  store.batches.updateBatch(batch.id, {
    polls: batch.polls + 1,
    nextAttemptAt: now() + interval,
    upstreamState: status.state,
  });
  return 'waiting';
}
