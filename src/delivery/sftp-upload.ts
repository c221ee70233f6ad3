import type { BatchRow } from '../buffer/store.js';
import { transferBatch } from './sftp-transfer.js';
import type { UploaderOptions } from './uploader-options.js';

/**
 * Sends an SFTP batch by the crash-safe transfer (sftp-transfer.ts). The batch is `uploading`
 * while its `.part` file is written; once the file is renamed and its size verified (or found
 * complete after a crash), it is `uploaded` and the status tracker ends it in `transferred`.
 */
export async function uploadSftp(
  batch: BatchRow,
  options: UploaderOptions,
  setLastSuccess: (at: string) => void,
): Promise<void> {
  const { store, logger } = options;
  const sftp = options.sftp;
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
  options.circuit.succeeded();
  const at = new Date(options.now()).toISOString();
  store.batches.updateBatch(batch.id, {
    state: 'uploaded',
    uploadedAt: at,
    nextAttemptAt: 0,
    lastError: null,
  });
  setLastSuccess(at);
  options.onUploaded();
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
