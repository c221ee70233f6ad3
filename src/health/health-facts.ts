/**
 * The shapes of the health rules (src/health/derive.ts): the facts they read, the problems they
 * word, and the thresholds they compare with. Types and defaults only, so the callers that gather
 * facts or tune thresholds need not load the rules.
 */

/** How bad a problem is: `down` (reads cannot be buffered), `degraded` (needs a look), `info` (worth knowing; the state stays `ok`). */
export type Severity = 'down' | 'degraded' | 'info';

/** One problem, for people: what is wrong (a sentence), its stable code, and what to do. */
export interface HealthProblem {
  /** Stable code (`SCANGW_E_…` or `SCANGW_H_…`), listed in docs/errors.md. */
  code: string;
  severity: Severity;
  /** One sentence a shift supervisor understands; no error text of a library in it. */
  sentence: string;
  /** What to do, from the catalogue (src/error-catalogue.ts), Markdown. */
  hint: string;
  /**
   * ISO 8601 instant the condition began, when known (a full disk, a refused reload, the oldest
   * stuck batch). Not the time of the latest failure: that is in the part's own status.
   */
  since?: string;
  /** The technical message behind it (an errno, an HTTP answer), for IT; the page folds it away. */
  detail?: string;
}

/** The outcome of {@link deriveHealth}. */
export interface DerivedHealth {
  state: 'ok' | 'degraded' | 'down';
  /** Worst first (down, degraded, info), then in rule order. */
  problems: HealthProblem[];
}

/** Every signal the rules read. Counts are whole numbers; instants ISO 8601; ages in ms. */
export interface HealthFacts {
  inputs: ReadonlyArray<{
    id: string;
    type: string;
    state: string;
    lastError?: string | undefined;
    lastErrorAt?: string | undefined;
    /** An input readers connect to: how many are, and how many should be. */
    readers?: { count: number; expected: number } | undefined;
  }>;
  delivery?: {
    paused: boolean;
    circuit: string;
    consecutiveFailures: number;
    /** When the first of the failures in a row happened: when the outage began. */
    failingSince?: string | undefined;
    /** `kind`: token, network, auth, answer, http, sftp (src/delivery/deliverer.ts). */
    lastError?:
      | { message: string; at: string; kind?: string | undefined; code?: string | undefined }
      | undefined;
    stepError?: { message: string; at: string; diskFull: boolean } | undefined;
    statusChecks?:
      | {
          consecutiveFailures: number;
          lastError?: { message: string; at: string; code?: string | undefined } | undefined;
        }
      | undefined;
  };
  buffer: {
    /** Scans on their way: not in a batch yet, or in a batch the service has not finished. */
    waitingScans: number;
    /** Age of the oldest waiting scan, ms; null when none waits. */
    oldestWaitingAgeMs: number | null;
    /** Scans of batches the service refused as a whole (not replayed). */
    heldScans: number;
    /** Scans the service refused one by one, not replayed (dead letters), however old. */
    failedScans: number;
    /** The last failed commit of reads, while commits fail. */
    commitError?: { message: string; at: string } | undefined;
    /** Quota level of the undelivered data (src/buffer/back-pressure.ts). */
    quota?:
      | {
          level: 'ok' | 'paused' | 'full';
          usedRatio: number;
          undeliveredScans: number;
          maxPendingScans: number;
          diskFull?: { since: string; message: string } | undefined;
        }
      | undefined;
    /** The disk guard (src/buffer/disk-guard.ts): delivered scans pruned early under disk pressure, since start. */
    disk?:
      | {
          prunedEarlyScans: number;
          lastEarlyPrune?: { at: string; scans: number } | undefined;
          lowFreeBytes: number;
          /** Early prunes of the last audit period, remembered in the buffer (disk-guard.ts `auditLost`). */
          auditLost?:
            | {
                scans: number;
                firstReadAt?: string | undefined;
                lastReadAt?: string | undefined;
                at: string;
                reason: string;
              }
            | undefined;
          /** Free space is low and pruning cannot restore it: nothing was pruned. */
          pruneCannotHelp?: string | undefined;
        }
      | undefined;
  };
  /** What happened in the last {@link HealthThresholds.windowMs} (src/queries/recent-activity.ts `recentActivity`). */
  recent: {
    /** Reads received in the window (rejections included). */
    reads: number;
    /** Reads that could not be made into scans in the window (file-level refusals not included). */
    rejections: number;
    /** Rejections in the window by input, most first. */
    rejectionsByInput: ReadonlyArray<{ inputId: string; count: number }>;
    /** Scans the service refused in the window (batches finished in it), not replayed. */
    failedScans: number;
    /** Files moved to `failed/` in the window, newest first (a bounded list) and how many. */
    filesRefused: ReadonlyArray<{ inputId: string; file: string; reason: string; at: string }>;
    filesRefusedCount: number;
  };
  /**
   * Containers closed short of their `members` in the window (a new label, a closing code, idle;
   * not a supervisor's close), newest first (src/buffer/containers.ts).
   */
  containersIncomplete?:
    | ReadonlyArray<{
        container: string;
        station: string;
        parent: string;
        members: number;
        expected?: number | undefined;
        closedAt?: string | undefined;
        why?: string | undefined;
      }>
    | undefined;
  /** Batches not finished {@link HealthThresholds.stuckBatchMs} after they were formed. */
  stuckBatches: ReadonlyArray<{
    id: number;
    state: string;
    requestId: string | null;
    createdAt: string;
  }>;
  /**
   * Batches sent whose status the service has not given, or gave as `NotFound`, past
   * `delivery.notFoundGraceMs` from their upload (`graceMs`): found or sent again by then normally.
   */
  batchesPastGrace?:
    | {
        graceMs: number;
        batches: ReadonlyArray<{ id: number; requestId: string | null; uploadedAt: string }>;
      }
    | undefined;
  products?: { state: string; missing: ReadonlyArray<{ key: string }> } | undefined;
  /** The status-event consumer (src/delivery/status-events.ts), when enabled. */
  statusEvents?:
    | {
        state: string;
        since: string;
        lag: number;
        lastError?: { code: string; message: string; at: string } | undefined;
      }
    | undefined;
  config?: {
    lastReloadError?: { message: string; at: string } | undefined;
    needsRestart?: readonly string[] | undefined;
  };
  /** The local server: its certificate's days left and last refused reload (`http.tls`), the tokens it sends in clear text. */
  listener?: {
    tls?:
      | {
          daysLeft: number;
          certificate: { validTo: string; serialNumber: string };
          lastRefusal?: { at: string; message: string } | undefined;
        }
      | undefined;
    tokensInClear: readonly string[];
  };
}

/** Thresholds of the rules; {@link HEALTH_THRESHOLDS} holds the defaults. */
export interface HealthThresholds {
  /** The window of "recently", in ms. */
  windowMs: number;
  /** Share of rejected reads in the window at which health degrades… */
  rejectionRate: number;
  /** …once at least this many reads came in the window (a few misreads in a quiet hour are no trend). */
  minReadsForRate: number;
  /** Scans refused upstream in the window that degrade health. */
  failedScans: number;
  /** Held scans that degrade health. */
  heldScans: number;
  /** Files refused in the window that degrade health. */
  filesRefused: number;
  /** Status checks failed in a row that degrade health (single ones happen: a 429, a timeout). */
  statusCheckFailures: number;
  /** Age of an unfinished batch that counts as stuck, in ms. */
  stuckBatchMs: number;
  /** Age of the oldest waiting scan that counts as delivery falling behind, in ms. */
  oldestWaitingMs: number;
  /** Days left on the local server's certificate below which health degrades. */
  certificateDays: number;
}

/** The defaults: a shop floor delivers within seconds; an hour is the window a shift looks back on. */
export const HEALTH_THRESHOLDS: HealthThresholds = {
  windowMs: 60 * 60_000,
  rejectionRate: 0.1,
  minReadsForRate: 20,
  failedScans: 1,
  heldScans: 1,
  filesRefused: 1,
  statusCheckFailures: 3,
  stuckBatchMs: 30 * 60_000,
  oldestWaitingMs: 15 * 60_000,
  certificateDays: 14,
};
