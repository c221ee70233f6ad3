import { join } from 'node:path';
import Database from 'better-sqlite3';
import { MIGRATIONS } from '../../src/buffer/migrations.js';
import { WAL_AUTOCHECKPOINT_PAGES } from '../../src/buffer/open.js';
import { nowMs } from './system.js';

/**
 * The raw-insert ceiling of the intake benchmarks (benchmark 1; benchmark 2 uses it for its CPU
 * budget): the rows a gateway wrote, inserted with bare better-sqlite3 into a fresh file with the
 * buffer's whole schema and pragmas. Shared so that both benchmarks measure the same work.
 */

/** What one ceiling run measured. */
export interface RawCeiling {
  /** Reads inserted (with their scans), i.e. rows of `reads` in the source file. */
  reads: number;
  /** Reads per wall second over the insert loop. */
  readsPerSec: number;
  /**
   * CPU time (user + system, all threads of this process: `process.cpuUsage`) of the insert loop
   * per read, in µs. The loop is synchronous, so nothing else of this process runs meanwhile.
   */
  cpuMicrosPerRead: number;
}

/** Every row of `table`, all columns (`id` first), as arrays; and the insert statement text for them. */
function tableRows(
  db: Database.Database,
  table: string,
): { columns: string[]; sql: string; rows: unknown[][] } {
  const stmt = db.prepare(`SELECT * FROM ${table} ORDER BY id`).raw();
  const columns = stmt.columns().map((c) => c.name);
  const sql = `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`;
  return { columns, sql, rows: stmt.all() as unknown[][] };
}

/**
 * The ceiling: the rows a gateway wrote to `sourceDb` (every column of reads, scan rows and scan bodies, read back
 * untimed), inserted raw into `dir/ceiling.db` (which must not exist yet) with the same schema
 * (every migration: tables, indexes, triggers) and the same pragmas, `batch` reads with their
 * scans per transaction. Other tables the gateway writes are not inserted, except, with
 * `mqttMessages`, the exactly-once record of an MQTT input (`mqtt_messages`: one row per
 * QoS 1 message, written in the read's own transaction): the source's rows, the n-th beside the
 * n-th read, with the gateway's own statement.
 */
export function runRawCeiling(
  dir: string,
  sourceDb: string,
  batch: number,
  opts: { mqttMessages?: boolean } = {},
): RawCeiling {
  const src = new Database(sourceDb, { readonly: true });
  const reads = tableRows(src, 'reads');
  // A scan is a row of `scan_rows` and its body in `scan_bodies` (migration 12).
  const scans = tableRows(src, 'scan_rows');
  const bodies = tableRows(src, 'scan_bodies');
  const messages = opts.mqttMessages
    ? (src
        .prepare(
          `SELECT input_id, packet_id, topic, payload_sha256, committed_at FROM mqtt_messages ORDER BY committed_at, packet_id`,
        )
        .raw()
        .all() as unknown[][])
    : [];
  src.close();
  const readIdAt = reads.columns.indexOf('id');
  const scanReadIdAt = scans.columns.indexOf('read_id');
  const bodyOf = new Map(bodies.rows.map((r) => [r[0] as number, r]));
  const scanOf = new Map(
    scans.rows.map((r) => [
      r[scanReadIdAt] as number,
      { row: r, body: bodyOf.get(r[0] as number) },
    ]),
  );
  const rows = reads.rows.map((r, n) => ({
    read: r,
    scan: scanOf.get(r[readIdAt] as number),
    message: messages[n],
  }));

  const db = new Database(join(dir, 'ceiling.db'));
  // BufferStore's pragmas, all of them: the buffer also returns pruned pages to the file system
  // (auto_vacuum), checkpoints its log at 256 pages and cuts it back to 1 MiB. A ceiling with only
  // the first four would write each page back to the database file less often.
  db.pragma('auto_vacuum = INCREMENTAL');
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  db.pragma('journal_size_limit = 1048576');
  db.pragma(`wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_PAGES}`);
  for (const m of MIGRATIONS) db.exec(m);
  const insertRead = db.prepare(reads.sql);
  const insertScan = db.prepare(scans.sql);
  const insertBody = db.prepare(bodies.sql);
  // The statement of IntakeWrites.commitIntake (src/buffer/intake-writes.ts) for a message's record.
  const insertMessage = db.prepare(
    `INSERT OR REPLACE INTO mqtt_messages (input_id, packet_id, topic, payload_sha256, committed_at) VALUES (?, ?, ?, ?, ?)`,
  );
  const insertMany = db.transaction((chunk: typeof rows) => {
    for (const { read, scan, message } of chunk) {
      insertRead.run(...read);
      if (message) insertMessage.run(...message);
      if (scan) {
        insertScan.run(...scan.row);
        if (scan.body) insertBody.run(...scan.body);
      }
    }
  });
  const cpuBefore = process.cpuUsage();
  const started = nowMs();
  for (let i = 0; i < rows.length; i += batch) insertMany(rows.slice(i, i + batch));
  const elapsed = (nowMs() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  db.close();
  return {
    reads: rows.length,
    readsPerSec: rows.length / elapsed,
    cpuMicrosPerRead: (cpu.user + cpu.system) / rows.length,
  };
}
