import type Database from 'better-sqlite3';
import { indexedState } from './scan-state.js';
import { BATCH_COLUMNS } from './rows.js';

/**
 * The statements of fixed text of delivery's side of the buffer (batches.ts), by name: the pending
 * scans, the batches and their bodies, the moves of scans between states and the totals the
 * triggers do not keep. Apart from the class that runs them so that the SQL reads in one place.
 */

/** The names of {@link prepareBatchStatements}' statements. */
export type BatchStatementName =
  | 'batch'
  | 'byRequestId'
  | 'byRemoteName'
  | 'transferredOfReferences'
  | 'pendingPage'
  | 'pendingHead'
  | 'pendingIdBytes'
  | 'pendingInRange'
  | 'growBatch'
  | 'pendingOldest'
  | 'pendingCount'
  | 'hold'
  | 'insertBatch'
  | 'moveRange'
  | 'moveIds'
  | 'batchBytes'
  | 'lastBatchId'
  | 'takePending'
  | 'body'
  | 'bodyBytes'
  | 'bodyPage'
  | 'scanCount'
  | 'addCounter'
  | 'scanIds'
  | 'release'
  | 'holdScans'
  | 'moving'
  | 'delivered'
  | 'deliveredCounts'
  | 'failAll'
  | 'deliverOthers'
  | 'failOne';

/** Each statement of {@link BatchStatementName}, prepared on one connection. */
export type BatchStatements = Record<BatchStatementName, Database.Statement>;

/** Prepares every statement of fixed text once, on `db` (the buffer's connection). */
export function prepareBatchStatements(db: Database.Database): BatchStatements {
  const prepare = (sql: string) => db.prepare(sql);
  return {
    batch: prepare(`SELECT ${BATCH_COLUMNS} FROM batches WHERE id = ?`),
    byRequestId: prepare(
      `SELECT ${BATCH_COLUMNS} FROM batches WHERE request_id = ? ORDER BY id DESC LIMIT 1`,
    ),
    byRemoteName: prepare(
      `SELECT ${BATCH_COLUMNS} FROM batches WHERE remote_path IS NOT NULL AND (remote_path = ? OR remote_path LIKE ? ESCAPE '\\') ORDER BY id DESC LIMIT 1`,
    ),
    transferredOfReferences: prepare(
      // CROSS JOIN keeps this order (references → scans → batches): left to itself the planner
      // starts from the done batches and reads every one's scans.
      `SELECT s.batch_id FROM json_each(?) r CROSS JOIN scan_rows s ON s.reference = r.value CROSS JOIN batches b ON b.id = s.batch_id
          WHERE b.route = 'sftp' AND b.state = 'done' AND b.upstream_state = 'transferred'
          GROUP BY s.batch_id HAVING count(DISTINCT s.reference) = ?
          ORDER BY s.batch_id DESC LIMIT 1`,
    ).pluck(),
    pendingPage: prepare(
      `SELECT id, reference, bytes FROM scan_rows WHERE state = 'pending' AND ${indexedState()} AND id > ? ORDER BY id LIMIT ?`,
    ),
    pendingHead: prepare(
      `SELECT count(*) AS scans, count(DISTINCT reference) AS "references", coalesce(sum(bytes), 0) AS scanBytes, min(id) AS firstId, max(id) AS lastId
           FROM (SELECT id, reference, bytes FROM scan_rows WHERE state = 'pending' AND ${indexedState()} ORDER BY id LIMIT ?)`,
    ),
    // Raw rows ([id, bytes]), numbers only: the plan of a batch written in steps reads 5,000.
    pendingIdBytes: prepare(
      `SELECT id, bytes FROM scan_rows WHERE state = 'pending' AND ${indexedState()} ORDER BY id LIMIT ?`,
    ).raw(),
    pendingInRange: prepare(
      `SELECT count(*) FROM scan_rows WHERE state = 'pending' AND ${indexedState()} AND id BETWEEN ? AND ?`,
    ).pluck(),
    growBatch: prepare(
      `UPDATE batches SET scan_count = ?, bytes = ? WHERE id = ? AND state = 'ready'`,
    ),
    pendingCount: prepare(`SELECT pending_scans FROM buffer_totals WHERE id = 1`).pluck(),
    pendingOldest: prepare(
      `SELECT created_at FROM scan_rows WHERE state = 'pending' AND ${indexedState()} ORDER BY id LIMIT 1`,
    ).pluck(),
    hold: prepare(`UPDATE scan_rows SET state = 'held', failure_reason = ? WHERE id = ?`),
    insertBatch: prepare(
      `INSERT INTO batches (mode, route, state, scan_count, bytes, created_at) VALUES (?, ?, 'ready', ?, ?, ?)`,
    ),
    moveRange: prepare(
      `UPDATE scan_rows SET state = 'batched', batch_id = ? WHERE id BETWEEN ? AND ? AND state = 'pending'`,
    ),
    moveIds: prepare(
      `UPDATE scan_rows SET state = 'batched', batch_id = ? WHERE id IN (SELECT value FROM json_each(?)) AND state = 'pending'`,
    ),
    batchBytes: prepare(`SELECT coalesce(sum(bytes), 0) FROM scan_rows WHERE batch_id = ?`).pluck(),
    lastBatchId: prepare(`SELECT coalesce(max(id), 0) FROM batches`).pluck(),
    takePending: prepare(
      `UPDATE buffer_totals SET pending_scans = pending_scans - ?, pending_bytes = pending_bytes - ? WHERE id = 1`,
    ),
    body: prepare(
      `SELECT b.body FROM scan_rows r JOIN scan_bodies b ON b.id = r.id WHERE r.batch_id = ? ORDER BY r.id`,
    ).pluck(),
    bodyBytes: prepare(
      `SELECT CAST('[' || coalesce(group_concat(body, ',' ORDER BY id), '') || ']' AS BLOB)
           FROM (SELECT r.id, b.body FROM scan_rows r JOIN scan_bodies b ON b.id = r.id WHERE r.batch_id = ? ORDER BY r.id)`,
    ).pluck(),
    bodyPage: prepare(
      `SELECT max(id) AS lastId, count(*) AS scans, CAST(? || group_concat(body, ',' ORDER BY id) AS BLOB) AS bytes
           FROM (SELECT r.id, b.body FROM scan_rows r JOIN scan_bodies b ON b.id = r.id WHERE r.batch_id = ? AND r.id > ? ORDER BY r.id LIMIT ?)`,
    ),
    scanCount: prepare(`SELECT scan_count FROM batches WHERE id = ?`).pluck(),
    addCounter: prepare(
      `INSERT INTO counters (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = value + excluded.value`,
    ),
    scanIds: prepare(`SELECT id FROM scan_rows WHERE batch_id = ? ORDER BY id`).pluck(),
    release: prepare(`UPDATE scan_rows SET state = 'pending', batch_id = NULL WHERE id = ?`),
    holdScans: prepare(
      `UPDATE scan_rows SET state = 'held', failure_reason = ? WHERE batch_id = ?`,
    ),
    moving: prepare(
      `SELECT count(*) FILTER (WHERE state = 'batched') AS n, coalesce(sum(bytes) FILTER (WHERE state = 'batched'), 0) AS bytes,
                count(*) FILTER (WHERE state NOT IN ('batched', 'delivered')) AS others
           FROM scan_rows WHERE batch_id = ?`,
    ),
    delivered: prepare(
      `UPDATE buffer_totals SET undelivered_scans = undelivered_scans - ?, undelivered_bytes = undelivered_bytes - ? WHERE id = 1`,
    ),
    deliveredCounts: prepare(
      `INSERT INTO scan_state_counts (state, scans) VALUES ('delivered', ?) ON CONFLICT (state) DO UPDATE SET scans = scans + excluded.scans`,
    ),
    failAll: prepare(
      `UPDATE scan_rows SET state = 'failed', failure_reason = ? WHERE batch_id = ?`,
    ),
    deliverOthers: prepare(
      `UPDATE scan_rows SET state = 'delivered' WHERE batch_id = ? AND state NOT IN ('batched', 'delivered')`,
    ),
    failOne: prepare(
      `UPDATE scan_rows SET state = 'failed', failure_reason = ? WHERE batch_id = ? AND reference = ?`,
    ),
  };
}
