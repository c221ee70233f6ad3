import type Database from 'better-sqlite3';
import { printableRaw } from '../format/printable.js';
import { bufferFiles, type BufferFiles } from '../buffer/disk-usage.js';
import { inFlight, indexedState } from '../buffer/scan-state.js';
import type { OutboxCounts, PrunedCounts } from '../buffer/outbox-counts.js';

/**
 * The reports of the operations commands (`queue`, `failures`, `buffer stats`) and the metrics'
 * batch counts: plain SQL over the buffer's tables, never a write, so the commands also work
 * beside a running gateway and on a buffer written by an older gateway version (reader.ts reads
 * one through views; a column added by a later migration is looked for first, {@link hasColumn}).
 * Each runs rarely (a command, a scrape), so its statements are prepared when it runs.
 */

/** Undelivered scans of one DCP. Ages in ms at `nowMs`. */
export interface QueueRow {
  dcp: string;
  /** Not yet in a batch. */
  waiting: number;
  /** In a batch that the service has not finished yet. */
  inFlight: number;
  oldestAgeMs: number;
}

/** Undelivered scans by age, in fixed bands, across all DCPs. */
export interface AgeBand {
  label: string;
  /** Upper bound of the band, in ms (exclusive); null for the last band. */
  belowMs: number | null;
  scans: number;
}

/** A batch that is not finished (not yet uploaded, uploaded and processing, or held). */
export interface OpenBatch {
  id: number;
  mode: string;
  state: string;
  scans: number;
  bytes: number;
  requestId: string | null;
  attempts: number;
  lastError: string | null;
  createdAt: string;
  /** When the next try (upload or status poll) is due, ms since epoch; 0 = now. */
  nextAttemptAt: number;
}

export interface QueueReport {
  totals: { waiting: number; inFlight: number; oldestAgeMs: number | null };
  byDcp: QueueRow[];
  byAge: AgeBand[];
  batches: OpenBatch[];
}

const AGE_BANDS: { label: string; belowMs: number | null }[] = [
  { label: 'under 1 min', belowMs: 60_000 },
  { label: '1–10 min', belowMs: 600_000 },
  { label: '10–60 min', belowMs: 3_600_000 },
  { label: '1–24 h', belowMs: 86_400_000 },
  { label: 'over 24 h', belowMs: null },
];

/** What is waiting for delivery: by DCP, by age, and the batches not yet finished. */
export function queueReport(db: Database.Database, nowMs: number): QueueReport {
  // Pending scans through the partial index scans_state, those in flight by batch from the open
  // batches (src/buffer/scan-state.ts): neither walks the delivered scans.
  const undelivered = `SELECT dcp_key, state, created_at FROM scan_rows WHERE state = 'pending' AND ${indexedState()}
                       UNION ALL SELECT dcp_key, state, created_at FROM scan_rows WHERE ${inFlight()}`;
  const rows = db
    .prepare(
      `SELECT dcp_key AS dcp, sum(state = 'pending') AS waiting, sum(state = 'batched') AS inFlight, min(created_at) AS oldest
         FROM (${undelivered}) GROUP BY dcp_key ORDER BY dcp_key`,
    )
    .all() as { dcp: string; waiting: number; inFlight: number; oldest: number }[];
  const byDcp = rows.map((r) => ({
    dcp: r.dcp,
    waiting: r.waiting,
    inFlight: r.inFlight,
    oldestAgeMs: Math.max(0, nowMs - r.oldest),
  }));
  const cases = AGE_BANDS.map((b, i) =>
    b.belowMs === null ? `ELSE ${i}` : `WHEN ? - created_at < ${b.belowMs} THEN ${i}`,
  ).join(' ');
  const bandCounts = db
    .prepare(`SELECT CASE ${cases} END AS band, count(*) AS n FROM (${undelivered}) GROUP BY band`)
    .all(...AGE_BANDS.filter((b) => b.belowMs !== null).map(() => nowMs)) as {
    band: number;
    n: number;
  }[];
  const byAge = AGE_BANDS.map((b, i) => ({
    ...b,
    scans: bandCounts.find((c) => c.band === i)?.n ?? 0,
  }));
  const batches = db
    .prepare(
      `SELECT id, coalesce(route, mode) AS mode, state, scan_count AS scans, bytes, request_id AS requestId, attempts, last_error AS lastError,
              created_at AS createdAt, next_attempt_at AS nextAttemptAt
         FROM batches WHERE state <> 'done' ORDER BY id`,
    )
    .all() as OpenBatch[];
  const oldest = byDcp.length === 0 ? null : Math.max(...byDcp.map((r) => r.oldestAgeMs));
  return {
    totals: {
      waiting: sum(byDcp.map((r) => r.waiting)),
      inFlight: sum(byDcp.map((r) => r.inFlight)),
      oldestAgeMs: oldest,
    },
    byDcp,
    byAge,
    batches,
  };
}

/** One failed scan or rejected read. */
export interface FailureRow {
  kind: 'failed' | 'held' | 'rejected';
  at: string;
  inputId: string;
  dcp: string | null;
  reference: string | null;
  /** The product model key the scan was sent with (the one the service refused), null for a rejected read. */
  product: string | null;
  reason: string;
  /** The read as received, see {@link printableRaw}. */
  raw: string;
  /** Where it came from (file and line, port), as stored. */
  origin: string | null;
  /** The batch's requestId, for a scan the service refused. */
  requestId: string | null;
}

export interface FailuresReport {
  /** Counts by reason, most frequent first (failed and held scans, and rejected reads, apart). */
  reasons: { kind: 'failed' | 'rejected'; reason: string; count: number }[];
  latest: FailureRow[];
}

/** Whether `table` has `column` (later migrations add columns; the reports work with or without them). */
function hasColumn(db: Database.Database, table: string, column: string): boolean {
  return (
    db.prepare(`SELECT name FROM pragma_table_info(?)`).pluck().all(table) as string[]
  ).includes(column);
}

/** Which failures to report: the latest `limit`, of one gateway batch (`batches.id`) when `batchId` is set. */
export interface FailuresSelection {
  limit: number;
  /** Only the failed and held scans of this batch; rejected reads, never in a batch, are left out. */
  batchId?: number;
}

/**
 * The latest scans the service refused (or that were held) and reads the gateway rejected. Dead
 * letters already replayed (`scans.replayed_by`, when the buffer has it) are left out: their new
 * scans are in the queue. A scan's product is read from its stored body (`productModelKey`).
 */
export function failuresReport(
  db: Database.Database,
  selection: FailuresSelection,
): FailuresReport {
  const { limit, batchId } = selection;
  const replayed = hasColumn(db, 'scans', 'replayed_by') ? 'AND s.replayed_by IS NULL' : '';
  const open = batchId === undefined ? replayed : `${replayed} AND s.batch_id = ?`;
  const batch = batchId === undefined ? [] : [batchId];
  const rejected = batchId === undefined ? '' : 'AND 0';
  // A body that is not JSON (never written by the gateway, but a buffer is a file) gives no product.
  const product = `(SELECT CASE WHEN json_valid(body) AND json_type(body, '$.productModelKey') = 'text' THEN json_extract(body, '$.productModelKey') END
                      FROM scan_bodies WHERE scan_bodies.id = s.id)`;
  const latest = (
    db
      .prepare(
        `SELECT * FROM (
           SELECT s.state AS kind, r.received_at AS at, r.input_id AS inputId, s.dcp_key AS dcp, s.reference AS reference,
                  ${product} AS product, coalesce(s.failure_reason, '') AS reason, r.raw AS raw, r.origin AS origin, b.request_id AS requestId, r.id AS rid
             FROM scan_rows s JOIN reads r ON r.id = s.read_id LEFT JOIN batches b ON b.id = s.batch_id
            WHERE s.state IN ('failed', 'held') AND ${indexedState('s.')} ${open}
           UNION ALL
           SELECT 'rejected', received_at, input_id, dcp_key, NULL, NULL, coalesce(reason, ''), raw, origin, NULL, id
             FROM reads WHERE outcome = 'rejected' ${rejected}
         ) ORDER BY rid DESC LIMIT ?`,
      )
      .all(...batch, limit) as (Omit<FailureRow, 'raw'> & { raw: Buffer; rid: number })[]
  ).map(({ rid: _rid, raw, ...row }) => ({ ...row, raw: printableRaw(raw) }));
  const reasons = db
    .prepare(
      `SELECT * FROM (
         SELECT 'failed' AS kind, coalesce(failure_reason, '') AS reason, count(*) AS count FROM scan_rows s WHERE state IN ('failed', 'held') AND ${indexedState()} ${open} GROUP BY 2
         UNION ALL
         SELECT 'rejected', coalesce(reason, ''), count(*) FROM reads WHERE outcome = 'rejected' ${rejected} GROUP BY 2
       ) ORDER BY count DESC, reason LIMIT 50`,
    )
    .all(...batch) as FailuresReport['reasons'];
  return { reasons, latest };
}

export interface StatsReport {
  path: string;
  /** Bytes on disk of the database file, its write-ahead log and its shared-memory index (disk-usage.ts). */
  files: BufferFiles;
  schemaVersion: number;
  journalMode: string;
  pageSize: number;
  pages: number;
  /** Pages free inside the file (reused before the file grows). */
  freePages: number;
  reads: Record<string, number>;
  /**
   * Scans in the buffer now by state, counted from the rows, in the words and the way of the
   * status's `buffer.scans`: `delivered` are the delivered scans still kept (the audit trail, not
   * a lifetime count), `replayed` the dead letters a replay replaced.
   */
  scans: Record<string, number>;
  /** What pruning removed, lifetime, as the status's `buffer.pruned` (`OutboxCounts.pruned`). */
  pruned: PrunedCounts;
  /**
   * The scan counts the status shows (kept by triggers, `OutboxCounts.scanCounts`), present only
   * when they differ from {@link scans}: they should never, and the text output says so.
   */
  statusScans?: Record<string, number>;
  /** Batches by state; finished batches by the service's final state (`done:Success`…). */
  batches: Record<string, number>;
  oldestReadAt: string | null;
  newestReadAt: string | null;
}

/**
 * Scans by state, counted from the rows: pending, failed and held from the partial index
 * scans_state, those in flight by batch from the open batches (src/buffer/scan-state.ts); the
 * delivered ones are all scans less the others, so no count walks the delivered scans.
 */
function scanStates(db: Database.Database): Record<string, number> {
  const out = Object.fromEntries(
    (
      db
        .prepare(
          `SELECT state AS k, count(*) AS n FROM scan_rows WHERE ${indexedState()} GROUP BY state`,
        )
        .all() as { k: string; n: number }[]
    ).map((r) => [r.k, r.n]),
  );
  const batched = db
    .prepare(`SELECT count(*) FROM scan_rows WHERE ${inFlight()}`)
    .pluck()
    .get() as number;
  if (batched > 0) out.batched = batched;
  const all = db.prepare(`SELECT count(*) FROM scan_rows`).pluck().get() as number;
  const delivered = all - Object.values(out).reduce((a, b) => a + b, 0);
  if (delivered > 0) out.delivered = delivered;
  // Dead letters a replay replaced count as `replayed`, not `failed` or `held`: as the status
  // counts them (BufferReports.scanCounts), so the two never disagree after a replay.
  if (hasColumn(db, 'scans', 'replayed_by')) {
    const replayed = db
      .prepare(
        `SELECT state AS k, count(*) AS n FROM scan_rows WHERE replayed_by IS NOT NULL GROUP BY state`,
      )
      .all() as { k: string; n: number }[];
    for (const r of replayed) {
      out[r.k] = (out[r.k] ?? 0) - r.n;
      if (out[r.k] === 0) delete out[r.k];
      out.replayed = (out.replayed ?? 0) + r.n;
    }
  }
  return out;
}

/**
 * Whether the buffer has what the status's counts read (buffer_totals, scan_state_counts, the
 * index of replayed dead letters on scan_rows): an older buffer, read as it is, may not.
 */
function hasStatusCounts(db: Database.Database): boolean {
  return (
    db
      .prepare(
        `SELECT count(*) FROM sqlite_master WHERE (type = 'table' AND name IN ('scan_rows', 'scan_state_counts', 'buffer_totals')) OR (type = 'index' AND name = 'scans_replayed')`,
      )
      .pluck()
      .get() === 4
  );
}

/** The same keys with the same values, whatever their order. */
function sameCounts(a: Record<string, number>, b: Record<string, number>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}

/**
 * Size and content of the buffer. `counts` are the status's own counts on the same connection:
 * the pruned totals are read through them, and the scans by state are checked against them.
 */
export function statsReport(
  db: Database.Database,
  path: string,
  counts: Pick<OutboxCounts, 'scanCounts' | 'pruned'>,
): StatsReport {
  const files = bufferFiles(path);
  const grouped = (sql: string) =>
    Object.fromEntries(
      (db.prepare(sql).all() as { k: string; n: number }[]).map((r) => [r.k, r.n]),
    );
  const range = db
    .prepare(`SELECT min(received_at) AS oldest, max(received_at) AS newest FROM reads`)
    .get() as { oldest: string | null; newest: string | null };
  // One read transaction for the rows and the counts, so a write between them cannot tell them apart.
  const { scans, statusScans } = db.transaction(() => ({
    scans: scanStates(db),
    statusScans: hasStatusCounts(db) ? counts.scanCounts() : undefined,
  }))();
  return {
    path,
    files,
    schemaVersion: db.pragma('user_version', { simple: true }) as number,
    journalMode: String(db.pragma('journal_mode', { simple: true })),
    pageSize: db.pragma('page_size', { simple: true }) as number,
    pages: db.pragma('page_count', { simple: true }) as number,
    freePages: db.pragma('freelist_count', { simple: true }) as number,
    reads: grouped(`SELECT outcome AS k, count(*) AS n FROM reads GROUP BY outcome`),
    scans,
    pruned: counts.pruned(),
    ...(statusScans && !sameCounts(scans, statusScans) ? { statusScans } : {}),
    batches: grouped(
      `SELECT CASE WHEN state = 'done' THEN 'done:' || coalesce(upstream_state, '?') ELSE state END AS k, count(*) AS n FROM batches GROUP BY k`,
    ),
    oldestReadAt: range.oldest,
    newestReadAt: range.newest,
  };
}

/** Batches in the buffer by mode and state (finished ones by the service's final state), for metrics. */
export function batchCounts(
  db: Database.Database,
): { mode: string; state: string; count: number }[] {
  return db
    .prepare(
      // Kept by triggers (migration 3), so a scrape does not group every batch of the retention period.
      `SELECT mode, label AS state, batches AS count FROM batch_counts WHERE batches > 0 ORDER BY 1, 2`,
    )
    .all() as { mode: string; state: string; count: number }[];
}

function sum(values: number[]): number {
  return values.reduce((a, b) => a + b, 0);
}
