import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/buffer/migrations.js';
import { BufferStore } from '../../src/buffer/store.js';
import { ErrorCodes, GatewayError } from '../../src/errors.js';

// The schema before migration 12 (the one that rewrites the scans); a start walks every later one too.
const BEFORE = 11;
const SCANS = 12_000;

/**
 * Migration 12 rewrites the scans (their bodies move to `scan_bodies`), which
 * needs about the buffer's size again while it runs. On a disk without that room it must be
 * undone whole and say what to do; with room it must then succeed. A real, small file system (a
 * tmpfs mounted by the test, as the disk-full tests (disk-full-tmpfs.test.ts) do; root is needed, and the test
 * fails rather than skips without it).
 */
describe('the schema upgrade of the scans on a full disk (tmpfs)', () => {
  let base = '';
  let disk = '';
  let mounted = false;

  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), 'sg-migrate-full-'));
    disk = join(base, 'disk');
    mkdirSync(disk);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', disk], { stdio: 'pipe' });
    mounted = true;
  });

  afterAll(() => {
    // Lazy: a handle a failed expectation left open must not hide that failure behind umount's.
    if (mounted) execFileSync('umount', ['-l', disk], { stdio: 'pipe' });
    rmSync(base, { recursive: true, force: true });
  });

  it('is undone whole without the room, says so with its code, and succeeds once there is room', () => {
    // Written beside the small disk (its own writing needs more room than the file), then copied in.
    const written = join(base, 'written.db');
    const old = new Database(written);
    old.pragma('journal_mode = WAL');
    for (const m of MIGRATIONS.slice(0, BEFORE)) old.exec(m);
    old.pragma(`user_version = ${BEFORE}`);
    old.transaction(() => {
      old
        .prepare(
          `WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ?) INSERT INTO reads (id, input_id, received_at, raw, outcome) SELECT x, 'in', '2026-11-25T00:00:00.000Z', randomblob(20), 'scan' FROM n`,
        )
        .run(SCANS);
      old
        .prepare(
          `INSERT INTO scans (read_id, dcp_key, reference, time_utc, body, bytes, created_at)
         SELECT id, 'GI-01', printf('REF-%08d', id), '2026-11-25T00:00:00.000Z', printf('{"reference":"REF-%08d","parents":[],"pad":"%s"}', id, hex(randomblob(100))), 250, 0 FROM reads`,
        )
        .run();
    })();
    old.pragma('wal_checkpoint(TRUNCATE)');
    old.pragma('journal_mode = DELETE');
    old.close();
    const path = join(disk, 'buffer.db');
    copyFileSync(written, path);
    const fileBytes = statSync(path).size;
    // The premise: the file fits, its rewrite does not (file + log of about its size + the bodies again > 8 MiB).
    expect(fileBytes).toBeGreaterThan(3.5 * 2 ** 20);
    expect(fileBytes).toBeLessThan(6 * 2 ** 20);

    let err: unknown;
    try {
      BufferStore.openAt(path).close();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe(ErrorCodes.BUFFER_DISK_FULL);
    expect((err as Error).message).toContain(
      `the upgrade of its schema from version ${BEFORE} to ${BEFORE + 1} ran out of disk space and was undone`,
    );
    expect((err as Error).message).toContain('df -h');

    const check = new Database(path);
    expect(check.pragma('user_version', { simple: true })).toBe(BEFORE);
    expect(check.pragma('quick_check', { simple: true })).toBe('ok');
    expect(check.prepare(`SELECT type FROM sqlite_master WHERE name = 'scans'`).pluck().get()).toBe(
      'table',
    );
    expect(check.prepare(`SELECT count(*) FROM scans`).pluck().get()).toBe(SCANS);
    check.close();

    execFileSync('mount', ['-o', 'remount,size=32m', disk], { stdio: 'pipe' });
    const store = BufferStore.openAt(path);
    try {
      expect(store.reports.scanCounts()).toEqual({ pending: SCANS });
      expect(store.batches.batchBodyPage(0, 0, 1)).toBeUndefined();
    } finally {
      store.close();
    }
    const after = new Database(path, { readonly: true });
    expect(after.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    expect(
      after
        .prepare(`SELECT count(*) FROM scans WHERE body LIKE '{"reference":"REF-%'`)
        .pluck()
        .get(),
    ).toBe(SCANS);
    after.close();
  });
});
