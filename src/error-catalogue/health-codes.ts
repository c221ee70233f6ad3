import type { CatalogueEntry } from '../error-catalogue.js';

/**
 * The `SCANGW_H_…` codes: health conditions that are no thrown error (scans held, files refused,
 * a high rejection rate…), raised by the rules of src/health/derive.ts.
 */
export const HealthCodes = {
  /** An operator paused delivery (admin action). */
  DELIVERY_PAUSED: 'SCANGW_H_DELIVERY_PAUSED',
  /** The oldest undelivered scan is older than the threshold while uploads are not failing. */
  DELIVERY_BEHIND: 'SCANGW_H_DELIVERY_BEHIND',
  /** Batches not finished long after they were formed or sent. */
  BATCHES_STUCK: 'SCANGW_H_BATCHES_STUCK',
  /** A sent batch the service has not confirmed (no status, or NotFound) past its status grace. */
  BATCH_STATUS_OVERDUE: 'SCANGW_H_BATCH_STATUS_OVERDUE',
  /** Status checks of sent batches fail in a row. */
  STATUS_CHECKS_FAILING: 'SCANGW_H_STATUS_CHECKS_FAILING',
  /** Scans of batches the service refused as a whole, kept and not delivered. */
  SCANS_HELD: 'SCANGW_H_SCANS_HELD',
  /** Scans the service refused one by one (dead letters). */
  SCANS_FAILED: 'SCANGW_H_SCANS_FAILED',
  /** Dropped files moved to `failed/`. */
  FILES_REFUSED: 'SCANGW_H_FILES_REFUSED',
  /** A large share of reads could not be made into scans. */
  REJECTION_RATE: 'SCANGW_H_REJECTION_RATE',
  /** A container with `members` was closed short of them (`onIncomplete: close`, a closing code, idle). */
  CONTAINER_INCOMPLETE: 'SCANGW_H_CONTAINER_INCOMPLETE',
  /** Undelivered scans near or at the buffer quota. */
  BUFFER_QUOTA: 'SCANGW_H_BUFFER_QUOTA',
  /** Product keys in use that the upstream product list does not hold. */
  PRODUCTS_UNKNOWN: 'SCANGW_H_PRODUCTS_UNKNOWN',
  /** Changed settings that take effect only after a restart. */
  RESTART_NEEDED: 'SCANGW_H_RESTART_NEEDED',
  /** The status-event consumer is far behind the end of its topic; polling runs at its normal pace meanwhile. */
  EVENTS_LAGGING: 'SCANGW_H_EVENTS_LAGGING',
  /** Delivered scans were pruned before their audit period ended because the buffer's disk ran low. */
  AUDIT_PRUNED_EARLY: 'SCANGW_H_AUDIT_PRUNED_EARLY',
  /** The buffer's disk is low and pruning delivered scans cannot free the shortfall, so nothing was pruned. */
  BUFFER_DISK_LOW: 'SCANGW_H_BUFFER_DISK_LOW',
  /** The local server's TLS certificate has ended or ends within 14 days. */
  LISTENER_CERT_ENDING: 'SCANGW_H_LISTENER_CERT_ENDING',
  /** Tokens guard a local server that is reachable beyond loopback over plain HTTP: they cross the network in clear text. */
  TOKENS_IN_CLEAR: 'SCANGW_H_TOKENS_IN_CLEAR',
  /** An input readers connect to has fewer connected than its `expectReaders`. */
  INPUT_NO_READER: 'SCANGW_H_INPUT_NO_READER',
} as const;

export type HealthCode = (typeof HealthCodes)[keyof typeof HealthCodes];

/**
 * The `SCANGW_H_…` entries of the catalogue (see src/error-catalogue.ts), in the order of
 * `docs/errors.md`.
 */
export const HEALTH_ENTRIES: readonly CatalogueEntry[] = [
  {
    code: HealthCodes.DELIVERY_PAUSED,
    meaning: 'an operator paused delivery; nothing is uploaded, scans wait in the buffer',
    whatToDo:
      'press *Resume delivery* on the page, or `POST /api/v1/admin/resume`; a restart resumes too',
  },
  {
    code: HealthCodes.DELIVERY_BEHIND,
    meaning:
      'the oldest scan waiting for delivery is older than 15 minutes although uploads do not fail',
    whatToDo:
      'see *Delivery* and *Last batches* on the page; `scan-gateway queue` shows what waits by DCP and age',
  },
  {
    code: HealthCodes.BATCHES_STUCK,
    meaning:
      'a batch is not finished 30 minutes after it was formed: not sent yet, or sent and the service has not finished processing it',
    whatToDo:
      "give the batch's request id to the service operator; the gateway keeps asking by itself; `scan-gateway queue` lists the open batches",
  },
  {
    code: HealthCodes.BATCH_STATUS_OVERDUE,
    meaning:
      'a batch was sent, and the service has not confirmed it (no status yet, or NotFound) past `delivery.notFoundGraceMs` (120 s) from its upload; the gateway asks again at its normal pace, also while status events flow, and sends a batch the service does not know once more',
    whatToDo:
      "usually clears by itself within a poll; when it stays, give the batch's request id to the service operator and check *Status checks* on the page",
  },
  {
    code: HealthCodes.STATUS_CHECKS_FAILING,
    meaning:
      'asking the service whether sent batches succeeded fails (3 or more times in a row); uploads may go on, but their outcome is not known yet',
    whatToDo:
      'usually the same cause as an unreachable service (network, proxy); the checks retry by themselves',
  },
  {
    code: HealthCodes.SCANS_HELD,
    meaning:
      'the service refused whole batches for good (an HTTP 4xx such as 400); their scans are kept in the buffer and are not delivered',
    whatToDo:
      "`scan-gateway failures` shows the service's answer; fix the cause (configuration, mapping), then `scan-gateway replay --batch N`",
  },
  {
    code: HealthCodes.SCANS_FAILED,
    meaning:
      'the service refused single scans (a reason such as `Invalid DCP`); they are kept as dead letters',
    whatToDo:
      'see *Latest rejections and upstream failures* or `scan-gateway failures`; fix the DCP or product (configuration or upstream), then *Replay failed scans* or `scan-gateway replay --reason …`',
  },
  {
    code: HealthCodes.FILES_REFUSED,
    meaning:
      "a dropped file could not be taken as a whole (unreadable, wrong format, no barcode column…) and was moved to the input's `failed/` folder",
    whatToDo:
      "read `<name>.error.txt` beside the file in `failed/`, fix the export (or the input's `format`/`barcodeColumn`), then drop the file into the folder again",
  },
  {
    code: HealthCodes.CONTAINER_INCOMPLETE,
    meaning:
      'a container with a fixed `members` count (e.g. a module of 12 cells) was closed with fewer: a new label was scanned while it was short (`onIncomplete: close`), a closing code ended it, or it was idle for `idleTimeoutMs`',
    whatToDo:
      '`scan-gateway trace <container label>` shows its members and how it ended; check the physical container, and set `onIncomplete: refuse` on the container so a new label is refused until the open one is full (a supervisor closes a short one with `scan-gateway containers close`)',
  },
  {
    code: HealthCodes.REJECTION_RATE,
    meaning:
      'a large share of the reads in the last hour (10 % or more of at least 20) could not be made into scans: no rule matched, a bad GS1 check digit, an unknown DCP',
    whatToDo:
      'see the reasons under *Latest rejections*; a new label layout needs a rule, a misreading scanner needs cleaning or its settings checked (baud rate, terminator); after fixing, `scan-gateway replay --rejected`',
  },
  {
    code: HealthCodes.BUFFER_QUOTA,
    meaning:
      'undelivered scans are near the buffer quota (inputs that can wait are paused) or at it (new scans are refused; their sources keep them)',
    whatToDo:
      'get delivery going again (see the other problems); raise `buffer.maxPendingScans`/`buffer.maxBytes` only if the disk has room',
  },
  {
    code: HealthCodes.AUDIT_PRUNED_EARLY,
    meaning:
      'the disk of the buffer ran low (free space below the mark, or SQLite reported it full), so the oldest delivered scans were deleted before `buffer.retentionDays` ended, only as many as free the shortfall and none of batches finished within `buffer.earlyPruneKeepHours`, to keep room for undelivered data; undelivered scans are never pruned. The audit of those scans (requestId, upstream state) is gone from the buffer; the service still has them. The page gives their count and the span of their read times; `scan-gateway trace` names the prune for an item read in that span. Shown for `buffer.retentionDays` after the prune',
    whatToDo:
      'give the buffer a larger disk, or lower `buffer.retentionDays` so the audit fits (docs/operations.md, "Disk sizing"); find what else fills the disk (`df -h`, `du`)',
  },
  {
    code: HealthCodes.BUFFER_DISK_LOW,
    meaning:
      "free space on the buffer's disk is below the mark (`lowFreeBytes`), and deleting every delivered scan early pruning may take (those of batches finished more than `buffer.earlyPruneKeepHours` ago) would not free the shortfall: nothing was pruned, since deleting the audit would not save intake. Something else fills the disk",
    whatToDo:
      "find what fills the disk (`df -h`, `du -x`) and free room there; or lower `buffer.earlyPruneKeepHours` (applied on reload) if the last hours' audit may go; `scan-gateway buffer prune --before DATE` deletes delivered scans by hand",
  },
  {
    code: HealthCodes.PRODUCTS_UNKNOWN,
    meaning:
      'product keys that the configuration or the reads use are not in the upstream product list; the service will refuse those scans',
    whatToDo:
      'correct the product keys where the page says they are used (`dcps`, rules, lookups), or ask the service operator to create the products',
  },
  {
    code: HealthCodes.EVENTS_LAGGING,
    meaning:
      'the status-event consumer is more than `upstream.statusEvents.maxLagEvents` events behind the end of the topic (catching up after a start or an outage), or its last read of the topic is older than `staleAfterMs`; batch outcomes are polled at the normal pace meanwhile',
    whatToDo:
      'nothing while the lag shrinks; if it stays, look at the consumer lag metric and the network to the brokers',
  },
  {
    code: HealthCodes.LISTENER_CERT_ENDING,
    meaning:
      'the certificate the local server presents (`http.tls.certFile`) ends within 14 days, or has ended: browsers, station screens and ingest clients will refuse it',
    whatToDo:
      'renew it and put the new certificate and key in place; the gateway serves them without a restart (docs/operations.md, "TLS on the local listener")',
  },
  {
    code: HealthCodes.TOKENS_IN_CLEAR,
    meaning:
      'the local server listens beyond loopback over plain HTTP while tokens guard it (read token, ingest token, admin token): anyone on the network path can read them',
    whatToDo:
      'serve it over TLS (`http.tls`), or listen on loopback only behind a TLS proxy (docs/operations.md, "TLS on the local listener")',
  },
  {
    code: HealthCodes.INPUT_NO_READER,
    meaning:
      "a TCP input in server mode has fewer readers connected than its `expectReaders`: the station's scanner is off, unplugged, or set up with another target address; its reads do not arrive",
    whatToDo:
      "check the reader named by the input (power, cable, its target address and port: the input's *Source*); the page lists the readers connected and since when; it clears by itself when the reader connects",
  },
  {
    code: HealthCodes.RESTART_NEEDED,
    meaning:
      'a reloaded configuration changed settings that only a restart applies; the old values still run',
    whatToDo: '`systemctl restart scan-gateway` when the line allows it',
  },
];
