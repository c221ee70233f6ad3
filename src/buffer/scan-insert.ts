import type Database from 'better-sqlite3';
import { ScanKeys } from './item-keys.js';
import type { Gs1Pair } from './rows.js';

/**
 * Inserts one scan as the schema stores it (migration 12): its row in `scan_rows` and its JSON in
 * `scan_bodies` under the same id. The only place scans are written, for intake
 * (intake-writes.ts) and replay (replay.ts) alike, so both store a scan the same way.
 */
export class ScanInsert {
  private readonly row: Database.Statement;
  private readonly body: Database.Statement;
  private readonly keys: ScanKeys;
  private readonly rawOf: Database.Statement;

  constructor(db: Database.Database) {
    this.row = db.prepare(
      `INSERT INTO scan_rows (read_id, dcp_key, reference, time_utc, bytes, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
    );
    this.body = db.prepare(`INSERT INTO scan_bodies (id, body) VALUES (?, ?)`);
    this.keys = new ScanKeys(db);
    this.rawOf = db.prepare(`SELECT raw FROM reads WHERE id = ?`).pluck();
  }

  /**
   * Inserts the scan of read `readId` (`body` is its JSON, `bytes` long in UTF-8; `nowMs` its
   * `created_at`; `raw` the read's bytes, whose GS1 keys are indexed with the reference's,
   * item-keys.ts; read from `reads` when not given, as for a replay); `gs1` its elements when the
   * caller parsed it already. Runs inside the caller's transaction. Answers the new scan's id.
   */
  run(
    readId: number | bigint,
    dcpKey: string,
    reference: string,
    timeUtc: string,
    body: string,
    bytes: number,
    nowMs: number,
    raw?: Buffer,
    gs1?: readonly Gs1Pair[],
  ): number {
    const id = this.row.run(readId, dcpKey, reference, timeUtc, bytes, nowMs).lastInsertRowid;
    this.body.run(id, body);
    if (gs1 !== undefined) this.keys.writeParsed(id, gs1, reference);
    else this.keys.write(id, raw ?? (this.rawOf.get(readId) as Buffer | undefined), reference);
    return Number(id);
  }
}
