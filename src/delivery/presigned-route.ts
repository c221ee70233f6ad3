import type { BatchRow } from '../buffer/store.js';
import { PRESIGNED_VALIDITY_MS } from '@scan-gateway/contract';
import { threadWritesEnded } from './batch-thread.js';
import { batchBodyChunks } from './sftp-transfer.js';
import type { UploaderOptions } from './uploader.js';

/**
 * The pre-signed route of the uploader (uploader.ts) (contract §4.4, §4.5): ask for an address, PUT the
 * batch there, and after a crash or a lost answer find out from the status endpoint whether an
 * earlier PUT arrived before sending again. The uploader decides when a batch goes and what a
 * failure means; this decides what one pre-signed attempt sends.
 */

/** A pre-signed address this close to its expiry is not used for a PUT any more, in ms. */
const ADDRESS_MARGIN_MS = 60_000;

/** Outcome of one pre-signed attempt: sent (or found already sent), or left to the status poll. */
export type PresignedOutcome = { requestId: string; uploadedAt?: number } | { waitForStatus: true };

/** The pre-signed step in progress of one upload, so a failure is pinned on the right call. */
export type PresignedStep = { current: 'status' | 'address' | 'put' | 'reput' | undefined };

/** Runs pre-signed attempts for the uploader, on the same buffer, API, settings and clock. */
export class PresignedRoute {
  constructor(
    private readonly options: Pick<
      UploaderOptions,
      'store' | 'api' | 'logger' | 'config' | 'now' | 'thread'
    >,
  ) {}

  /**
   * Pre-signed flow (contract §4.4, §4.5): the requestId is written down before any data is sent,
   * and the start of each PUT too, so after a crash or a lost answer the status endpoint says
   * whether the data arrived. A requestId the service knows is never sent again.
   *
   * An unknown one is PUT again at once to the same address while it is valid (not within
   * `ADDRESS_MARGIN_MS` of its expiry): the address takes one upload (§4.4, §8 "pre-signed address
   * uses: once"), so the second PUT is accepted only if the first never arrived and refused (403)
   * if it did. It cannot double, so it needs no grace: the uploader's retry backoff alone paces it.
   * Only a resend under a new address and requestId, after a PUT that may have arrived, can
   * duplicate: it waits `notFoundGraceMs` from that PUT (the service may show an upload late) and
   * is counted as a possible duplicate.
   *
   * @returns `{ requestId, uploadedAt }` (ms since the epoch: when the PUT that counts started)
   *   once the data was sent or found sent; `{ waitForStatus: true }` when the batch was moved to
   *   `uploaded` to wait out the grace by polling.
   * @throws the client's `GatewayError` of the failed call; `step.current` names that call.
   */
  async uploadPresigned(batch: BatchRow, step: PresignedStep): Promise<PresignedOutcome> {
    const { store, api, logger, config } = this.options;
    let current = store.batches.batch(batch.id) ?? batch;
    step.current = undefined;
    let mayHaveArrived = false;
    let reuse = false;
    if (current.requestId && current.putStartedAt !== null) {
      step.current = 'status';
      const status = await api.getScanStatus(current.requestId);
      if (status.state !== 'NotFound') {
        logger.info(
          { batchId: batch.id, requestId: current.requestId },
          'pre-signed upload had arrived; not sending it again',
        );
        return { requestId: current.requestId, uploadedAt: current.putStartedAt };
      }
      if (this.usable(current)) {
        // §4.4/§8: the address takes one upload, so a second PUT is its own proof: no grace needed.
        reuse = true;
      } else if (this.options.now() - current.putStartedAt < config.notFoundGraceMs) {
        // A new address would be needed, and a new requestId can double what the service shows
        // late: wait out the grace window by polling first.
        await threadWritesEnded(this.options.thread);
        store.batches.updateBatch(batch.id, {
          state: 'uploaded',
          uploadedAt: new Date(current.putStartedAt).toISOString(),
          nextAttemptAt: this.options.now() + config.statusPollMs,
        });
        logger.info(
          { batchId: batch.id, requestId: current.requestId },
          'pre-signed upload may have arrived and its address cannot be used again; polling its status before sending it under a new one',
        );
        return { waitForStatus: true };
      } else {
        mayHaveArrived = true;
      }
    }
    if (reuse) {
      logger.warn(
        { batchId: batch.id, requestId: current.requestId, attempt: current.attempts + 1 },
        'the service does not show the pre-signed upload; sending it again to the same single-use address (a refusal means the first one had arrived)',
      );
    } else if (!current.requestId || !this.usable(current)) {
      const issuedAt = this.options.now();
      step.current = 'address';
      const address = await api.requestPresignedUpload();
      await threadWritesEnded(this.options.thread);
      store.batches.updateBatch(
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
          {
            batchId: batch.id,
            previousRequestId: current.requestId,
            requestId: address.requestId,
            scans: batch.scanCount,
          },
          'the service never showed the earlier pre-signed upload; sending it again under a new address (counted as a possible duplicate)',
        );
      }
      current = store.batches.batch(batch.id) ?? current;
    }
    await threadWritesEnded(this.options.thread);
    const started = this.options.now();
    store.batches.updateBatch(batch.id, { attempts: current.attempts + 1, putStartedAt: started });
    step.current = reuse ? 'reput' : 'put';
    if (api.putPresignedStream) {
      // Streamed from the buffer page by page: up to 64 MiB per batch, and several
      // batches in flight, never whole in memory. Its scans stay put while it is in flight: only
      // this upload's own outcome (split, hold) changes them.
      await api.putPresignedStream(current.presignedUrl!, {
        bytes: current.bytes,
        chunks: () => batchBodyChunks(store.batches, batch.id),
      });
    } else {
      await api.putPresigned(current.presignedUrl!, store.batches.batchBodyBytes(batch.id));
    }
    return { requestId: current.requestId!, uploadedAt: started };
  }

  /**
   * Whether `row`'s address may take a PUT now: there is one, and it is not within
   * `ADDRESS_MARGIN_MS` of its expiry (§8: valid 30 minutes), so a PUT started now ends before it.
   */
  private usable(row: BatchRow): boolean {
    if (row.presignedUrl === null) return false;
    return (
      row.presignedExpiresAt === null ||
      row.presignedExpiresAt - ADDRESS_MARGIN_MS > this.options.now()
    );
  }
}
