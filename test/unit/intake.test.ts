import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Intake, type IntakeGate, type IntakeOptions } from '../../src/intake/intake.js';
import { BufferStore } from '../../src/buffer/store.js';
import { configSchema } from '../../src/config/schema.js';
import { ErrorCodes, isQuotaRefusal, isTooLargeForBuffer } from '../../src/errors.js';
import type { IntakeItem } from '../../src/inputs/types.js';
import { silentLogger } from '../../src/log.js';
import { mappingContext } from '../../src/mapping/map-read.js';
import { sqlOf } from '../helpers/buffer-sql.js';

const config = configSchema.parse({
  site: { id: 'intake', timezone: 'Europe/Berlin' },
  upstream: {
    baseUrl: 'http://127.0.0.1:1',
    authUrl: 'http://127.0.0.1:1',
    clientId: 'demo-client',
  },
  dcps: [
    {
      key: 'GI-01',
      kind: 'goodsIn',
      productModelKey: 'PACK-A',
      supplierKey: 'SUP-0042',
      duplicateWindowMs: 0,
    },
  ],
  inputs: [{ id: 'inbox', type: 'files', dir: '/tmp/unused', dcp: 'GI-01' }],
});

let store: BufferStore | undefined;
let intake: Intake | undefined;
afterEach(() => {
  intake?.close();
  store?.close();
});

function setup(
  gate?: IntakeGate,
  otherWriter?: IntakeOptions['otherWriter'],
  otherWriterWaitMs?: number,
): { store: BufferStore; intake: Intake } {
  store = BufferStore.openAt(join(mkdtempSync(join(tmpdir(), 'sg-intake-')), 'buffer.db'));
  intake = new Intake({
    store,
    mapping: mappingContext(config),
    logger: silentLogger(),
    ...(gate ? { gate } : {}),
    ...(otherWriter ? { otherWriter } : {}),
    ...(otherWriterWaitMs === undefined ? {} : { otherWriterWaitMs }),
  });
  intake.open();
  return { store, intake };
}

const reads = (prefix: string, n: number): IntakeItem[] =>
  Array.from({ length: n }, (_, i) => ({
    kind: 'read',
    read: { inputId: 'inbox', raw: Buffer.from(`${prefix}-${i}`), receivedAt: new Date() },
  }));

describe('intake beside another writer of the buffer (the batch thread)', () => {
  it('commits once the other write ends, serving the event loop meanwhile instead of waiting for the lock', async () => {
    let release!: () => void;
    let writing: Promise<void> | undefined = new Promise<void>((r) => (release = r));
    // Its bound long: the test looks at the group while it waits, however slow the machine.
    const { store, intake } = setup(undefined, () => writing, 60_000);
    // Another connection holds the write lock, as the batch thread does while it forms a batch.
    const other = new Database(store.path);
    other.exec('BEGIN IMMEDIATE');
    let settled = false;
    const submitted = intake.submit(reads('W', 3)).finally(() => (settled = true));
    // Turns of the loop pass: a commit tried now would sleep in SQLite's busy handler for its
    // 5 s and fail SQLITE_BUSY, with the submit rejected.
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    other.exec('COMMIT');
    other.close();
    writing = undefined;
    release();
    await expect(submitted).resolves.toMatchObject({
      outcomes: [{ outcome: 'scan' }, { outcome: 'scan' }, { outcome: 'scan' }],
    });
    expect(store.batches.pending().count).toBe(3);
  });

  it('commits after its bound when the other write never ends', async () => {
    const { store, intake } = setup(undefined, () => new Promise<void>(() => {}));
    await expect(intake.submit(reads('N', 2))).resolves.toMatchObject({
      outcomes: [{ outcome: 'scan' }, { outcome: 'scan' }],
    });
    expect(store.batches.pending().count).toBe(2);
  });
});

describe('intake: file hashes and the quota gate', () => {
  it('reads the buffer only in open(), and refuses submits before it', async () => {
    store = BufferStore.openAt(join(mkdtempSync(join(tmpdir(), 'sg-intake-')), 'buffer.db'));
    const closedStore = new BufferStore(
      join(mkdtempSync(join(tmpdir(), 'sg-intake-')), 'buffer.db'),
    );
    // Built on a store not open yet: the constructor does not touch it.
    const early = new Intake({
      store: closedStore,
      mapping: mappingContext(config),
      logger: silentLogger(),
    });
    expect(() => early.open()).toThrow(expect.objectContaining({ code: ErrorCodes.NOT_RUNNING }));
    intake = new Intake({ store, mapping: mappingContext(config), logger: silentLogger() });
    await expect(intake.submit(reads('R', 1))).rejects.toMatchObject({
      code: ErrorCodes.NOT_RUNNING,
    });
    intake.open();
    await expect(intake.submit(reads('R', 1))).resolves.toMatchObject({
      outcomes: [{ outcome: 'scan' }],
    });
  });

  it('stores a file once: the same content submitted again (a crash between commit and move) is acknowledged, not stored', async () => {
    const { store, intake } = setup();
    await intake.submitFile(reads('F', 5), { hash: 'sha-1', name: 'a.csv' });
    await intake.submitFile(reads('F', 5), { hash: 'sha-1', name: 'a.csv' });
    expect(store.reports.totals().pendingScans).toBe(5);
    expect(intake.countersFor('inbox')).toMatchObject({ reads: 5, scans: 5 });
    await intake.submitFile(reads('G', 3), { hash: 'sha-2', name: 'b.csv' });
    expect(store.reports.totals().pendingScans).toBe(8);
    expect(sqlOf(store).prepare('SELECT name, items FROM files ORDER BY name').all()).toEqual([
      { name: 'a.csv', items: 5 },
      { name: 'b.csv', items: 3 },
    ]);
  });

  it('records a file committed in chunks: its progress with each chunk, a chunk committed before acknowledged only, the whole file with the last', async () => {
    const { store, intake } = setup();
    const chunk = { inputId: 'inbox', hash: 'sha-c', name: 'c.txt', remember: true };
    await intake.submitChunk(reads('C', 4), { ...chunk, itemsBefore: 0, final: false });
    expect(store.intake.fileProgress('inbox', 'sha-c')).toBe(4);
    expect(intake.fileProgress('inbox', 'sha-c')).toEqual({ items: 4, complete: false });
    // The same chunk again (a crash before the input learned it committed): not stored twice.
    await intake.submitChunk(reads('C', 4), { ...chunk, itemsBefore: 0, final: false });
    expect(store.reports.totals().pendingScans).toBe(4);
    await intake.submitChunk(reads('D', 2), { ...chunk, itemsBefore: 4, final: true });
    expect(store.reports.totals().pendingScans).toBe(6);
    expect(store.intake.fileProgress('inbox', 'sha-c')).toBeUndefined();
    expect(intake.fileProgress('inbox', 'sha-c')).toEqual({ items: 0, complete: true });
    expect(sqlOf(store).prepare('SELECT name, items FROM files').all()).toEqual([
      { name: 'c.txt', items: 6 },
    ]);
    // remember: false: the complete file leaves no record (its progress row goes all the same).
    await intake.submitChunk(reads('E', 1), {
      ...chunk,
      hash: 'sha-e',
      name: 'e.txt',
      remember: false,
      itemsBefore: 0,
      final: false,
    });
    await intake.submitChunk(reads('F', 1), {
      ...chunk,
      hash: 'sha-e',
      name: 'e.txt',
      remember: false,
      itemsBefore: 1,
      final: true,
    });
    expect(intake.fileProgress('inbox', 'sha-e')).toBeUndefined();
    expect(store.reports.totals().pendingScans).toBe(8);
  });

  it('refuses only the submits that do not fit under the quota, and writes nothing of them', async () => {
    let room = 4;
    const gate: IntakeGate = {
      admit: (scans) => (scans > room ? `quota: ${scans} > ${room}` : undefined),
      commitFailed: () => {},
      commitSucceeded: () => {},
    };
    const { store, intake } = setup(gate);
    const first = intake.submit(reads('A', 3));
    const second = intake.submit(reads('B', 3)); // same group: 6 > 4
    const rejections = intake.submit([
      {
        kind: 'rejection',
        rejection: {
          inputId: 'inbox',
          raw: Buffer.from('x'),
          receivedAt: new Date(),
          reason: 'no barcode column',
        },
      },
    ]);
    await first;
    const refused = await second.then(
      () => undefined,
      (err: unknown) => err,
    );
    await rejections;
    expect(isQuotaRefusal(refused)).toBe(true);
    expect(isTooLargeForBuffer(refused)).toBe(false);
    expect(refused).toMatchObject({ code: ErrorCodes.BUFFER_QUOTA, retryable: true });
    expect(store.reports.totals().pendingScans).toBe(3);
    expect(
      sqlOf(store).prepare(`SELECT count(*) FROM reads WHERE outcome = 'rejected'`).pluck().get(),
    ).toBe(1);
    room = 100;
    await intake.submit(reads('B', 3));
    expect(store.reports.totals().pendingScans).toBe(6);
  });
});

describe('intake across a restart', () => {
  const windowed = configSchema.parse({
    ...config,
    dcps: [
      {
        key: 'GI-01',
        kind: 'goodsIn',
        productModelKey: 'PACK-A',
        supplierKey: 'SUP-0042',
        duplicateWindowMs: 60_000,
      },
    ],
  });
  const read = (code: string, at: Date): IntakeItem => ({
    kind: 'read',
    read: { inputId: 'inbox', raw: Buffer.from(code), receivedAt: at },
  });

  it('rebuilds the duplicate window from the scans committed within it', async () => {
    let now = Date.parse('2026-11-24T10:00:00Z');
    const file = join(mkdtempSync(join(tmpdir(), 'sg-intake-')), 'buffer.db');
    store = BufferStore.openAt(file);
    intake = new Intake({
      store,
      mapping: mappingContext(windowed),
      logger: silentLogger(),
      now: () => now,
    });
    intake.open();
    await intake.submit([read('OLD-1', new Date(now - 120_000)), read('NEW-1', new Date(now))]);
    intake.close();
    store.close();

    // A restart 10 s later: the same label again is a duplicate of the scan before the restart.
    now += 10_000;
    store = BufferStore.openAt(file);
    intake = new Intake({
      store,
      mapping: mappingContext(windowed),
      logger: silentLogger(),
      now: () => now,
    });
    intake.open();
    const result = await intake.submit([
      read('NEW-1', new Date(now)),
      read('OTHER-1', new Date(now)),
    ]);
    expect(result.outcomes.map((o) => o.outcome)).toEqual(['duplicate', 'scan']);
    intake.close();
    store.close();

    // Past the window (by commit time) nothing is restored: the label is a scan again.
    now += 120_000;
    store = BufferStore.openAt(file);
    intake = new Intake({
      store,
      mapping: mappingContext(windowed),
      logger: silentLogger(),
      now: () => now,
    });
    intake.open();
    expect((await intake.submit([read('NEW-1', new Date(now))])).outcomes[0]?.outcome).toBe('scan');
  });

  it('recognises a resent MQTT message by packet id, topic and payload hash, only when flagged DUP', async () => {
    const { store, intake } = setup();
    const sha = (t: string) => createHash('sha256').update(t).digest();
    const message = (packetId: number, payload: string, dup: boolean) => ({
      packetId,
      topic: 'plant/L1/scans',
      payloadSha256: sha(payload),
      dup,
    });
    const item = (code: string): IntakeItem[] => [
      { kind: 'read', read: { inputId: 'mq', raw: Buffer.from(code), receivedAt: new Date() } },
    ];
    await intake.submitMessage(item('A'), message(7, 'A', false));
    // The resend (DUP) of packet 7 with the same payload: acknowledged only, counted.
    expect(await intake.submitMessage(item('A'), message(7, 'A', true))).toEqual({
      outcomes: [],
      redelivered: true,
    });
    // A new message with the same payload (a second scan of the label) is stored, DUP or not.
    await intake.submitMessage(item('A'), message(8, 'A', false));
    await intake.submitMessage(item('A'), message(9, 'A', true));
    // Packet 7 handed out again: the new message replaces the identity, and its own resend is recognised.
    await intake.submitMessage(item('B'), message(7, 'B', false));
    expect((await intake.submitMessage(item('B'), message(7, 'B', true))).redelivered).toBe(true);
    expect(
      (await intake.submitMessage(item('A'), message(7, 'A', true))).redelivered,
    ).toBeUndefined();
    expect(intake.countersFor('mq')).toMatchObject({ reads: 5, redelivered: 2 });
    expect(sqlOf(store).prepare('SELECT count(*) FROM mqtt_messages').pluck().get()).toBe(3);
    // The broker lost the session: nothing can come again, the identities go.
    intake.forgetMessages('mq');
    expect(
      (await intake.submitMessage(item('B'), message(7, 'B', true))).redelivered,
    ).toBeUndefined();
  });
});
