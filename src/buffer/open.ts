import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { ErrorCodes, GatewayError, isDiskFull } from '../errors.js';
import { MIGRATIONS } from './migrations.js';
import { fillStoredKeys } from './item-keys.js';
import { BUFFER_APPLICATION_ID, checkBufferIdentity, type BufferIdentity } from './identity.js';
import { bufferFailure } from './sqlite-errors.js';

/** `wal_autocheckpoint` of the buffer, in pages (1 MiB at the 4 KiB page size). */
export const WAL_AUTOCHECKPOINT_PAGES = 256;

/** How {@link openBuffer} opens the file; see `BufferStore`. */
export interface OpenOptions {
  /** Skips the write check (and `auto_vacuum` of a new file): a process that only reads. */
  readonly?: boolean;
  /** Refuses a missing file instead of creating it (and its folder). */
  fileMustExist?: boolean;
  /** False: a buffer of an older schema is refused instead of migrated (see `BufferStore`). */
  migrate?: boolean;
  /**
   * Takes the file for this connection alone (`locking_mode = EXCLUSIVE` before its first read):
   * refused at once when another process has it open, and no other process can open it until
   * this connection closes (`scan-gateway adopt`).
   */
  exclusive?: boolean;
}

const ROLLBACK = Symbol('rollback');

/**
 * Opens the buffer at `path` (WAL, `synchronous=FULL`, `busy_timeout`), migrates its schema and
 * checks that it can be written. The one place the connection is made; `BufferStore.open` owns it.
 *
 * Before anything is written, a read-only connection looks at what the file is
 * (identity.ts): only a gateway buffer (its `application_id`, or the schema of one written
 * before the gateway set it) is opened for write, so a wrong path never turns another program's
 * database into a buffer, nor changes a byte of it. A missing file, a 0-byte file or a database
 * without a table is a new buffer, unless `fileMustExist` (adopt, replay): then it is refused.
 *
 * @throws GatewayError `SCANGW_E_BUFFER` when the file cannot be opened, migrated or written (a
 *   file the gateway's user may not write: the message names the user and what to chown);
 *   `SCANGW_E_BUFFER_UNOPENABLE` when it needs a person (not a database, not a gateway buffer, an
 *   empty file with `fileMustExist`, a schema newer than this gateway, no permission);
 *   `SCANGW_E_BUFFER_IO` when the disk failed; `SCANGW_E_BUFFER_DISK_FULL` when a migration ran
 *   out of disk space (undone whole).
 */
export function openBuffer(path: string, options: OpenOptions): Database.Database {
  let db: Database.Database | undefined;
  try {
    if (path !== ':memory:' && !options.fileMustExist)
      mkdirSync(dirname(path), { recursive: true });
    const identity: BufferIdentity =
      path === ':memory:' ? { kind: 'empty' } : identifyFile(path, options);
    if (identity.kind === 'empty' && options.fileMustExist)
      throw new GatewayError(
        ErrorCodes.BUFFER_UNOPENABLE,
        `${path} is not a gateway buffer: it is empty (${statSync(path).size === 0 ? '0 bytes' : 'an SQLite database without a table'}), nothing to deliver or replay. Check the path; the file was not changed`,
      );
    db = new Database(path, {
      fileMustExist: options.fileMustExist ?? false,
      ...(options.exclusive ? { timeout: 0 } : {}),
    });
    // Before the first read: a WAL file is then opened with its index in this process's memory and
    // an exclusive lock on the database file, held until close. Every connection of a live process
    // holds a shared lock on that file while it is open (killed, it holds none), so the first read
    // tells whether one has it open (SQLITE_BUSY), and a gateway started on it later is refused.
    if (options.exclusive) db.pragma('locking_mode = EXCLUSIVE');
    // A new buffer returns pruned pages to the file system (disk-guard.ts); this takes effect only
    // while the file is empty (before the WAL header is written). Older buffers are switched by
    // one VACUUM at start.
    if (identity.kind === 'empty' && !options.readonly) db.pragma('auto_vacuum = INCREMENTAL');
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('busy_timeout = 5000');
    db.pragma('foreign_keys = ON');
    // After a checkpoint the write-ahead log is cut back to this size instead of keeping the room
    // it grew to: on a full disk that room is what intake and delivery need.
    db.pragma('journal_size_limit = 1048576');
    // Checkpoint at 256 pages (1 MiB at 4 KiB), not SQLite's 1000: what the log holds beyond the
    // end of the database file must fit in the disk guard's reserve (4 MiB) when the disk is full,
    // or the checkpoint that would free the log can never run (see IntakeWrites.commitIntake).
    db.pragma(`wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_PAGES}`);
    migrate(db, options.migrate ?? true);
    // A buffer written before the gateway marked its files gets the mark with its first open for
    // write: from then on it is known by its header alone.
    if (!options.readonly && (identity.kind === 'empty' || !identity.marked))
      db.pragma(`application_id = ${BUFFER_APPLICATION_ID}`);
    // What a migration cannot do in SQL: the GS1 keys of scans stored before scan_keys existed.
    if (!options.readonly) fillStoredKeys(db);
  } catch (err) {
    if (db?.open) db.close();
    if (options.exclusive && (err as { code?: string }).code?.startsWith('SQLITE_BUSY')) {
      throw new GatewayError(
        ErrorCodes.BUFFER_UNOPENABLE,
        `the buffer ${path} is open by another process (a gateway running on it, or another adopt): stop that process, or work on a copy of the file with its -wal, then run this again`,
        { cause: err },
      );
    }
    // The refusals raised here name the file already; those of migrate() get it in front.
    if (err instanceof GatewayError && !err.message.includes(path))
      throw new GatewayError(err.code, `cannot open the buffer ${path}: ${err.message}`, {
        cause: err,
        retryable: err.retryable,
      });
    throw bufferFailure(err, path, 'cannot open the buffer', true);
  }
  if (!options.readonly && path !== ':memory:') assertWritable(db, path);
  return db;
}

/**
 * What the file at `path` is, asked on a read-only connection closed again before the buffer's
 * own opens (a read-only connection neither writes the header nor checkpoints a -wal on close).
 * A missing or 0-byte file is `empty` without opening it.
 */
function identifyFile(path: string, options: OpenOptions): BufferIdentity {
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    if (options.fileMustExist)
      throw new GatewayError(
        ErrorCodes.BUFFER_UNOPENABLE,
        `there is no buffer at ${path}: check the path`,
      );
    return { kind: 'empty' };
  }
  // 0 bytes and no write-ahead log beside it holding commits: nothing was ever written.
  if (size === 0 && !(statSync(`${path}-wal`, { throwIfNoEntry: false })?.size ?? 0))
    return { kind: 'empty' };
  const probe = new Database(path, {
    readonly: true,
    fileMustExist: true,
    ...(options.exclusive ? { timeout: 0 } : {}),
  });
  try {
    return checkBufferIdentity(probe, path);
  } finally {
    probe.close();
  }
}

/**
 * SQLite opens a file it may not write read-only without a word; the first commit would fail,
 * and a later chmod would not help the open connection. A write rolled back tells now. The
 * connection is closed when it fails.
 */
function assertWritable(db: Database.Database, path: string): void {
  try {
    db.transaction(() => {
      db.prepare('INSERT INTO space_probe (pad) VALUES (NULL)').run();
      throw ROLLBACK;
    }).immediate();
  } catch (err) {
    if (err === ROLLBACK) return;
    db.close();
    throw bufferFailure(err, path, 'cannot write the buffer', true);
  }
}

function migrate(db: Database.Database, allowed: boolean): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > MIGRATIONS.length) {
    throw new GatewayError(
      ErrorCodes.BUFFER_UNOPENABLE,
      `the buffer has schema version ${version}, newer than this gateway knows (${MIGRATIONS.length}); downgrade is not supported`,
    );
  }
  if (!allowed && version > 0 && version < MIGRATIONS.length) {
    throw new GatewayError(
      ErrorCodes.BUFFER_UNOPENABLE,
      `the buffer has schema version ${version}, older than this gateway's (${MIGRATIONS.length}): an older gateway may still be running on it. Restart the service (\`systemctl restart scan-gateway\`): its start migrates the buffer; then run this again`,
    );
  }
  for (let v = version; v < MIGRATIONS.length; v++) {
    try {
      db.transaction(() => {
        db.exec(MIGRATIONS[v]!);
        db.pragma(`user_version = ${v + 1}`);
      }).immediate();
    } catch (err) {
      if (!isDiskFull(err)) throw err;
      // A step may rewrite a table (version 12 rewrites the scans: the log holds about the
      // buffer's size until it commits). Rolled back whole, so the person needs to know only that.
      throw new GatewayError(
        ErrorCodes.BUFFER_DISK_FULL,
        `the upgrade of its schema from version ${v} to ${v + 1} ran out of disk space and was undone (the buffer is as it was); free about twice the buffer's size on its disk (\`df -h\`) and start again`,
        { cause: err },
      );
    }
  }
}
