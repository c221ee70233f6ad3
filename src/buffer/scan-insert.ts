import type Database from 'better-sqlite3';

/**
 * Inserts one scan as the schema stores it (migration 12): its row in `scan_rows` and its JSON in
 * `scan_bodies` under the same id. The only place scans are written, for intake
 * (intake-writes.ts) and replay (replay.ts) alike, so both store a scan the same way.
 */
export class ScanInsert {
  private readonly row: Database.Statement;
  private readonly body: Database.Statement;

  constructor(db: Database.Database) {
    this.row = db.prepare(`INSERT INTO scan_rows (read_id, dcp_key, reference, time_utc, bytes, created_at) VALUES (?, ?, ?, ?, ?, ?)`);
    this.body = db.prepare(`INSERT INTO scan_bodies (id, body) VALUES (?, ?)`);
  }

  /**
   * Inserts the scan of read `readId` (`body` is its JSON, `bytes` long in UTF-8; `nowMs` its
   * `created_at`). Runs inside the caller's transaction. Answers the new scan's id.
   */
  run(readId: number | bigint, dcpKey: string, reference: string, timeUtc: string, body: string, bytes: number, nowMs: number): number {
    const id = this.row.run(readId, dcpKey, reference, timeUtc, bytes, nowMs).lastInsertRowid;
    this.body.run(id, body);
    return Number(id);
  }
}
