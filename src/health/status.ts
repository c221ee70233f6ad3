import type { PrunedWords } from '../format/scan-counts.js';
import type { StatusEventsStatus } from '../delivery/status-events.js';
import type { HealthProblem } from './derive.js';
import type { ListenerTlsStatus } from '../listener/listener-tls.js';

/**
 * The shape of `GET /api/v1/status`: everything the health page shows, as JSON. Composed by
 * `composeStatus` (compose-status.ts) from the parts' snapshots the app gathers; read by the page, the
 * metrics and the readiness check. Documented field by field in docs/operations.md. Times are ISO
 * 8601 UTC instants (`…Z`); the page shows them in `site.timezone`. Durations are in ms unless the
 * name says otherwise. Fields may be added; none is removed or renamed within `v1`.
 */
export interface GatewayStatus {
  /** `ok`; `degraded` (working, but something needs a look: see `reasons`); `down` (reads cannot be buffered). */
  state: 'ok' | 'degraded' | 'down';
  /** Why the state is not `ok`, one sentence each, for people: the sentences of the `down` and `degraded` entries of {@link healthProblems}. */
  reasons: string[];
  /**
   * Every problem health found (src/health/derive.ts), worst first: a sentence, its stable code
   * (docs/errors.md), what to do, since when, and the technical detail. `info` entries do not
   * change the state. (Not `problems`: that name holds the latest rejections and failures.)
   */
  healthProblems?: HealthProblem[];
  /** What happened in the last `windowMs` (one hour): reads received, reads rejected, files moved to `failed/`, scans refused by the service. */
  recent?: RecentView;
  /** `starting` until every part is up, `running`, then `stopping` once a stop began. */
  phase?: 'starting' | 'running' | 'stopping';
  /** When this status was put together (the page computes ages from it, not from the browser's clock). */
  generatedAt?: string;
  site: { id: string; timezone: string };
  version: string;
  startedAt: string;
  uptimeSec: number;
  config: ConfigStatus;
  buffer: BufferStatus;
  delivery: DeliveryStatusView;
  inputs: InputStatusView[];
  /** The latest batches, newest first. */
  batches: BatchView[];
  /** The latest rejected reads and scans that failed upstream, newest first. */
  problems: ProblemView[];
  /** Open container sessions (parent references per station), when the configuration uses them. */
  sessions?: Array<Record<string, unknown>>;
  /**
   * Status events (contract §6), when `upstream.statusEvents.enabled`: the consumer's
   * state (`starting`, `connecting`, `flowing`, `lagging`, `down`), the last failure with its code, counters
   * since start (received, applied, duplicates, ignored, invalid), the lag and the last event.
   */
  statusEvents?: StatusEventsStatus;
  /**
   * The local server itself: its certificate when it serves HTTPS (`http.tls`: subject, serial,
   * end and days left, reloads applied and refused), and the tokens that cross the network in
   * clear text when it listens beyond loopback over plain HTTP.
   */
  listener?: ListenerStatusView;
  /** Whether admin actions are enabled (an admin token is configured), and which. */
  admin?: { enabled: boolean; actions: AdminActionName[] };
  /** Parts may add fields; the page shows unknown lists and objects generically. */
  [extra: string]: unknown;
}

export interface ListenerStatusView {
  tls?: ListenerTlsStatus;
  /** `read token`, `admin token`, `ingest token of input <id>`: empty on loopback or with TLS. */
  tokensInClear: string[];
}

export interface RecentView {
  windowMs: number;
  reads: number;
  rejections: number;
  filesRefused: number;
  failedScans: number;
}

export type AdminActionName = 'retry' | 'pause' | 'resume' | 'replay' | 'close-container';

export interface ConfigStatus {
  /** Path of the configuration file in use. */
  file: string;
  /** When the configuration in use was loaded. */
  loadedAt: string;
  /** The last reload that was refused, when the running configuration is older than the file. */
  lastReloadError?: { message: string; at: string };
  [extra: string]: unknown;
}

export interface BufferStatus {
  /** SQLite file of the buffer. */
  path: string;
  /** Scans not yet in a batch. */
  pendingScans: number;
  /**
   * Scans waiting for delivery: pending, or in a batch the service has not finished (what the quota
   * counts). Held scans are not in it: see {@link heldScans}. The page calls these "waiting".
   */
  undeliveredScans: number;
  /** Scans of batches the service refused as a whole, kept and not delivered (not replayed). */
  heldScans?: number;
  /**
   * Age of the oldest scan not yet delivered (waiting for a batch, or in a batch the service has
   * not finished), in ms; null when every scan is delivered. It keeps growing while delivery is
   * stuck, also once every scan is in a batch.
   */
  oldestPendingAgeMs: number | null;
  /**
   * Scans in the buffer now by state (`pending`, `batched`, `delivered`, `failed`, `held`, and
   * `replayed`: dead letters a replay replaced), as `scan-gateway buffer stats` counts them.
   * `delivered` counts the delivered scans still kept (the audit trail), not all ever delivered:
   * those pruned are in {@link pruned}.
   */
  scans: Record<string, number>;
  /**
   * What pruning removed from the buffer, lifetime (kept in the buffer, so across restarts; counted
   * from the gateway version that writes it on), as `buffer stats` shows it: `deliveredScans`
   * (past the audit period or early), `deliveredScansEarly` (of them, before the end of their audit
   * period: disk low, `buffer prune`), `deadLetters` (replayed dead letters removed with their
   * replacements). Absent from a status composed without the buffer's counts.
   */
  pruned?: PrunedWords;
  /** Bytes of the database file and its write-ahead log on disk. */
  fileBytes?: number;
  /** Bytes of the undelivered scans' JSON, when the buffer counts them. */
  undeliveredBytes?: number;
  /** Quota on undelivered data, when configured. */
  quotaBytes?: number;
  quotaScans?: number;
  /** Intake paused by back-pressure (inputs that can wait are not reading). */
  intakePaused?: boolean;
  /** The last failed commit of reads; present while commits fail. */
  lastCommitError?: { message: string; at: string };
  /**
   * The disk guard (src/buffer/disk-guard.ts): free bytes on the buffer's file system, the mark
   * below which delivered scans are pruned early, the reserve, and how many were pruned early.
   */
  disk?: {
    freeBytes?: number;
    lowFreeBytes: number;
    reserveBytes: number;
    reserveReleased: boolean;
    prunedEarlyScans: number;
    lastEarlyPrune?: { at: string; scans: number };
    /** Early prunes of the last audit period, remembered in the buffer: count, span of read times, the latest's time and reason. */
    auditLost?: {
      scans: number;
      firstReadAt?: string;
      lastReadAt?: string;
      at: string;
      reason: string;
    };
    /** Set while free space is low and pruning cannot help (nothing was pruned): why. */
    pruneCannotHelp?: string;
    /** Batches finished within this many hours are never pruned early (`buffer.earlyPruneKeepHours`). */
    keepRecentHours?: number;
    vacuumPending?: string;
    quotaTooLarge?: string;
    derivedQuotaBytes?: number;
    /** How long the free space lasts at the last day's rate of scans, none delivered (src/buffer/runway.ts). */
    runway?: {
      days: number;
      scansPerDay: number;
      bytesPerScan: number;
      windowMs: number;
      text: string;
    };
  };
  [extra: string]: unknown;
}

export interface DeliveryStatusView {
  /** Configured mode: `direct`, `presigned` or `auto`. */
  mode?: string;
  /** Delivery paused by an operator (admin action); nothing is uploaded until resumed. */
  paused?: boolean;
  /** `closed` (uploads flow), `open` (waiting out a backoff after repeated failures), `half-open` (trying again). */
  circuit?: string;
  consecutiveFailures?: number;
  lastSuccessAt?: string;
  /** The last failed upload: its message (technical), when, the batch, its kind and stable code. */
  lastError?: { message: string; at: string; batchId?: number; kind?: string; code?: string };
  nextRetryAt?: string;
  /** When the first of the failures in a row happened: when an outage began. */
  failingSince?: string;
  /** Scans sent again after an upload's answer was lost whose batch's status is not known yet (the service may hold them twice). */
  possibleDuplicates?: number;
  /** The cached access token's expiry and how many tokens were obtained since start. Never the token. */
  token?: { expiresAt?: string; refreshes: number };
  [extra: string]: unknown;
}

export interface InputStatusView {
  id: string;
  type: string;
  /** `starting`, `connecting`, `up`, `waiting for reader`, `down`, `paused` or `stopped`. */
  state: string;
  /** Its name for people (`name` in the configuration). */
  name?: string;
  /** TCP in server mode: readers connected now (address, since when), and how many should be. */
  readers?: { count: number; expected: number; connected: { address: string; since: string }[] };
  source?: string;
  lastError?: string;
  lastErrorAt?: string;
  /**
   * Since the gateway started: reads, scans, no-reads, rejections, duplicates, bytes, the last
   * read's time, and (MQTT) `redelivered`: resends of messages committed before, acknowledged only.
   */
  counters?: {
    reads: number;
    scans: number;
    noReads: number;
    rejections: number;
    duplicates: number;
    redelivered?: number;
    bytes: number;
    lastReadAt?: string;
  };
  /** A file being read and committed in chunks (files input): its name, items committed so far, its size. */
  progress?: { file: string; rows: number; bytes: number; startedAt: string };
  [extra: string]: unknown;
}

export interface BatchView {
  id: number;
  mode: string;
  /** Gateway-side state: `ready`, `uploading`, `presigned`, `uploaded`, `done`, `held`. */
  state: string;
  scanCount: number;
  bytes: number;
  requestId: string | null;
  /** The service's state once known: `Received`, `InProgress`, `Success`, `HasFailures`, `Failed`, `NotFound`. */
  upstreamState: string | null;
  failed: number | null;
  lastError?: string | null;
  createdAt: string;
  uploadedAt?: string | null;
  finishedAt?: string | null;
  [extra: string]: unknown;
}

export interface ProblemView {
  /** `rejected`: the gateway could not make a scan of the read; `failed`: the service refused the scan. */
  kind: string;
  inputId: string;
  reference?: string | null;
  reason: string;
  /** The read as received, printable: control bytes as `<GS>`, `<CR>`…, other bytes as `\xNN`. */
  raw: string;
  at: string;
  origin?: string | null;
  [extra: string]: unknown;
}
