import { ErrorCodes, GatewayError } from '../errors.js';
import Database from 'better-sqlite3';
import { BufferReports } from './reports.js';

/**
 * A buffer opened read-only for the operations commands (`queue`, `failures`, `buffer stats`,
 * `buffer backup`), beside a running gateway or on a backup: no migration, no write, a busy
 * timeout so that the daemon's commits do not fail the command.
 */
export class BufferReader {
  private readonly db: Database.Database;
  readonly reports: BufferReports;

  /**
   * Opens `path` read-only and checks that it is a buffer (it has a `batches` table). A buffer of
   * an older schema is read as it is (no migration): `scan_rows` and `scan_bodies` are then
   * temporary views of its `scans` table.
   *
   * @throws the SQLite error when the file is missing, unreadable or not a buffer.
   */
  constructor(readonly path: string) {
    this.db = new Database(path, { readonly: true, fileMustExist: true });
    try {
      this.db.pragma('busy_timeout = 5000');
      this.db.prepare('SELECT count(*) FROM batches').get();
      if (
        this.db
          .prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'scan_rows'`)
          .get() === undefined
      ) {
        // A buffer from before the scans' bodies moved to a table of their own (migration 12),
        // read as it is: the names the reports use, as views of this connection only (TEMP: the
        // file is not written).
        this.db.exec(
          `CREATE TEMP VIEW scan_rows AS SELECT * FROM main.scans; CREATE TEMP VIEW scan_bodies AS SELECT id, body FROM main.scans;`,
        );
      }
    } catch (err) {
      this.db.close();
      throw err;
    }
    this.reports = new BufferReports(this.db, path);
  }

  /**
   * Writes one consistent snapshot of the buffer to `file` (VACUUM INTO copies from one read
   * transaction). The page-stepping backup API starts over whenever the running gateway writes
   * between two steps, and on a busy buffer that grows while it is copied it never finished
   * (seen in CI: 50 scans every 2 ms).
   */
  copyTo(file: string): void {
    this.db.prepare('VACUUM INTO ?').run(file);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}

/**
 * Makes a copy written by {@link BufferReader.copyTo} self-contained (no -wal beside it), checks
 * it (PRAGMA quick_check) and counts its rows.
 *
 * @throws Error when the check does not answer `ok`, or the SQLite error when the copy cannot be opened.
 */
export function checkBufferCopy(file: string): {
  integrity: string;
  reads: number;
  scans: number;
  batches: number;
} {
  const copy = new Database(file, { fileMustExist: true });
  try {
    copy.pragma('journal_mode = DELETE');
    const integrity = String(copy.pragma('quick_check', { simple: true }));
    if (integrity !== 'ok') throw new GatewayError(ErrorCodes.BUFFER, `quick_check: ${integrity}`);
    const count = (table: string) =>
      copy.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number;
    return { integrity, reads: count('reads'), scans: count('scans'), batches: count('batches') };
  } finally {
    copy.close();
  }
}
