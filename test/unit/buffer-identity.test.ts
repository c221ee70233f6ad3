import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { BUFFER_APPLICATION_ID } from '../../src/buffer/identity.js';
import { BufferReader } from '../../src/queries/reader.js';
import { bufferFailure } from '../../src/buffer/sqlite-errors.js';
import { BufferStore } from '../../src/buffer/store.js';
import { ErrorCodes, isGatewayError } from '../../src/errors.js';

/**
 * The daemon's own opens: a new buffer (no file, a 0-byte file) is made and marked with the
 * gateway's application id; another program's database is refused unchanged; SQLite's errors are
 * told in the gateway's words with what to do, SQLite's text kept as the cause.
 */

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'sg-identity-'));
  dirs.push(d);
  return d;
}

const applicationId = (file: string): number => {
  const db = new Database(file, { readonly: true });
  try {
    return db.pragma('application_id', { simple: true }) as number;
  } finally {
    db.close();
  }
};

describe('buffer identity', () => {
  it('makes and marks a new buffer where there is no file, or a 0-byte one', () => {
    const dir = tempDir();
    const absent = join(dir, 'sub', 'new.db');
    const empty = join(dir, 'empty.db');
    writeFileSync(empty, '');
    for (const file of [absent, empty]) {
      BufferStore.openAt(file).close();
      expect(applicationId(file)).toBe(BUFFER_APPLICATION_ID);
      new BufferReader(file).close();
    }
  });

  it("refuses another program's database for write and for read, whatever the options", () => {
    const file = join(tempDir(), 'foreign.db');
    const db = new Database(file);
    db.exec('CREATE TABLE foo (x)');
    db.close();
    for (const open of [
      () => BufferStore.openAt(file),
      () => BufferStore.openAt(file, { fileMustExist: true, exclusive: true }),
      () => new BufferReader(file),
    ]) {
      let caught: unknown;
      try {
        open();
      } catch (err) {
        caught = err;
      }
      expect(isGatewayError(caught, ErrorCodes.BUFFER_UNOPENABLE)).toBe(true);
      expect((caught as Error).message).toContain('is not a gateway buffer');
    }
    const after = new Database(file, { readonly: true });
    expect(after.pragma('journal_mode', { simple: true })).toBe('delete');
    expect(after.prepare('SELECT name FROM sqlite_master').pluck().all()).toEqual(['foo']);
    after.close();
  });

  it('refuses an empty file where a buffer must exist (adopt, replay)', () => {
    const file = join(tempDir(), 'empty.db');
    writeFileSync(file, '');
    expect(() => BufferStore.openAt(file, { fileMustExist: true, migrate: false })).toThrow(
      /is not a gateway buffer: it is empty \(0 bytes\)/,
    );
  });

  it("tells SQLite's errors in the gateway's words, with what to do", () => {
    const sqlite = (code: string, message: string) =>
      Object.assign(new Error(message), { name: 'SqliteError', code });
    const io = bufferFailure(sqlite('SQLITE_IOERR_SHORT_READ', 'disk I/O error'), '/b.db', 'x');
    expect(io.code).toBe(ErrorCodes.BUFFER_IO);
    expect(io.message).toMatch(
      /^x \/b\.db: the disk or file system failed .*check .*\(SQLite: disk I\/O error\)$/,
    );
    expect((io.cause as Error).message).toBe('disk I/O error');
    const table = bufferFailure(sqlite('SQLITE_ERROR', 'no such table: batches'), '/b.db', 'x');
    expect(table.code).toBe(ErrorCodes.BUFFER_DAMAGED);
    expect(table.message).toMatch(/damaged or not a gateway buffer: .*restore a backup/);
    const atOpen = bufferFailure(
      sqlite('SQLITE_CORRUPT', 'database disk image is malformed'),
      '/b.db',
      'x',
      true,
    );
    expect(atOpen.code).toBe(ErrorCodes.BUFFER_UNOPENABLE);
    expect(
      bufferFailure(sqlite('SQLITE_FULL', 'database or disk is full'), '/b.db', 'x').code,
    ).toBe(ErrorCodes.BUFFER_DISK_FULL);
  });
});
