import type { DeliveryConfig } from '../config/schema.js';
import type { Logger } from '../log.js';
import type { BufferStore } from '../buffer/store.js';
import type { Batcher } from './batcher.js';
import type { BatchThread } from './batch-thread.js';
import type { Circuit } from './circuit.js';
import type { DeliveryApi } from './types.js';
import type { SftpConnector } from '../upstream/sftp-client.js';
import type { Clock } from '../clock.js';
import type { ErrorKind } from './upload-errors.js';

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
  /** Reads large direct bodies off the event loop (batch-thread.ts); without it, in process. */
  thread?: BatchThread;
  /** Counts failures in a row and draws the backoff. */
  circuit: Circuit;
  /** A batch became `uploaded` (or waits for its status): status tracking should look now. */
  onUploaded: () => void;
  /** A step failed on a full disk (SQLITE_FULL): the disk guard releases its reserve and prunes. */
  onDiskFull?: (err: unknown) => void;
  /** The SFTP route: how to reach the server and name the files. Needed by `sftp` batches. */
  sftp?: { connector: SftpConnector; siteId: string; fileNameTemplate: string };
}
