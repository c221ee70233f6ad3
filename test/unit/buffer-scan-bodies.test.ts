import { copyFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/buffer/migrations.js';
import { BufferReader } from '../../src/queries/reader.js';
import { BufferStore } from '../../src/buffer/store.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { ErrorCodes, GatewayError } from '../../src/errors.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { scanAt } from '../helpers/records.js';
import { queriesOf } from '../helpers/queries.js';

// The scans' bodies live in `scan_bodies` (migration 12); `scans` is a view of `scan_rows` and
// `scan_bodies`. These tests meet a buffer written before it (schema 11), which a start now takes through every later migration.
const BEFORE = 11;
const NOW = Date.parse('2026-11-25T08:00:00Z');
const body = (ref: string, parents: string[] = []) =>
  JSON.stringify({
    reference: ref,
    timeStamp: '2026-11-25T07:00:00Z',
    dcpKey: 'GI-01',
    productModelKey: 'CELL',
    parents,
  });

let store: BufferStore | undefined;
let reader: BufferReader | undefined;
afterEach(() => {
  store?.close();
  reader?.close();
  store = reader = undefined;
});

/**
 * A buffer at the schema before the move, written with SQL as that gateway's store wrote it: one
 * scan in each state (its triggers count them), a batch done and one in flight, parents on two.
 */
function oldBuffer(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'sg-scan-bodies-')), 'buffer.db');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  for (const m of MIGRATIONS.slice(0, BEFORE)) db.exec(m);
  db.pragma(`user_version = ${BEFORE}`);
  db.prepare(
    `INSERT INTO batches (id, mode, state, scan_count, bytes, created_at, finished_at, upstream_state, request_id) VALUES (1, 'direct', 'done', 2, 200, '2026-11-25T07:00:00Z', '2026-11-25T07:01:00Z', 'HasFailures', 'r1')`,
  ).run();
  db.prepare(
    `INSERT INTO batches (id, mode, state, scan_count, bytes, created_at, request_id) VALUES (2, 'presigned', 'uploaded', 1, 100, '2026-11-25T07:02:00Z', 'r2')`,
  ).run();
  const read = db.prepare(
    `INSERT INTO reads (id, input_id, received_at, raw, outcome) VALUES (?, 'in', '2026-11-25T07:00:00.000Z', ?, 'scan')`,
  );
  const scan = db.prepare(
    `INSERT INTO scans (id, read_id, dcp_key, reference, time_utc, body, bytes, state, batch_id, failure_reason, created_at) VALUES (?, ?, 'GI-01', ?, '2026-11-25T07:00:00Z', ?, ?, ?, ?, ?, ?)`,
  );
  const rows: [string, string, number | null, string | null, string[]][] = [
    ['DELIVERED', 'delivered', 1, null, []],
    ['FAILED', 'failed', 1, 'Invalid DCP', []],
    ['IN-FLIGHT', 'batched', 2, null, ['PACK-1']],
    ['PENDING', 'pending', null, null, ['PACK-1', 'PACK-2']],
    ['HELD', 'held', null, 'too large', []],
  ];
  rows.forEach(([ref, state, batch, reason, parents], i) => {
    read.run(i + 1, Buffer.from(ref));
    const b = body(ref, parents);
    scan.run(i + 1, i + 1, ref, b, Buffer.byteLength(b), state, batch, reason, NOW - 3600_000);
  });
  db.close();
  return file;
}

const allScans = (db: Database.Database) =>
  db.prepare(`SELECT * FROM scans ORDER BY id`).all() as Record<string, unknown>[];

describe('scan bodies in a table of their own', () => {
  it('migrates an older buffer: `scans` reads as before, column for column, and the counts hold', () => {
    const file = oldBuffer();
    const raw = new Database(file);
    const before = allScans(raw);
    const parentsBefore = raw
      .prepare(`SELECT parent, scan_id FROM scan_parents ORDER BY 1, 2`)
      .all();
    const totalsBefore = raw.prepare(`SELECT * FROM buffer_totals`).get();
    raw.close();
    expect(parentsBefore).toHaveLength(3);

    const s = (store = BufferStore.openAt(file));
    const db = sqlOf(s);
    expect(db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    expect(db.prepare(`SELECT type FROM sqlite_master WHERE name = 'scans'`).pluck().get()).toBe(
      'view',
    );
    expect(
      db.prepare(`SELECT name FROM pragma_table_info('scan_rows')`).pluck().all(),
    ).not.toContain('body');
    const after = allScans(db);
    expect(after).toEqual(before);
    expect(Object.keys(after[0]!)).toEqual(Object.keys(before[0]!));
    expect(db.prepare(`SELECT parent, scan_id FROM scan_parents ORDER BY 1, 2`).all()).toEqual(
      parentsBefore,
    );
    expect(db.prepare(`SELECT * FROM buffer_totals`).get()).toEqual(totalsBefore);
    expect(s.reports.totals()).toEqual({
      pendingScans: 1,
      pendingBytes: Buffer.byteLength(body('PENDING', ['PACK-1', 'PACK-2'])),
      undeliveredScans: 2,
      undeliveredBytes: expect.any(Number),
    });
    expect(s.reports.scanCounts()).toEqual({
      pending: 1,
      batched: 1,
      delivered: 1,
      failed: 1,
      held: 1,
    });
    // The item lookup reads the bodies through the new table.
    const trace = queriesOf(s).trace('PENDING');
    expect(trace.found).toBe(true);
    expect(trace.scans[0]!.parents).toEqual(['PACK-1', 'PACK-2']);
  });

  it('keeps body, parents and counts with each scan: intake writes both tables, a deleted scan takes its body and parents along', () => {
    const s = (store = BufferStore.openAt(oldBuffer()));
    const db = sqlOf(s);
    const record = {
      ...scanAt('NEW-1', 'GI-01', NOW),
      scan: {
        reference: 'NEW-1',
        dcpKey: 'GI-01',
        instant: new Date(NOW),
        body: body('NEW-1', ['PACK-9']),
      },
    };
    s.intake.commitIntake([record], NOW);
    const id = db.prepare(`SELECT id FROM scans WHERE reference = 'NEW-1'`).pluck().get() as number;
    expect(db.prepare(`SELECT body FROM scans WHERE id = ?`).pluck().get(id)).toBe(
      body('NEW-1', ['PACK-9']),
    );
    expect(db.prepare(`SELECT parent FROM scan_parents WHERE scan_id = ?`).pluck().all(id)).toEqual(
      ['PACK-9'],
    );
    expect(s.reports.totals().pendingScans).toBe(2);

    db.prepare(`DELETE FROM scan_rows WHERE id = ?`).run(id);
    expect(db.prepare(`SELECT count(*) FROM scan_bodies WHERE id = ?`).pluck().get(id)).toBe(0);
    expect(db.prepare(`SELECT count(*) FROM scan_parents WHERE scan_id = ?`).pluck().get(id)).toBe(
      0,
    );
    expect(s.reports.totals().pendingScans).toBe(1);
    expect(db.prepare(`SELECT count(*) FROM scan_rows`).pluck().get()).toBe(
      db.prepare(`SELECT count(*) FROM scan_bodies`).pluck().get(),
    );
  });

  it('forms, streams and finishes a batch from the two tables', () => {
    const s = (store = BufferStore.openAt(oldBuffer()));
    const refs = ['A', 'B', 'C'];
    s.intake.commitIntake(
      refs.map((r) => ({
        ...scanAt(r, 'GI-01', NOW),
        scan: { reference: r, dcpKey: 'GI-01', instant: new Date(NOW), body: body(r) },
      })),
      NOW,
    );
    const batch = formBatch(s, {
      maxScans: 10,
      maxBytes: 1e6,
      mode: 'direct',
      nowIso: new Date(NOW).toISOString(),
    })!;
    expect(batch.scanCount).toBe(4);
    const page = s.batches.batchBodyPage(batch.id, 0, 100)!;
    expect(page.scans).toBe(4);
    const scans = JSON.parse(`[${page.bytes.toString('utf8')}]`) as { reference: string }[];
    expect(scans.map((p) => p.reference)).toEqual(['PENDING', 'A', 'B', 'C']);
    expect(s.batches.batchBody(batch.id)).toBe(`[${page.bytes.toString('utf8')}]`);
    // The whole body as bytes (direct uploads): the same array, byte for byte.
    const bytes = s.batches.batchBodyBytes(batch.id);
    expect(Buffer.isBuffer(bytes)).toBe(true);
    expect(bytes.equals(Buffer.from(s.batches.batchBody(batch.id), 'utf8'))).toBe(true);
    s.batches.updateBatch(batch.id, { state: 'uploaded', requestId: 'r3' });
    s.batches.finishBatch(
      batch.id,
      { state: 'HasFailures', failures: [{ reference: 'B', reason: 'Invalid product' }] },
      new Date(NOW).toISOString(),
    );
    const states = sqlOf(s)
      .prepare(`SELECT reference, state FROM scans WHERE batch_id = ? ORDER BY id`)
      .all(batch.id);
    expect(states).toEqual([
      { reference: 'PENDING', state: 'delivered' },
      { reference: 'A', state: 'delivered' },
      { reference: 'B', state: 'failed' },
      { reference: 'C', state: 'delivered' },
    ]);
    expect(s.reports.scanCounts()).toEqual({ batched: 1, delivered: 4, failed: 2, held: 1 });
  });

  it('finishing a batch also delivers its scans in another state, counted by the triggers', () => {
    const s = (store = BufferStore.openAt(':memory:'));
    s.intake.commitIntake(
      ['X', 'Y', 'Z'].map((r) => scanAt(r, 'GI-01', NOW)),
      NOW,
    );
    const batch = formBatch(s, {
      maxScans: 10,
      maxBytes: 1e6,
      mode: 'direct',
      nowIso: new Date(NOW).toISOString(),
    })!;
    sqlOf(s)
      .prepare(
        `UPDATE scan_rows SET state = 'held', failure_reason = 'set aside' WHERE reference = 'Y'`,
      )
      .run();
    expect(s.reports.scanCounts()).toEqual({ batched: 2, held: 1 });
    s.batches.finishBatch(batch.id, { state: 'Success' }, new Date(NOW).toISOString());
    expect(s.reports.scanCounts()).toEqual({ delivered: 3 });
    expect(s.reports.totals()).toEqual({
      pendingScans: 0,
      pendingBytes: 0,
      undeliveredScans: 0,
      undeliveredBytes: 0,
    });
  });

  it('a second process (replay) does not migrate: an older gateway may still be writing the buffer', () => {
    const file = oldBuffer();
    let err: unknown;
    try {
      BufferStore.openAt(file, { fileMustExist: true, migrate: false }).close();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe(ErrorCodes.BUFFER_UNOPENABLE);
    expect((err as Error).message).toContain(
      `schema version ${BEFORE}, older than this gateway's (${MIGRATIONS.length})`,
    );
    expect((err as Error).message).toContain('systemctl restart scan-gateway');
    const raw = new Database(file, { readonly: true });
    expect(raw.pragma('user_version', { simple: true })).toBe(BEFORE);
    raw.close();
    // Once the daemon has migrated it, the second process opens it.
    BufferStore.openAt(file).close();
    store = BufferStore.openAt(file, { fileMustExist: true, migrate: false });
    expect(store.reports.scanCounts().pending).toBe(1);
  });

  it('reads an older buffer as it is (operations commands beside an older gateway): no migration, the same reports', () => {
    const file = oldBuffer();
    const copy = file.replace(/buffer\.db$/, 'migrated.db');
    copyFileSync(file, copy);
    reader = new BufferReader(file);
    const old = {
      stats: queriesOf(reader).stats(),
      queue: queriesOf(reader).queue(NOW),
      failures: queriesOf(reader).failures({ limit: 10 }),
      trace: queriesOf(reader).trace('IN-FLIGHT'),
    };
    reader.close();
    const raw = new Database(file, { readonly: true });
    expect(raw.pragma('user_version', { simple: true })).toBe(BEFORE);
    expect(raw.prepare(`SELECT type FROM sqlite_master WHERE name = 'scans'`).pluck().get()).toBe(
      'table',
    );
    raw.close();

    BufferStore.openAt(copy).close();
    reader = new BufferReader(copy);
    const migrated = {
      stats: queriesOf(reader).stats(),
      queue: queriesOf(reader).queue(NOW),
      failures: queriesOf(reader).failures({ limit: 10 }),
      trace: queriesOf(reader).trace('IN-FLIGHT'),
    };
    expect(old.queue).toEqual(migrated.queue);
    expect(old.failures).toEqual(migrated.failures);
    expect(old.trace).toEqual(migrated.trace);
    expect(old.trace.scans[0]!.parents).toEqual(['PACK-1']);
    // What the rows say; the files, their pages and the schema version differ by design.
    const counted = (r: typeof old.stats) => ({
      reads: r.reads,
      scans: r.scans,
      batches: r.batches,
      oldest: r.oldestReadAt,
      newest: r.newestReadAt,
    });
    expect(counted(old.stats)).toEqual(counted(migrated.stats));
    expect(old.stats.scans).toEqual({ pending: 1, batched: 1, delivered: 1, failed: 1, held: 1 });
    expect(old.stats.schemaVersion).toBe(BEFORE);
  });
});
