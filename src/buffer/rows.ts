import type { Read } from '../shapes/read.js';

/**
 * The rows the buffer stores and answers with (shapes only), apart from the classes that hold the
 * SQL so that other rooms can read the shapes. The buffer defines its own shapes of what it is
 * given (a committed record) or takes them from the floor below every room that holds them (a
 * read, src/shapes/): it imports neither the inputs nor the mapping, and intake (src/intake/)
 * adapts their types to these.
 */

/**
 * A read as the buffer stores it and gives it back for replay (replay.ts): the `Read` of the
 * inputs itself (src/shapes/read.ts), so a read rebuilt from its row is one the mapping can map
 * again.
 */
export type StoredRead = Read;

/** One read as it is committed: its raw bytes, its outcome and, for a scan, the serialized Scan. */
export interface IntakeRecord {
  inputId: string;
  receivedAt: Date;
  raw: Buffer;
  sourceTime?: string;
  /** The DCP the source named (`Read.dcpKey`); kept apart from the mapped DCP so replay maps it again. */
  dcpKey?: string;
  /** Parents and attributes the source supplied (`Read.parents`, `Read.attributes`), kept for replay. */
  parents?: string[];
  attributes?: Record<string, string>;
  origin?: Record<string, string | number>;
  outcome: 'scan' | 'rejected' | 'noRead' | 'duplicate';
  reason?: string;
  /** Containers the read changed (opened, a member more, closed), written in its transaction. */
  containers?: readonly ContainerRow[];
  /** True for an input-level rejection (nothing could be framed or parsed into a read). */
  inputLevel?: boolean;
  /**
   * High availability: the read came in a message the broker sent again (MQTT DUP) after a
   * takeover, so the previous leader may have committed it too (docs/high-availability.md).
   */
  possibleDuplicate?: boolean;
  /**
   * `bytes`: UTF-8 length of `body` (what the quota counts), when the caller knows it already.
   * `gs1`: the read's GS1 elements when the caller parsed it already (empty: not valid GS1 data),
   * so its keys are indexed without parsing it again (item-keys.ts).
   */
  scan?: {
    reference: string;
    dcpKey: string;
    instant: Date;
    body: string;
    bytes?: number;
    gs1?: readonly Gs1Pair[];
  };
}

/**
 * A container as the buffer keeps it (table `containers`): the mapping's `ContainerChange`
 * (src/mapping/container-sessions.ts), field for field. One row per container opened at a
 * station; each change replaces the row.
 */
export interface ContainerRow {
  container: string;
  per: 'input' | 'dcp';
  station: string;
  parent: string;
  openedAt: string;
  lastReadAt: string;
  members: number;
  expected?: number;
  state: 'open' | 'complete' | 'incomplete' | 'closed' | 'abandoned';
  closedAt?: string;
  why?: string;
  by?: string;
  memberRefs?: string[];
}

/** One GS1 element of a read: the AI and its value as carried. */
export interface Gs1Pair {
  readonly ai: string;
  readonly value: string;
}

/** A file whose items are committed in the same transaction, so reading it again is recognised. */
export interface CommittedFile {
  inputId: string;
  /** Hash of the file's content (e.g. SHA-256, hex). */
  hash: string;
  name?: string;
  /** Items of the file committed so far (with this commit). */
  items: number;
  /**
   * More chunks of the file are to come: only its progress (`items`) is recorded, in
   * `file_progress`. Without it the file is complete: its progress row goes and, unless `remember`
   * is false, it is recorded in `files`.
   */
  inProgress?: boolean;
  /** False: the complete file is not recorded in `files` (the input does not remember contents). */
  remember?: boolean;
}

/**
 * The identity of a QoS 1 MQTT message committed in the same transaction as its read, so that the
 * broker's resend of it (DUP flag, same packet id) after a crash or a lost connection is
 * recognised (docs/inputs.md, "mqtt", "Exactly once across crashes").
 */
export interface CommittedMessage {
  inputId: string;
  /** MQTT packet identifier, 1..65535; unique among the session's unacknowledged messages. */
  packetId: number;
  topic: string;
  /** SHA-256 of the whole payload (32 bytes). */
  payloadSha256: Buffer;
}

/** How a batch goes: POST (§4.3), pre-signed PUT (§4.4–4.5), or SFTP file transfer (§4.7). */
export type BatchMode = 'direct' | 'presigned' | 'sftp';
export type BatchState = 'ready' | 'uploading' | 'presigned' | 'uploaded' | 'done' | 'held';

/** A batch row (see migrations.ts), in camelCase. */
export interface BatchRow {
  id: number;
  mode: BatchMode;
  state: BatchState;
  scanCount: number;
  bytes: number;
  requestId: string | null;
  presignedUrl: string | null;
  presignedExpiresAt: number | null;
  /** When a PUT to the current pre-signed address started (ms): it may have reached the service. */
  putStartedAt: number | null;
  attempts: number;
  nextAttemptAt: number;
  lastError: string | null;
  /** How many times this batch was sent again after an upload whose answer was lost. */
  possibleDuplicate: number;
  createdAt: string;
  uploadedAt: string | null;
  finishedAt: string | null;
  upstreamState: string | null;
  description: string | null;
  processed: number | null;
  failed: number | null;
  polls: number;
  /** SFTP: the batch's remote file (folder and fixed name), set before its first transfer. */
  remotePath: string | null;
  /** SFTP: SHA-256 (hex) of the batch body, kept for audit. */
  sha256: string | null;
}

/** Scans not yet delivered, kept exact by triggers (migration 2). Bytes are the scans' JSON bytes. */
export interface BufferTotals {
  /** Not yet in a batch. */
  pendingScans: number;
  pendingBytes: number;
  /** Pending, or in a batch the service has not finished: what the quota counts. */
  undeliveredScans: number;
  undeliveredBytes: number;
}

export const BATCH_COLUMNS = `id, coalesce(route, mode) AS mode, state, scan_count AS scanCount, bytes, request_id AS requestId,
  presigned_url AS presignedUrl, presigned_expires_at AS presignedExpiresAt, put_started_at AS putStartedAt,
  attempts, next_attempt_at AS nextAttemptAt, last_error AS lastError, possible_duplicate AS possibleDuplicate,
  created_at AS createdAt, uploaded_at AS uploadedAt, finished_at AS finishedAt,
  upstream_state AS upstreamState, description, processed, failed, polls, remote_path AS remotePath, sha256`;

/** A pending scan as the batcher packs it: its id, reference and serialized bytes. */
export interface PendingScanRow {
  id: number;
  reference: string;
  bytes: number;
}

/**
 * The head of the queue summed up (`Batches.pendingHead`, batches.ts): how many pending scans, how many
 * distinct references among them, the sum of their stored JSON lengths, the first and last id
 * (null when none is pending).
 */
export interface PendingHead {
  scans: number;
  references: number;
  scanBytes: number;
  firstId: number | null;
  lastId: number | null;
}

/**
 * A stretch of the pending queue in id order: `count` pending scans from id `first` to id `last`
 * (other states may lie between), their stored JSON lengths summing to `scanBytes`.
 */
export interface PendingSpan {
  first: number;
  last: number;
  count: number;
  scanBytes: number;
}

/** Bytes of `[a,b,c]` for scans whose serialized lengths sum to `sum`: brackets plus n-1 commas. */
export function arrayBytes(count: number, sum: number): number {
  return count === 0 ? 2 : 2 + sum + (count - 1);
}
