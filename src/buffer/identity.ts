import type Database from 'better-sqlite3';
import { ErrorCodes, GatewayError } from '../errors.js';
import { MIGRATIONS } from './migrations.js';

/**
 * `PRAGMA application_id` of a gateway buffer: the four ASCII bytes `SCGW` (0x53434757) in the
 * database header at offset 68, so `file` and a hex dump name the file too. Written by every open
 * for write (open.ts) since the gateway started checking it; a buffer written before has 0 there
 * and is recognised by its schema instead (see {@link checkBufferIdentity}).
 */
export const BUFFER_APPLICATION_ID = 0x53434757;

/** The tables every schema version of the buffer has had since migration 1. */
const GATEWAY_TABLES = ['reads', 'batches'] as const;

/** What the header and schema of a file say it is, read without writing anything. */
export type BufferIdentity =
  /** No schema at all (a 0-byte file, or a database with no table): nothing to lose, nothing to read. */
  | { kind: 'empty' }
  /** A gateway buffer: its `application_id`, or (written before that) its schema. */
  | { kind: 'buffer'; version: number; marked: boolean };

/**
 * Tells, from a connection that has written nothing yet (read-only, or before any pragma that
 * writes), whether the file is a gateway buffer this gateway may open. Reads the header
 * (`application_id`, `user_version`) and the names of the tables, nothing else.
 *
 * @throws GatewayError `SCANGW_E_BUFFER_UNOPENABLE` naming what the file is instead: another
 *   program's database (another `application_id`, or tables but not the buffer's), or a buffer of
 *   a schema newer than this gateway knows.
 */
export function checkBufferIdentity(db: Database.Database, path: string): BufferIdentity {
  const applicationId = db.pragma('application_id', { simple: true }) as number;
  const version = db.pragma('user_version', { simple: true }) as number;
  if (applicationId !== 0 && applicationId !== BUFFER_APPLICATION_ID) {
    throw notABuffer(
      path,
      `it is another program's SQLite database (application_id 0x${(applicationId >>> 0).toString(16).padStart(8, '0')}, not the gateway's 0x${BUFFER_APPLICATION_ID.toString(16)})`,
    );
  }
  if (version > MIGRATIONS.length) {
    throw new GatewayError(
      ErrorCodes.BUFFER_UNOPENABLE,
      `the buffer ${path} has schema version ${version}, newer than this gateway knows (${MIGRATIONS.length}); downgrade is not supported: run the gateway version that wrote it, or restore a backup written by this one. The file was not changed`,
    );
  }
  const tables = new Set(
    (
      db.prepare(`SELECT name FROM sqlite_master WHERE type IN ('table', 'view')`).all() as {
        name: string;
      }[]
    ).map((t) => t.name),
  );
  if (applicationId === BUFFER_APPLICATION_ID) {
    if (!GATEWAY_TABLES.every((t) => tables.has(t)))
      throw notABuffer(
        path,
        `it is marked as a gateway buffer but lacks its tables (${GATEWAY_TABLES.filter((t) => !tables.has(t)).join(', ')}): it is damaged`,
      );
    return { kind: 'buffer', version, marked: true };
  }
  if (version === 0 && tables.size === 0) return { kind: 'empty' };
  if (version === 0 || !GATEWAY_TABLES.every((t) => tables.has(t)))
    throw notABuffer(
      path,
      `it is an SQLite database, but not one the gateway wrote (schema version ${version}, ${tables.size} table${tables.size === 1 ? '' : 's'}, none or not all of ${GATEWAY_TABLES.join(', ')})`,
    );
  return { kind: 'buffer', version, marked: false };
}

function notABuffer(path: string, what: string): GatewayError {
  return new GatewayError(
    ErrorCodes.BUFFER_UNOPENABLE,
    `${path} is not a gateway buffer: ${what}. Check the path (buffer.path, --buffer, the file given to adopt); the file was not changed`,
  );
}
