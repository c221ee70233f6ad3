import Database from 'better-sqlite3';
import { ErrorCodes, GatewayError } from '../errors.js';
import { bufferFailure } from './sqlite-errors.js';

/**
 * Makes a copy written by `BufferReader.copyTo` (src/queries/reader.ts) self-contained (no -wal beside it), checks
 * it (PRAGMA quick_check) and counts its rows.
 *
 * @throws GatewayError `SCANGW_E_BUFFER` when the check does not answer `ok`, or what
 *   {@link bufferFailure} makes of SQLite's error when the copy cannot be opened or read.
 */
export function checkBufferCopy(file: string): {
  integrity: string;
  reads: number;
  scans: number;
  batches: number;
} {
  let copy: Database.Database;
  try {
    copy = new Database(file, { fileMustExist: true });
  } catch (err) {
    throw bufferFailure(err, file, 'cannot open the copy');
  }
  try {
    copy.pragma('journal_mode = DELETE');
    const integrity = String(copy.pragma('quick_check', { simple: true }));
    if (integrity !== 'ok') throw new GatewayError(ErrorCodes.BUFFER, `quick_check: ${integrity}`);
    const count = (table: string) =>
      copy.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number;
    return { integrity, reads: count('reads'), scans: count('scans'), batches: count('batches') };
  } catch (err) {
    throw bufferFailure(err, file, 'cannot check the copy');
  } finally {
    copy.close();
  }
}
