import { ErrorCodes, GatewayError } from '../errors.js';
import Database from 'better-sqlite3';
import { checkBufferIdentity } from '../buffer/identity.js';
import { BufferReports } from './reports.js';
import { bufferFailure, withBufferFailures } from '../buffer/sqlite-errors.js';

/**
 * A buffer opened read-only for the operations commands (`queue`, `failures`, `buffer stats`,
 * `buffer backup`), beside a running gateway or on a backup: no migration, no write, a busy
 * timeout so that the daemon's commits do not fail the command.
 */
export class BufferReader {
  private readonly db: Database.Database;
  readonly reports: BufferReports;

  /**
   * Opens `path` read-only and checks that it is a gateway buffer (identity.ts: its
   * `application_id`, or the schema of one written before that) without writing a byte of it. A
   * buffer of an older schema is read as it is (no migration): `scan_rows` and `scan_bodies` are
   * then temporary views of its `scans` table. {@link reports} throws `GatewayError`s that say
   * what to do (sqlite-errors.ts), never SQLite's words alone.
   *
   * @throws GatewayError `SCANGW_E_BUFFER_UNOPENABLE` when the file is missing, not a database,
   *   empty, not a gateway buffer or of a newer schema, or may not be read; `SCANGW_E_BUFFER_IO`
   *   when the disk fails; `SCANGW_E_BUFFER` when another process holds it locked.
   */
  constructor(readonly path: string) {
    let db: Database.Database | undefined;
    try {
      db = new Database(path, { readonly: true, fileMustExist: true });
      db.pragma('busy_timeout = 5000');
      if (checkBufferIdentity(db, path).kind === 'empty')
        throw new GatewayError(
          ErrorCodes.BUFFER_UNOPENABLE,
          `${path} is not a gateway buffer: it is empty (no table). Check the path (buffer.path, --buffer); the file was not changed`,
        );
      if (
        db
          .prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'scan_rows'`)
          .get() === undefined
      ) {
        // A buffer from before the scans' bodies moved to a table of their own (migration 12),
        // read as it is: the names the reports use, as views of this connection only (TEMP: the
        // file is not written).
        db.exec(
          `CREATE TEMP VIEW scan_rows AS SELECT * FROM main.scans; CREATE TEMP VIEW scan_bodies AS SELECT id, body FROM main.scans;`,
        );
      }
    } catch (err) {
      db?.close();
      throw bufferFailure(err, path, 'cannot read the buffer', true);
    }
    this.db = db;
    this.reports = withBufferFailures(
      new BufferReports(this.db, path),
      path,
      'cannot read the buffer',
    );
  }

  /**
   * Writes one consistent snapshot of the buffer to `file` (VACUUM INTO copies from one read
   * transaction). The page-stepping backup API starts over whenever the running gateway writes
   * between two steps, and on a busy buffer that grows while it is copied it never finished
   * (seen in CI: 50 scans every 2 ms).
   */
  copyTo(file: string): void {
    try {
      this.db.prepare('VACUUM INTO ?').run(file);
    } catch (err) {
      throw bufferFailure(err, this.path, 'cannot copy the buffer');
    }
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
