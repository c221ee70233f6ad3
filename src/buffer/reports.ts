import { statSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { printableRaw } from '../format/printable.js';
import { lastReadId, readsAfter, stationCounts, stationRecent, type StationRead } from './station.js';
import { searchItems, traceItem, type ItemMatch, type ItemTrace, type TraceOptions } from './items.js';
import { inFlight, indexedState } from './scan-state.js';

/**
 * Read-only questions about the SQLite buffer that plant IT asks (what is waiting, what failed,
 * how big is it), shared by the health page and the `queue`, `failures` and `buffer stats`
 * commands. Plain SQL over the buffer's tables, never a write, so the commands also work beside a
 * running gateway and on a buffer written by an older gateway version (src/buffer/reader.ts reads
 * one through views; a column added by a later migration is looked for first, {@link hasColumn}).
 */

/** Bytes of the buffer on disk: the database file plus its write-ahead log (and shared memory index). */
export function bufferFileBytes(path: string): number {
  let total = 0;
  for (const suffix of ['', '-wal', '-shm']) {
    try {
      total += statSync(path + suffix).size;
    } catch {
      // a missing -wal or -shm is normal (clean close, or never opened for writing)
    }
  }
  return total;
}

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
function queueReport(db: Database.Database, nowMs: number): QueueReport {
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
  const byDcp = rows.map((r) => ({ dcp: r.dcp, waiting: r.waiting, inFlight: r.inFlight, oldestAgeMs: Math.max(0, nowMs - r.oldest) }));
  const cases = AGE_BANDS.map((b, i) => (b.belowMs === null ? `ELSE ${i}` : `WHEN ? - created_at < ${b.belowMs} THEN ${i}`)).join(' ');
  const bandCounts = db
    .prepare(`SELECT CASE ${cases} END AS band, count(*) AS n FROM (${undelivered}) GROUP BY band`)
    .all(...AGE_BANDS.filter((b) => b.belowMs !== null).map(() => nowMs)) as { band: number; n: number }[];
  const byAge = AGE_BANDS.map((b, i) => ({ ...b, scans: bandCounts.find((c) => c.band === i)?.n ?? 0 }));
  const batches = db
    .prepare(
      `SELECT id, coalesce(route, mode) AS mode, state, scan_count AS scans, bytes, request_id AS requestId, attempts, last_error AS lastError,
              created_at AS createdAt, next_attempt_at AS nextAttemptAt
         FROM batches WHERE state <> 'done' ORDER BY id`,
    )
    .all() as OpenBatch[];
  const oldest = byDcp.length === 0 ? null : Math.max(...byDcp.map((r) => r.oldestAgeMs));
  return {
    totals: { waiting: sum(byDcp.map((r) => r.waiting)), inFlight: sum(byDcp.map((r) => r.inFlight)), oldestAgeMs: oldest },
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
  return (db.prepare(`SELECT name FROM pragma_table_info(?)`).pluck().all(table) as string[]).includes(column);
}

/**
 * The latest scans the service refused (or that were held) and reads the gateway rejected. Dead
 * letters already replayed (`scans.replayed_by`, when the buffer has it) are left out: their new
 * scans are in the queue.
 */
function failuresReport(db: Database.Database, limit: number): FailuresReport {
  const open = hasColumn(db, 'scans', 'replayed_by') ? 'AND s.replayed_by IS NULL' : '';
  const latest = (
    db
      .prepare(
        `SELECT * FROM (
           SELECT s.state AS kind, r.received_at AS at, r.input_id AS inputId, s.dcp_key AS dcp, s.reference AS reference,
                  coalesce(s.failure_reason, '') AS reason, r.raw AS raw, r.origin AS origin, b.request_id AS requestId, r.id AS rid
             FROM scan_rows s JOIN reads r ON r.id = s.read_id LEFT JOIN batches b ON b.id = s.batch_id
            WHERE s.state IN ('failed', 'held') AND ${indexedState('s.')} ${open}
           UNION ALL
           SELECT 'rejected', received_at, input_id, dcp_key, NULL, coalesce(reason, ''), raw, origin, NULL, id
             FROM reads WHERE outcome = 'rejected'
         ) ORDER BY rid DESC LIMIT ?`,
      )
      .all(limit) as (Omit<FailureRow, 'raw'> & { raw: Buffer; rid: number })[]
  ).map(({ rid: _rid, raw, ...row }) => ({ ...row, raw: printableRaw(raw) }));
  const reasons = db
    .prepare(
      `SELECT * FROM (
         SELECT 'failed' AS kind, coalesce(failure_reason, '') AS reason, count(*) AS count FROM scan_rows s WHERE state IN ('failed', 'held') AND ${indexedState()} ${open} GROUP BY 2
         UNION ALL
         SELECT 'rejected', coalesce(reason, ''), count(*) FROM reads WHERE outcome = 'rejected' GROUP BY 2
       ) ORDER BY count DESC, reason LIMIT 50`,
    )
    .all() as FailuresReport['reasons'];
  return { reasons, latest };
}

export interface StatsReport {
  path: string;
  /** Bytes on disk of the database file, its write-ahead log and its shared-memory index. */
  files: { db: number; wal: number; shm: number; total: number };
  schemaVersion: number;
  journalMode: string;
  pageSize: number;
  pages: number;
  /** Pages free inside the file (reused before the file grows). */
  freePages: number;
  reads: Record<string, number>;
  scans: Record<string, number>;
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
    (db.prepare(`SELECT state AS k, count(*) AS n FROM scan_rows WHERE ${indexedState()} GROUP BY state`).all() as { k: string; n: number }[]).map((r) => [r.k, r.n]),
  );
  const batched = db.prepare(`SELECT count(*) FROM scan_rows WHERE ${inFlight()}`).pluck().get() as number;
  if (batched > 0) out.batched = batched;
  const all = db.prepare(`SELECT count(*) FROM scan_rows`).pluck().get() as number;
  const delivered = all - Object.values(out).reduce((a, b) => a + b, 0);
  if (delivered > 0) out.delivered = delivered;
  return out;
}

/** Size and content of the buffer. */
function statsReport(db: Database.Database, path: string): StatsReport {
  const size = (suffix: string) => {
    try {
      return statSync(path + suffix).size;
    } catch {
      return 0;
    }
  };
  const files = { db: size(''), wal: size('-wal'), shm: size('-shm'), total: 0 };
  files.total = files.db + files.wal + files.shm;
  const grouped = (sql: string) => Object.fromEntries((db.prepare(sql).all() as { k: string; n: number }[]).map((r) => [r.k, r.n]));
  const range = db.prepare(`SELECT min(received_at) AS oldest, max(received_at) AS newest FROM reads`).get() as { oldest: string | null; newest: string | null };
  return {
    path,
    files,
    schemaVersion: db.pragma('user_version', { simple: true }) as number,
    journalMode: String(db.pragma('journal_mode', { simple: true })),
    pageSize: db.pragma('page_size', { simple: true }) as number,
    pages: db.pragma('page_count', { simple: true }) as number,
    freePages: db.pragma('freelist_count', { simple: true }) as number,
    reads: grouped(`SELECT outcome AS k, count(*) AS n FROM reads GROUP BY outcome`),
    scans: scanStates(db),
    batches: grouped(
      `SELECT CASE WHEN state = 'done' THEN 'done:' || coalesce(upstream_state, '?') ELSE state END AS k, count(*) AS n FROM batches GROUP BY k`,
    ),
    oldestReadAt: range.oldest,
    newestReadAt: range.newest,
  };
}

/** Batches in the buffer by mode and state (finished ones by the service's final state), for metrics. */
function batchCounts(db: Database.Database): { mode: string; state: string; count: number }[] {
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

/** What happened in the buffer since an instant, for the health rules (src/health/derive.ts `HealthFacts.recent`). */
export interface RecentActivity {
  /** Reads received since then, rejected ones included (input-level rejections, which never were a read, not). */
  reads: number;
  /** Reads that could not be made into scans (file-level refusals not included). */
  rejections: number;
  rejectionsByInput: { inputId: string; count: number }[];
  /** Scans the service refused in batches finished since then, not replayed. */
  failedScans: number;
  /** Files moved to `failed/` since then: the latest {@link RECENT_FILES_LISTED}, newest first. */
  filesRefused: { inputId: string; file: string; reason: string; at: string }[];
  filesRefusedCount: number;
}

/** Refused files named in {@link RecentActivity.filesRefused}. */
export const RECENT_FILES_LISTED = 5;

/**
 * Reads, rejections, refused files and failed scans since `sinceMs`, cheaply enough for every
 * health refresh: `reads` has no index on its time, but its ids grow with it, so the first read of
 * the window is found by a binary search over ids (about 25 point reads for millions of rows); the
 * reads after it are then counted from the id range and the `reads_outcome` index (cost grows with
 * the rejections in the window, not with the table). Failed scans come through the partial index on
 * finished batches, only those the service finished with failures. Read-only. Measured: 0.3 ms per
 * call on a buffer of 500,000 reads over 30 days.
 */
function recentActivity(db: Database.Database, sinceMs: number): RecentActivity {
  const since = new Date(sinceMs).toISOString();
  const first = firstReadSince(db, since);
  const maxId = (db.prepare(`SELECT max(id) FROM reads`).pluck().get() as number | null) ?? 0;
  const empty = { reads: 0, rejections: 0, rejectionsByInput: [], filesRefused: [], filesRefusedCount: 0 };
  const reads =
    first === null
      ? empty
      : (() => {
          const byInput = db
            .prepare(
              `SELECT input_id AS inputId, count(*) AS count FROM reads
                WHERE outcome = 'rejected' AND id >= ? AND coalesce(input_level, 0) = 0 GROUP BY input_id ORDER BY count DESC, input_id`,
            )
            .all(first) as { inputId: string; count: number }[];
          // A file refused as a whole is an input-level rejection whose origin names failed/ as where
          // it went (a file with content stored before also names where it went: processed/).
          const moved = `origin LIKE '%"movedTo":"failed/%'`;
          // Input-level rejections (a file refused whole, an unframeable chunk) were never a read.
          const level = db
            .prepare(`SELECT count(*) AS inputLevel, coalesce(sum(${moved}), 0) AS files FROM reads WHERE outcome = 'rejected' AND id >= ? AND input_level = 1`)
            .get(first) as { inputLevel: number; files: number };
          const inputLevel = level.inputLevel;
          const filesRefusedCount = level.files;
          const files = db
            .prepare(`SELECT input_id AS inputId, origin, reason, received_at AS at FROM reads WHERE outcome = 'rejected' AND id >= ? AND input_level = 1 AND ${moved} ORDER BY id DESC LIMIT ?`)
            .all(first, RECENT_FILES_LISTED) as { inputId: string; origin: string; reason: string | null; at: string }[];
          return {
            reads: maxId - first + 1 - inputLevel,
            rejections: byInput.reduce((a, r) => a + r.count, 0),
            rejectionsByInput: byInput,
            filesRefused: files.map((f) => ({ inputId: f.inputId, file: fileName(f.origin), reason: f.reason ?? '', at: f.at })),
            filesRefusedCount,
          };
        })();
  const failedScans = db
    .prepare(
      // From the batches finished with failures to their scans: the planner's own choice walks every
      // dead letter of the retention period (20 ms at 10,000 of them).
      `SELECT count(*) FROM batches b INDEXED BY batches_finished CROSS JOIN scan_rows s INDEXED BY scans_batch ON s.batch_id = b.id
        WHERE b.state = 'done' AND b.finished_at >= ? AND b.upstream_state IN ('HasFailures', 'Failed') AND s.state = 'failed' AND s.replayed_by IS NULL`,
    )
    .pluck()
    .get(since) as number;
  return { ...reads, failedScans };
}

/** Id of the first read received at or after `sinceIso`, or null when none was. */
export function firstReadSince(db: Database.Database, sinceIso: string): number | null {
  // Two queries: SQLite answers a lone min() or max() of the rowid from the b-tree's edge, but both in
  // one SELECT walk the whole table (25 ms at 500,000 reads).
  const bounds = {
    lo: db.prepare(`SELECT min(id) FROM reads`).pluck().get() as number | null,
    hi: db.prepare(`SELECT max(id) FROM reads`).pluck().get() as number | null,
  };
  if (bounds.lo === null || bounds.hi === null) return null;
  const at = db.prepare(`SELECT id, received_at AS receivedAt FROM reads WHERE id >= ? ORDER BY id LIMIT 1`);
  const last = at.get(bounds.hi) as { id: number; receivedAt: string };
  if (last.receivedAt < sinceIso) return null;
  // `first` is an existing read in the window; one earlier in it is looked for in [lo, hi).
  let first = last.id;
  let lo = bounds.lo;
  let hi = bounds.hi;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    const row = at.get(mid) as { id: number; receivedAt: string }; // exists: `first` >= mid does
    if (row.receivedAt >= sinceIso) {
      first = row.id;
      hi = mid;
    } else {
      lo = row.id + 1;
    }
  }
  return first;
}

function fileName(origin: string): string {
  try {
    const o = JSON.parse(origin) as { file?: unknown };
    return typeof o.file === 'string' ? o.file : origin;
  } catch {
    return origin;
  }
}

/** Batches not finished (`ready`, `uploading`, `presigned`, `uploaded`) and formed before `beforeMs`, oldest first, at most 20. */
function stuckBatches(db: Database.Database, beforeMs: number): { id: number; state: string; requestId: string | null; createdAt: string }[] {
  return db
    .prepare(
      `SELECT id, state, request_id AS requestId, created_at AS createdAt FROM batches
        WHERE state IN ('ready', 'uploading', 'presigned', 'uploaded') AND created_at < ? ORDER BY id LIMIT 20`,
    )
    .all(new Date(beforeMs).toISOString()) as { id: number; state: string; requestId: string | null; createdAt: string }[];
}

/**
 * A batch as `/api/v1/status` shows it: instants as ISO 8601 (the buffer keeps some as ms since
 * the epoch), everything else as stored but the pre-signed address: until it expires, it lets
 * whoever holds it write the batch's object (contract §4.4), so it never leaves the process.
 */
export function batchView<T extends { presignedUrl?: string | null; presignedExpiresAt?: number | null; putStartedAt?: number | null; nextAttemptAt?: number | null }>(
  b: T,
): Omit<T, 'presignedUrl' | 'presignedExpiresAt' | 'putStartedAt' | 'nextAttemptAt'> & { presignedExpiresAt?: string | null; putStartedAt?: string | null; nextAttemptAt?: string | null } {
  const iso = (ms: number | null | undefined) => (ms === null || ms === undefined ? ms : ms === 0 ? null : new Date(ms).toISOString());
  const { presignedUrl: _signed, ...rest } = b;
  return {
    ...(rest as Omit<T, 'presignedUrl' | 'presignedExpiresAt' | 'putStartedAt' | 'nextAttemptAt'>),
    ...('presignedExpiresAt' in b ? { presignedExpiresAt: iso(b.presignedExpiresAt) } : {}),
    ...('putStartedAt' in b ? { putStartedAt: iso(b.putStartedAt) } : {}),
    // 0 means "due now" in the buffer; as an instant that is no time at all.
    ...('nextAttemptAt' in b ? { nextAttemptAt: iso(b.nextAttemptAt) } : {}),
  };
}

/**
 * The read-only reports of one open buffer connection (the daemon's store, or the CLI's read-only
 * {@link BufferReader}); the connection itself never leaves `src/buffer/`.
 */
export class BufferReports {
  constructor(
    private readonly db: Database.Database,
    private readonly path: string,
  ) {}

  /** See {@link queueReport}. */
  queue(nowMs: number): QueueReport {
    return queueReport(this.db, nowMs);
  }

  /** See {@link failuresReport}. */
  failures(limit: number): FailuresReport {
    return failuresReport(this.db, limit);
  }

  /** See {@link statsReport}; the file sizes are those of this buffer's path. */
  stats(): StatsReport {
    return statsReport(this.db, this.path);
  }

  /** See {@link batchCounts}. */
  batchCounts(): { mode: string; state: string; count: number }[] {
    return batchCounts(this.db);
  }

  /** See {@link recentActivity}. */
  recentActivity(sinceMs: number): RecentActivity {
    return recentActivity(this.db, sinceMs);
  }

  /** What happened to one item: see {@link traceItem}. */
  trace(reference: string, options: TraceOptions = {}): ItemTrace {
    return traceItem(this.db, reference, options);
  }

  /** References starting with `prefix`: see {@link searchItems}. */
  searchItems(prefix: string, limit?: number): ItemMatch[] {
    return searchItems(this.db, prefix, limit);
  }

  /** The station screen's last reads (src/buffer/station.ts {@link stationRecent}). */
  stationRecent(keys: readonly string[], limit: number): StationRead[] {
    return stationRecent(this.db, keys, limit);
  }

  /** See {@link stationCounts}. */
  stationCounts(keys: readonly string[], sinceIso: string): Record<string, number> {
    return stationCounts(this.db, keys, sinceIso);
  }

  /** See {@link readsAfter}. */
  readsAfter(afterId: number, limit: number): (StationRead & { inputLevel: boolean })[] {
    return readsAfter(this.db, afterId, limit);
  }

  /** See {@link lastReadId}. */
  lastReadId(): number {
    return lastReadId(this.db);
  }

  /** See {@link stuckBatches}. */
  stuckBatches(beforeMs: number): { id: number; state: string; requestId: string | null; createdAt: string }[] {
    return stuckBatches(this.db, beforeMs);
  }
}
