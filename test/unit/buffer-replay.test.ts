import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { replayDeadLetters, scanChanges } from '../../src/buffer/replay.js';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { configSchema } from '../../src/config/schema.js';
import { mappingContext, mapRead } from '../../src/mapping/map-read.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { queriesOf } from '../helpers/queries.js';

let store: BufferStore | undefined;
afterEach(() => store?.close());

const at = new Date('2026-11-18T06:00:00Z');

/** The configuration now: the input feeds GI-01, which the service knows. */
const fixed = configSchema.parse({
  site: { id: 'replay', timezone: 'Europe/Berlin' },
  upstream: {
    baseUrl: 'http://127.0.0.1:1',
    authUrl: 'http://127.0.0.1:1',
    clientId: 'demo-client',
  },
  dcps: [
    { key: 'GI-01', kind: 'goodsIn', productModelKey: 'PACK-A', supplierKey: 'SUP-0042' },
    { key: 'EOL-3', kind: 'endOfProcess', productModelKey: 'PACK-A' },
  ],
  inputs: [{ id: 'line-1', type: 'files', dir: '/tmp/unused', dcp: 'GI-01' }],
});
const mapper = mappingContext(fixed);
const map = (read: Parameters<typeof mapRead>[0]) => mapRead(read, mapper);

/** A read as the old configuration stored it: mapped to DCP `dcp` (which the service refused). */
function oldScan(reference: string, dcp: string, extra: Partial<IntakeRecord> = {}): IntakeRecord {
  const body = JSON.stringify({
    reference,
    timeStamp: '2026-11-18T07:00:00',
    dcpKey: dcp,
    productModelKey: 'PACK-A',
    parents: ['TRAY-9'],
    attributes: [],
  });
  return {
    inputId: 'line-1',
    receivedAt: at,
    raw: Buffer.from(reference),
    sourceTime: '2026-11-18T07:00:00+01:00',
    outcome: 'scan',
    scan: { reference, dcpKey: dcp, instant: at, body },
    ...extra,
  };
}

function open(): BufferStore {
  store = BufferStore.openAt(join(mkdtempSync(join(tmpdir(), 'sg-replay-')), 'buffer.db'));
  return store;
}

/** Sends everything pending as one batch and records the service's failures. */
function fail(s: BufferStore, failures: { reference: string; reason: string }[]): number {
  const b = formBatch(s, {
    maxScans: 100,
    maxBytes: 1e9,
    mode: 'direct',
    nowIso: at.toISOString(),
  })!;
  s.batches.finishBatch(b.id, { state: 'HasFailures', failures }, at.toISOString());
  return b.id;
}

describe('replay of dead letters', () => {
  it('maps the original reads again with the current configuration and queues them', () => {
    const s = open();
    s.intake.commitIntake(
      [oldScan('A', 'GI-9'), oldScan('B', 'GI-9'), oldScan('OK', 'GI-01')],
      at.getTime(),
    );
    fail(s, [
      { reference: 'A', reason: 'Invalid DCP' },
      { reference: 'B', reason: 'Invalid DCP' },
    ]);
    const result = replayDeadLetters(
      s.deadLetters,
      map,
      { reason: 'invalid dcp' },
      at.getTime() + 1000,
    );
    expect(result).toMatchObject({ selected: 2, queued: 2, notQueued: 0 });
    const queued = sqlOf(s)
      .prepare(
        `SELECT reference, dcp_key AS dcp, body, state FROM scans WHERE state = 'pending' ORDER BY id`,
      )
      .all() as { body: string }[];
    expect(queued).toHaveLength(2);
    expect(JSON.parse(queued[0]!.body)).toEqual({
      reference: 'A',
      timeStamp: '2026-11-18T07:00:00',
      dcpKey: 'GI-01',
      productModelKey: 'PACK-A',
      supplierKey: 'SUP-0042',
      // Parents the source did not give (a container session at the time) are kept from the failed scan.
      parents: ['TRAY-9'],
      attributes: [],
    });
    expect(s.reports.scanCounts()).toEqual({ delivered: 1, replayed: 2, pending: 2 });
    // `buffer stats` counts the same things the same way as the status.
    expect(queriesOf(s).stats().scans).toEqual(queriesOf(s).scanCounts());
    expect(queriesOf(s).recentProblems(10)).toEqual([]);
    expect(s.reports.totals().pendingScans).toBe(2);
    // Replayed once: a second replay finds nothing.
    expect(replayDeadLetters(s.deadLetters, map, { all: true }, at.getTime())).toMatchObject({
      selected: 0,
      queued: 0,
    });
  });

  it('uses the read as the source gave it (its own DCP, parents and attributes), not the old scan', () => {
    const s = open();
    s.intake.commitIntake(
      [
        oldScan('C', 'GI-9', {
          dcpKey: 'EOL-3',
          parents: ['PALLET-1'],
          attributes: { station: '4' },
        }),
      ],
      at.getTime(),
    );
    fail(s, [{ reference: 'C', reason: 'Attributes could not be read' }]);
    replayDeadLetters(s.deadLetters, map, { all: true }, at.getTime());
    const body = JSON.parse(
      sqlOf(s).prepare(`SELECT body FROM scans WHERE state = 'pending'`).pluck().get() as string,
    ) as Record<string, unknown>;
    expect(body).toMatchObject({
      dcpKey: 'EOL-3',
      parents: ['PALLET-1'],
      attributes: [{ key: 'station', value: '4' }],
    });
    expect(body.supplierKey).toBeUndefined();
  });

  it("indexes the replayed scan's GS1 keys from its original read, so its label finds the replacement", () => {
    const s = open();
    const dm = ']d2010952123454321310B2611-03\u001d21C2611030001234';
    s.intake.commitIntake([oldScan(dm, 'GI-9')], at.getTime());
    fail(s, [{ reference: dm, reason: 'Invalid DCP' }]);
    replayDeadLetters(s.deadLetters, map, { all: true }, at.getTime());
    const replacement = sqlOf(s)
      .prepare(`SELECT id FROM scans WHERE state = 'pending'`)
      .pluck()
      .get() as number;
    expect(
      sqlOf(s)
        .prepare(`SELECT ai || '=' || value FROM scan_keys WHERE scan_id = ? ORDER BY ai`)
        .pluck()
        .all(replacement),
    ).toEqual(['01=09521234543213', '10=B2611-03', '21=C2611030001234']);
    const t = queriesOf(s).trace('(01)09521234543213(21)C2611030001234');
    expect(t).toMatchObject({ found: true, reference: dm });
    expect(t.scans.map((x) => x.id)).toContain(replacement);
  });

  it('selects by batch, by DCP and by reason; a dry run changes nothing', () => {
    const s = open();
    s.intake.commitIntake([oldScan('A', 'GI-9'), oldScan('B', 'GI-8')], at.getTime());
    const first = fail(s, [
      { reference: 'A', reason: 'Invalid DCP' },
      { reference: 'B', reason: 'Invalid DCP' },
    ]);
    s.intake.commitIntake([oldScan('C', 'GI-9')], at.getTime());
    fail(s, [{ reference: 'C', reason: 'Attributes could not be read' }]);

    const dry = replayDeadLetters(s.deadLetters, map, { all: true, dryRun: true }, at.getTime());
    expect(dry).toMatchObject({ selected: 3, queued: 3, dryRun: true });
    expect(s.reports.scanCounts()).toEqual({ failed: 3 });
    // Every field that changes, not only the DCP: GI-01 is Goods In, so a supplier key comes with it.
    expect(dry.items[0]!.result).toMatchObject({
      changes: [
        { field: 'dcpKey', from: 'GI-9', to: 'GI-01' },
        { field: 'supplierKey', from: null, to: 'SUP-0042' },
      ],
    });

    expect(
      replayDeadLetters(
        s.deadLetters,
        map,
        { batchId: first, dcpKey: 'GI-8' },
        at.getTime(),
      ).items.map((i) => i.reference),
    ).toEqual(['B']);
    expect(
      replayDeadLetters(s.deadLetters, map, { reason: 'ATTRIBUTES' }, at.getTime()).items.map(
        (i) => i.reference,
      ),
    ).toEqual(['C']);
    expect(
      replayDeadLetters(s.deadLetters, map, { batchId: first }, at.getTime()).items.map(
        (i) => i.reference,
      ),
    ).toEqual(['A']);
    expect(() => replayDeadLetters(s.deadLetters, map, {}, at.getTime())).toThrow(
      /needs a selection/,
    );
  });

  it('names every Scan field a replay changes, old and new, and all of a rejected read', () => {
    const old = JSON.stringify({
      reference: 'A',
      timeStamp: '2026-11-18T07:00:00',
      dcpKey: 'GI-9',
      productModelKey: 'PACK-A',
      parents: ['TRAY-9'],
      attributes: [{ key: 'v', value: '3.6' }],
    });
    const now = JSON.stringify({
      reference: 'A',
      timeStamp: '2026-11-18T07:00:00',
      dcpKey: 'GI-01',
      productModelKey: 'PACK-B',
      supplierKey: 'SUP-0042',
      parents: [],
      attributes: [{ key: 'v', value: '3.65' }],
    });
    expect(scanChanges(old, now)).toEqual([
      { field: 'dcpKey', from: 'GI-9', to: 'GI-01' },
      { field: 'productModelKey', from: 'PACK-A', to: 'PACK-B' },
      { field: 'supplierKey', from: null, to: 'SUP-0042' },
      { field: 'parents', from: 'TRAY-9', to: null },
      { field: 'attributes', from: 'v=3.6', to: 'v=3.65' },
    ]);
    expect(scanChanges(old, old)).toEqual([]);
    expect(scanChanges(null, now).map((c) => c.field)).toEqual([
      'reference',
      'timeStamp',
      'dcpKey',
      'productModelKey',
      'supplierKey',
      'attributes',
    ]);
  });

  it('leaves a dead letter in place, with the reason, when the current configuration still cannot map it', () => {
    const s = open();
    s.intake.commitIntake([oldScan('X', 'GI-9', { inputId: 'removed-input' })], at.getTime());
    fail(s, [{ reference: 'X', reason: 'Invalid DCP' }]);
    const result = replayDeadLetters(s.deadLetters, map, { all: true }, at.getTime());
    expect(result).toMatchObject({ selected: 1, queued: 0, notQueued: 1 });
    expect(result.items[0]!.result).toEqual({
      queued: false,
      why: 'input "removed-input" is not in the configuration',
    });
    expect(s.reports.scanCounts()).toEqual({ failed: 1 });
  });

  it('replays reads the mapping rejected (--rejected), never input-level rejections', () => {
    const s = open();
    s.intake.commitIntake(
      [
        {
          inputId: 'line-1',
          receivedAt: at,
          raw: Buffer.from('R-1'),
          dcpKey: 'GI-01',
          outcome: 'rejected',
          reason: 'DCP "GI-7" is not configured',
        },
        {
          inputId: 'line-1',
          receivedAt: at,
          raw: Buffer.from('row without barcode'),
          outcome: 'rejected',
          reason: 'no barcode column',
          inputLevel: true,
        },
      ],
      at.getTime(),
    );
    expect(replayDeadLetters(s.deadLetters, map, { all: true }, at.getTime()).selected).toBe(0);
    const result = replayDeadLetters(
      s.deadLetters,
      map,
      { all: true, rejected: true },
      at.getTime(),
    );
    expect(result).toMatchObject({ selected: 1, queued: 1, notReplayable: 1 });
    expect(sqlOf(s).prepare(`SELECT outcome FROM reads ORDER BY id`).pluck().all()).toEqual([
      'scan',
      'rejected',
    ]);
    expect(s.reports.totals().pendingScans).toBe(1);
  });
});
