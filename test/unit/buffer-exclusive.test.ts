import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/buffer/migrations.js';
import { BufferStore } from '../../src/buffer/store.js';
import { ErrorCodes } from '../../src/errors.js';

/**
 * The exclusive open of `scan-gateway adopt` (OpenOptions.exclusive): refused while another
 * connection has the file open, and, while it holds the file, no other connection can read it.
 * A live gateway in another process is refused the same way (test/e2e/adopt.test.ts).
 */

const open: { close(): void }[] = [];
afterEach(() => {
  for (const c of open.splice(0)) c.close();
});

function bufferFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'sg-exclusive-')), 'buffer.db');
  BufferStore.openAt(file).close();
  return file;
}

describe('exclusive open of a buffer', () => {
  it('is refused at once while another connection has the file open, naming what to do', () => {
    const file = bufferFile();
    open.push(BufferStore.openAt(file));
    const started = performance.now();
    expect(() => BufferStore.openAt(file, { fileMustExist: true, exclusive: true })).toThrow(
      expect.objectContaining({
        code: ErrorCodes.BUFFER_UNOPENABLE,
        message: expect.stringMatching(
          /is open by another process .*work on a copy of the file with its -wal/,
        ),
      }),
    );
    // No busy wait: a waiting open would spend the whole busy_timeout (5 s, src/buffer/open.ts)
    // before this refusal, so the bound is that wait, not a guess at this machine's speed.
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it('keeps every other connection out until it closes', () => {
    const file = bufferFile();
    const adopted = BufferStore.openAt(file, { fileMustExist: true, exclusive: true });
    const other = new Database(file, { timeout: 0 });
    open.push(other);
    expect(() => other.pragma('user_version', { simple: true })).toThrow(
      expect.objectContaining({ code: 'SQLITE_BUSY' }),
    );
    adopted.close();
    expect(other.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
  });

  it('migrates an older schema forward, as a normal open does', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'sg-exclusive-')), 'buffer.db');
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    for (let v = 0; v < 5; v++) db.exec(MIGRATIONS[v]!);
    db.pragma('user_version = 5');
    db.close();
    const store = BufferStore.openAt(file, { fileMustExist: true, exclusive: true });
    open.push(store);
    expect(store.reports.totals()).toMatchObject({ pendingScans: 0 });
    store.close();
    const after = new Database(file, { readonly: true });
    open.push(after);
    expect(after.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
  });
});
