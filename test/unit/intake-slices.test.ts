import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Intake, type IntakeFence, type IntakeGate } from '../../src/intake/intake.js';
import { SLICE_READS } from '../../src/intake/slices.js';
import { BufferStore } from '../../src/buffer/store.js';
import { configSchema } from '../../src/config/schema.js';
import { ErrorCodes, GatewayError } from '../../src/errors.js';
import type { IntakeItem } from '../../src/inputs/types.js';
import { silentLogger } from '../../src/log.js';
import { mappingContext } from '../../src/mapping/map-read.js';
import { sqlOf } from '../helpers/buffer-sql.js';

const config = configSchema.parse({
  site: { id: 'slices', timezone: 'Europe/Berlin' },
  upstream: {
    baseUrl: 'http://127.0.0.1:1',
    authUrl: 'http://127.0.0.1:1',
    clientId: 'demo-client',
  },
  dcps: [{ key: 'EOL-3', kind: 'endOfProcess', productModelKey: 'PACK-A', duplicateWindowMs: 0 }],
  inputs: [
    { id: 'mes', type: 'files', dir: '/tmp/unused', dcp: 'EOL-3' },
    { id: 'reader', type: 'files', dir: '/tmp/unused-2', dcp: 'EOL-3' },
  ],
});

let store: BufferStore | undefined;
let intake: Intake | undefined;
afterEach(() => {
  intake?.close();
  store?.close();
});

function setup(options: { gate?: IntakeGate; fence?: IntakeFence; onCommit?: () => void } = {}): {
  store: BufferStore;
  intake: Intake;
} {
  store = BufferStore.openAt(join(mkdtempSync(join(tmpdir(), 'sg-slices-')), 'buffer.db'));
  intake = new Intake({
    store,
    mapping: mappingContext(config),
    logger: silentLogger(),
    ...(options.gate ? { gate: options.gate } : {}),
    ...(options.fence ? { fence: options.fence } : {}),
    ...(options.onCommit ? { onScansCommitted: options.onCommit } : {}),
  });
  intake.open();
  return { store, intake };
}

const reads = (inputId: string, prefix: string, n: number): IntakeItem[] =>
  Array.from({ length: n }, (_, i) => ({
    kind: 'read',
    read: { inputId, raw: Buffer.from(`${prefix}-${i}`), receivedAt: new Date() },
  }));

/** Row ids of the reads stored from `inputId`, in commit order. */
const rowIds = (s: BufferStore, inputId: string): number[] =>
  sqlOf(s)
    .prepare(`SELECT id FROM reads WHERE input_id = ? ORDER BY id`)
    .pluck()
    .all(inputId) as number[];

describe('intake: a large submit taken in slices', () => {
  it("commits another input's read submitted mid-way between two slices, the event loop served between them", async () => {
    const settled: string[] = [];
    let commits = 0;
    let turnsBetween = 0;
    let small: Promise<unknown> | undefined;
    const { store, intake } = setup({
      onCommit: () => {
        commits++;
        if (commits !== 1) return;
        // After the first slice's commit: an immediate queued now runs only if intake gives the
        // loop back before its next slice; a reader's read arrives meanwhile.
        setImmediate(() => {
          turnsBetween++;
          small = intake.submit(reads('reader', 'TCP', 1)).then(() => settled.push('reader'));
        });
      },
    });
    const big = intake.submit(reads('mes', 'BULK', 10_000), { inSlices: true }).then((r) => {
      settled.push('mes');
      return r;
    });
    const result = await big;
    await small;

    expect(result.outcomes).toHaveLength(10_000);
    expect(result.outcomes.every((o) => o.outcome === 'scan')).toBe(true);
    expect(turnsBetween).toBe(1);
    expect(settled).toEqual(['reader', 'mes']);
    // At most SLICE_READS reads per commit: at least 40 commits for 10,000 reads.
    expect(commits).toBeGreaterThanOrEqual(Math.ceil(10_000 / SLICE_READS));
    const bulk = rowIds(store, 'mes');
    const [tcp] = rowIds(store, 'reader');
    expect(bulk).toHaveLength(10_000);
    // The reader's row lies among the request's rows: committed before the request's last slice.
    expect(tcp).toBeGreaterThan(bulk[0]!);
    expect(tcp).toBeLessThan(bulk[bulk.length - 1]!);
    // The request's reads keep their order.
    const raws = sqlOf(store)
      .prepare(`SELECT raw FROM reads WHERE input_id = 'mes' ORDER BY id`)
      .pluck()
      .all() as Buffer[];
    expect(raws.map(String)).toEqual(Array.from({ length: 10_000 }, (_, i) => `BULK-${i}`));
  });

  it('keeps one input in order: its submit made mid-way is committed after the sliced one ends', async () => {
    let commits = 0;
    let later: Promise<unknown> | undefined;
    const { store, intake } = setup({
      onCommit: () => {
        if (++commits === 1) later = intake.submit(reads('mes', 'LATER', 2));
      },
    });
    await intake.submit(reads('mes', 'BULK', 2_000), { inSlices: true });
    await later;
    const raws = sqlOf(store)
      .prepare(`SELECT raw FROM reads WHERE input_id = 'mes' ORDER BY id`)
      .pluck()
      .all() as Buffer[];
    expect(raws.slice(-2).map(String)).toEqual(['LATER-0', 'LATER-1']);
    expect(raws).toHaveLength(2_002);
  });

  it('rejects with the items committed before when the quota refuses a later slice', async () => {
    const limit = 600;
    const gate: IntakeGate = {
      admit: (scans) =>
        store!.reports.totals().pendingScans + scans > limit ? 'quota reached' : undefined,
      commitFailed: () => {},
      commitSucceeded: () => {},
    };
    const { store: s, intake } = setup({ gate });
    const err = await intake.submit(reads('mes', 'Q', 1_000), { inSlices: true }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(GatewayError);
    const stored = rowIds(s, 'mes').length;
    expect(stored).toBeGreaterThan(0);
    expect(stored).toBeLessThanOrEqual(limit);
    expect(err).toMatchObject({
      code: ErrorCodes.BUFFER_QUOTA,
      retryable: true,
      details: { committedItems: stored },
    });
  });

  it('checks the HA fence before each slice: a lease lost mid-way refuses the rest', async () => {
    let leading = true;
    const fence: IntakeFence = {
      mayTake: () => (leading ? undefined : 'not the leader'),
      epoch: () => 3,
      commitFailed: () => {},
    };
    const { store: s, intake } = setup({ fence, onCommit: () => (leading = false) });
    const err = await intake.submit(reads('mes', 'HA', 1_000), { inSlices: true }).then(
      () => undefined,
      (e: unknown) => e,
    );
    const stored = rowIds(s, 'mes').length;
    expect(stored).toBeGreaterThan(0);
    expect(stored).toBeLessThanOrEqual(SLICE_READS);
    expect(err).toMatchObject({
      code: ErrorCodes.HA_NOT_LEADER,
      details: { committedItems: stored },
    });
  });

  it('commits a submit not marked inSlices in one transaction, as before', async () => {
    let commits = 0;
    const { store: s, intake } = setup({ onCommit: () => commits++ });
    await intake.submit(reads('mes', 'WHOLE', 1_000));
    expect(commits).toBe(1);
    expect(rowIds(s, 'mes')).toHaveLength(1_000);
  });
});
