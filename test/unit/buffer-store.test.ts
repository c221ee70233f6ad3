import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/buffer/migrations.js';
import { BufferStore } from '../../src/buffer/store.js';
import { PENDING_PAGE_ROWS } from '../../src/buffer/batches.js';
import { ErrorCodes, isDiskFull } from '../../src/errors.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { scanRecord } from '../helpers/records.js';
import { queriesOf } from '../helpers/queries.js';

let store: BufferStore | undefined;
afterEach(() => store?.close());

function open(): BufferStore {
  store = BufferStore.openAt(join(mkdtempSync(join(tmpdir(), 'sg-store-')), 'buffer.db'));
  return store;
}

const nowIso = new Date(0).toISOString();

describe('buffer store', () => {
  it('does no I/O until open(), and its parts are there only from open() to close()', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'sg-store-')), 'later', 'buffer.db');
    const s = new BufferStore(file);
    expect(existsSync(file)).toBe(false);
    expect(s.isOpen).toBe(false);
    expect(() => s.batches).toThrow(expect.objectContaining({ code: ErrorCodes.NOT_RUNNING }));
    expect(() => s.atomically(() => 1)).toThrow(/is not open/);
    s.open();
    store = s;
    expect(existsSync(file)).toBe(true);
    expect(s.reports.totals()).toMatchObject({ pendingScans: 0 });
    s.close();
    expect(s.isOpen).toBe(false);
    expect(() => s.intake).toThrow(/is not open/);
  });

  it('uses WAL and synchronous=FULL', () => {
    const s = open();
    expect(sqlOf(s).pragma('journal_mode', { simple: true })).toBe('wal');
    expect(sqlOf(s).pragma('synchronous', { simple: true })).toBe(2);
  });

  it('splits a batch and maps each failure to its scan', () => {
    const s = open();
    s.intake.commitIntake(
      ['A', 'B', 'C', 'D'].map((r) => scanRecord(r, 40)),
      0,
    );
    const batch = formBatch(s, { maxScans: 10, maxBytes: 10_000, mode: 'direct', nowIso })!;
    expect(s.batches.splitBatch(batch.id)).toBe(true);
    expect(s.batches.batch(batch.id)?.scanCount).toBe(2);
    expect(s.batches.pending().count).toBe(2);
    s.batches.finishBatch(
      batch.id,
      {
        state: 'HasFailures',
        processed: 2,
        failed: 1,
        failures: [{ reference: 'B', reason: 'Invalid DCP' }],
      },
      nowIso,
    );
    expect(s.reports.scanCounts()).toEqual({ delivered: 1, failed: 1, pending: 2 });
    expect(queriesOf(s).recentProblems(5)[0]).toMatchObject({
      kind: 'failed',
      reference: 'B',
      reason: 'Invalid DCP',
    });
  });

  it('reads pending scans page by page: every one once, in id order, past the pages and the scans batched between them', () => {
    const s = open();
    const count = PENDING_PAGE_ROWS * 2 + 500;
    s.intake.commitIntake(
      Array.from({ length: count }, (_, i) => scanRecord(`P${i}`, 40)),
      0,
    );
    // The oldest 10 go into a batch: no longer pending, and not read.
    const batch = formBatch(s, { maxScans: 10, maxBytes: 1e9, mode: 'direct', nowIso })!;
    expect(batch.scanCount).toBe(10);
    const ids = s.atomically(() => [...s.batches.pendingScans()].map((r) => r.id));
    const expected = sqlOf(s)
      .prepare(`SELECT id FROM scans WHERE state = 'pending' ORDER BY id`)
      .pluck()
      .all() as number[];
    expect(expected).toHaveLength(count - 10);
    expect(ids).toEqual(expected);
  });

  it('counts scans by state for stats exactly as the rows say, delivered and batched ones included (outside the partial state index)', () => {
    const s = open();
    s.intake.commitIntake(
      Array.from({ length: 30 }, (_, i) => scanRecord(`C${i}`, 40)),
      0,
    );
    const done = formBatch(s, { maxScans: 10, maxBytes: 1e9, mode: 'direct', nowIso })!;
    s.batches.finishBatch(
      done.id,
      {
        state: 'HasFailures',
        processed: 9,
        failed: 1,
        failures: [{ reference: 'C3', reason: 'Invalid DCP' }],
      },
      nowIso,
    );
    const held = formBatch(s, { maxScans: 5, maxBytes: 1e9, mode: 'direct', nowIso })!;
    s.batches.holdBatch(held.id, 'refused');
    formBatch(s, { maxScans: 5, maxBytes: 1e9, mode: 'direct', nowIso });
    const rows = Object.fromEntries(
      (
        sqlOf(s)
          .prepare(`SELECT state AS k, count(*) AS n FROM scans NOT INDEXED GROUP BY state`)
          .all() as { k: string; n: number }[]
      ).map((r) => [r.k, r.n]),
    );
    expect(rows).toEqual({ delivered: 9, failed: 1, held: 5, batched: 5, pending: 10 });
    expect(queriesOf(s).stats().scans).toEqual(rows);
    expect(
      sqlOf(s).prepare(`SELECT sql FROM sqlite_master WHERE name = 'scans_state'`).pluck().get(),
    ).toContain(`WHERE state NOT IN ('delivered', 'batched')`);
    // A delivered scan's row still says batched (migration 13): the view says delivered.
    expect(
      sqlOf(s)
        .prepare(`SELECT count(*) FROM scan_rows WHERE batch_id = ? AND state = 'batched'`)
        .pluck()
        .get(done.id),
    ).toBe(9);
  });

  it('keeps everything across a reopen', () => {
    const s = open();
    s.intake.commitIntake(
      [
        scanRecord('A', 40),
        {
          inputId: 'in',
          receivedAt: new Date(0),
          raw: Buffer.from([0xff]),
          outcome: 'rejected',
          reason: 'not UTF-8',
        },
      ],
      0,
    );
    s.close();
    const again = BufferStore.openAt(s.path);
    store = again;
    expect(again.batches.pending().count).toBe(1);
    expect(queriesOf(again).recentProblems(5)[0]).toMatchObject({
      kind: 'rejected',
      reason: 'not UTF-8',
    });
  });

  it('keeps the undelivered totals exact through commit, batching, split, finish and hold', () => {
    const s = open();
    const exact = () => {
      const row = sqlOf(s)
        .prepare(
          `SELECT coalesce(sum(state = 'pending'), 0) AS pendingScans, coalesce(sum((state = 'pending') * bytes), 0) AS pendingBytes,
             count(*) AS undeliveredScans, coalesce(sum(bytes), 0) AS undeliveredBytes FROM scans WHERE state IN ('pending', 'batched')`,
        )
        .get();
      expect(s.reports.totals()).toEqual(row);
    };
    s.intake.commitIntake(
      ['A', 'B', 'C', 'D', 'E'].map((r, i) => scanRecord(r, 40 + i)),
      0,
    );
    exact();
    expect(s.reports.totals()).toEqual({
      pendingScans: 5,
      pendingBytes: 210,
      undeliveredScans: 5,
      undeliveredBytes: 210,
    });
    const b1 = formBatch(s, { maxScans: 4, maxBytes: 10_000, mode: 'direct', nowIso })!;
    exact();
    s.batches.splitBatch(b1.id);
    exact();
    s.batches.finishBatch(
      b1.id,
      { state: 'HasFailures', failures: [{ reference: 'A', reason: 'Invalid DCP' }] },
      nowIso,
    );
    exact();
    const b2 = formBatch(s, { maxScans: 10, maxBytes: 10_000, mode: 'direct', nowIso })!;
    s.batches.holdBatch(b2.id, 'HTTP 400');
    exact();
    expect(s.reports.totals()).toEqual({
      pendingScans: 0,
      pendingBytes: 0,
      undeliveredScans: 0,
      undeliveredBytes: 0,
    });
  });

  it('records a file content hash in the same transaction as its reads', () => {
    const s = open();
    expect(s.intake.knownFile('inbox', 'abc')).toBe(false);
    s.intake.commitIntake([scanRecord('A', 40)], 0, [
      { inputId: 'inbox', hash: 'abc', name: 'a.csv', items: 1 },
    ]);
    expect(s.intake.knownFile('inbox', 'abc')).toBe(true);
    expect(s.intake.knownFile('other', 'abc')).toBe(false);
  });

  it('keeps what replay needs of a read: the DCP the source named, parents and attributes', () => {
    const s = open();
    s.intake.commitIntake(
      [
        {
          ...scanRecord('A', 40),
          dcpKey: 'SRC-DCP',
          parents: ['TRAY-1'],
          attributes: { line: 'L1' },
        },
      ],
      0,
    );
    expect(
      sqlOf(s)
        .prepare('SELECT dcp_key, source_dcp_key, parents, attributes, input_level FROM reads')
        .get(),
    ).toEqual({
      dcp_key: 'GI-01',
      source_dcp_key: 'SRC-DCP',
      parents: '["TRAY-1"]',
      attributes: '{"line":"L1"}',
      input_level: 0,
    });
  });

  it('migrates a buffer written with schema 1, keeping its data and computing the totals', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-store-v1-'));
    const file = join(dir, 'buffer.db');
    const v1 = new Database(file);
    v1.exec(MIGRATIONS[0]!);
    v1.pragma('user_version = 1');
    v1.prepare(
      `INSERT INTO reads (id, input_id, received_at, raw, outcome) VALUES (1, 'in', '2026-01-01T00:00:00.000Z', x'41', 'scan')`,
    ).run();
    v1.prepare(
      `INSERT INTO scans (read_id, dcp_key, reference, time_utc, body, bytes, created_at) VALUES (1, 'GI-01', 'A', '', '{"reference":"A"}', 17, 0)`,
    ).run();
    v1.close();
    store = BufferStore.openAt(file);
    expect(sqlOf(store).pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    expect(store.reports.totals()).toEqual({
      pendingScans: 1,
      pendingBytes: 17,
      undeliveredScans: 1,
      undeliveredBytes: 17,
    });
    expect(
      formBatch(store, { maxScans: 10, maxBytes: 1000, mode: 'direct', nowIso })?.scanCount,
    ).toBe(1);
  });

  it('refuses at once a buffer it cannot write, saying who runs and what to chown', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-store-ro-'));
    chmodSync(dir, 0o777);
    const file = join(dir, 'buffer.db');
    BufferStore.openAt(file).close();
    chmodSync(file, 0o644);
    let message: string;
    if (process.getuid?.() === 0) {
      // root writes anything: open it as nobody, in a child process, the way a service user would.
      const script = `import(${JSON.stringify(pathToFileURL(join(PACKAGE_ROOT, 'dist/src/buffer/store.js')).href)}).then(({ BufferStore }) => { try { BufferStore.openAt(${JSON.stringify(file)}); console.log('opened'); } catch (e) { console.log(e.message); } })`;
      const r = spawnSync('runuser', ['-u', 'nobody', '--', process.execPath, '-e', script], {
        encoding: 'utf8',
        timeout: 20_000,
      });
      expect(r.error, 'runuser (util-linux) is needed to run this test as root').toBeUndefined();
      message = r.stdout.trim();
    } else {
      chmodSync(file, 0o444);
      message = (() => {
        try {
          BufferStore.openAt(file).close();
          return 'opened';
        } catch (err) {
          return (err as Error).message;
        }
      })();
    }
    expect(message).toContain(`cannot write the buffer ${file}`);
    expect(message).toMatch(/the gateway runs as .*uid \d+.*chown/);
  });

  it('refuses a buffer from a newer gateway instead of guessing', () => {
    const s = open();
    sqlOf(s).pragma(`user_version = ${MIGRATIONS.length + 1}`);
    s.close();
    expect(() => BufferStore.openAt(s.path)).toThrow(/newer than this gateway knows/);
  });

  it('reports a full database as SQLITE_FULL, loses nothing committed, and works again when room returns', () => {
    const s = open();
    s.intake.commitIntake([scanRecord('A', 40)], 0);
    const pages = sqlOf(s).pragma('page_count', { simple: true }) as number;
    sqlOf(s).pragma(`max_page_count = ${pages}`);
    let error: unknown;
    try {
      s.intake.commitIntake(
        Array.from({ length: 200 }, (_, i) => scanRecord(`F${i}`, 2000)),
        0,
      );
    } catch (err) {
      error = err;
    }
    expect(isDiskFull(error)).toBe(true);
    expect(s.space.probeSpace()).toBe(false);
    expect(s.reports.totals().pendingScans).toBe(1);
    expect(sqlOf(s).pragma('integrity_check', { simple: true })).toBe('ok');
    sqlOf(s).pragma(`max_page_count = ${pages + 10_000}`);
    expect(s.space.probeSpace()).toBe(true);
    s.intake.commitIntake(
      Array.from({ length: 200 }, (_, i) => scanRecord(`F${i}`, 2000)),
      0,
    );
    expect(s.reports.totals().pendingScans).toBe(201);
    expect(sqlOf(s).prepare('SELECT count(*) FROM space_probe').pluck().get()).toBe(0);
  });
});
