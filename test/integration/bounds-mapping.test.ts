import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Intake } from '../../src/intake/intake.js';
import { BufferStore } from '../../src/buffer/store.js';
import { loadConfig } from '../../src/config/load.js';
import { ConfigReloader } from '../../src/config/reload.js';
import { configSchema } from '../../src/config/schema.js';
import type { IntakeItem } from '../../src/inputs/types.js';
import { silentLogger } from '../../src/log.js';
import { ContainerSessions } from '../../src/mapping/container-sessions.js';
import { Mapper } from '../../src/mapping/mapper.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { waitFor } from '../helpers/wait.js';

/** Reads naming DCPs that do not exist must not grow the gateway's memory. */

const config = configSchema.parse({
  site: { id: 'bounds', timezone: 'Europe/Berlin' },
  upstream: {
    baseUrl: 'http://127.0.0.1:1',
    authUrl: 'http://127.0.0.1:1',
    clientId: 'demo-client',
  },
  dcps: [
    {
      key: 'GO-01',
      kind: 'goodsOut',
      productModelKey: 'PACK-A',
      clientKey: 'CL-7',
      duplicateWindowMs: 0,
    },
    {
      key: 'GO-02',
      kind: 'goodsOut',
      productModelKey: 'PACK-A',
      clientKey: 'CL-7',
      duplicateWindowMs: 0,
    },
    {
      key: 'GO-03',
      kind: 'goodsOut',
      productModelKey: 'PACK-A',
      clientKey: 'CL-7',
      duplicateWindowMs: 0,
    },
  ],
  inputs: [{ id: 'dock', type: 'files', dir: '/tmp/unused', dcp: 'GO-01' }],
  containers: [
    {
      name: 'pallet',
      inputs: ['dock'],
      per: 'dcp',
      open: { regex: '^PAL-' },
      idleTimeoutMs: 60_000,
    },
  ],
});

const dirs: string[] = [];
const closers: (() => void)[] = [];
afterEach(() => {
  for (const c of closers.splice(0)) c();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup(mapper: Mapper): { store: BufferStore; intake: Intake } {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bounds-'));
  dirs.push(dir);
  const store = BufferStore.openAt(join(dir, 'buffer.db'));
  const intake = new Intake({ store, mapping: mapper, logger: silentLogger() });
  intake.open();
  closers.push(() => {
    intake.close();
    store.close();
  });
  return { store, intake };
}

const start = Date.parse('2026-11-24T06:00:00Z');
const read = (raw: string, dcpKey: string, atMs: number): IntakeItem => ({
  kind: 'read',
  read: { inputId: 'dock', raw: Buffer.from(raw), receivedAt: new Date(atMs), dcpKey },
});

describe('bounded state: container sessions and counters', () => {
  it('reads naming 100,000 unknown DCPs are each rejected with the reason and open no session', async () => {
    const mapper = new Mapper(config);
    const { store, intake } = setup(mapper);
    const N = 100_000;
    const BATCH = 2_000;
    let rejected = 0;
    for (let b = 0; b < N; b += BATCH) {
      // Every other read is a container's opening code: without the bound, each of these would open a session.
      const items = Array.from({ length: BATCH }, (_, i) =>
        read(i % 2 === 0 ? `PAL-${b + i}` : `PK-${b + i}`, `NOPE-${b + i}`, start + b + i),
      );
      const { outcomes } = await intake.submit(items);
      for (const [i, o] of outcomes.entries()) {
        expect(o.outcome).toBe('rejected');
        expect(o.reason).toBe(`DCP "NOPE-${b + i}" is not configured (known: GO-01, GO-02, GO-03)`);
        rejected++;
      }
      expect(mapper.sessionCounts().open).toBe(0);
    }
    expect(rejected).toBe(N);
    expect(mapper.sessionCounts()).toEqual({ open: 0, max: 10_000, refusedAtCap: 0 });
    expect(mapper.openContainers(start + N)).toEqual([]);
    expect(intake.countedInputs()).toBe(1);
    expect(intake.countersFor('dock')).toMatchObject({ reads: N, rejections: N, scans: 0 });
    // Each refused read is kept in the buffer with its reason, and counted.
    const rows = sqlOf(store)
      .prepare(
        `SELECT count(*) AS n FROM reads WHERE outcome = 'rejected' AND reason LIKE 'DCP "NOPE-%" is not configured%'`,
      )
      .get() as { n: number };
    expect(rows.n).toBe(N);
    // The configured DCPs still work: a pallet opened at GO-02 parents the next read there.
    const ok = await intake.submit([
      read('PAL-9', 'GO-02', start + N + 1),
      read('PK-9', 'GO-02', start + N + 2),
    ]);
    expect(ok.outcomes.map((o) => o.outcome)).toEqual(['scan', 'scan']);
    expect(mapper.sessionCounts().open).toBe(1);
  }, 120_000);

  it('a session past the cap is refused with the reason, counted as a rejection, and allowed again once one expires', async () => {
    const mapper = new Mapper(config, { maxOpenContainers: 2 });
    const { store, intake } = setup(mapper);
    const first = await intake.submit([
      read('PAL-1', 'GO-01', start),
      read('PAL-2', 'GO-02', start + 1),
    ]);
    expect(first.outcomes.map((o) => o.outcome)).toEqual(['scan', 'scan']);
    const past = await intake.submit([read('PAL-3', 'GO-03', start + 2)]);
    expect(past.outcomes[0]).toEqual({
      outcome: 'rejected',
      verdict: 'nak',
      code: 'containerCap',
      reason:
        'opens container pallet at GO-03, refused: 2 containers are open, the most the gateway keeps (2); close some (closing code or idleTimeoutMs) before opening more',
    });
    // Reopening at a station that has a session replaces it: no growth, not refused.
    expect((await intake.submit([read('PAL-4', 'GO-01', start + 3)])).outcomes[0]?.outcome).toBe(
      'scan',
    );
    expect(mapper.sessionCounts()).toEqual({ open: 2, max: 2, refusedAtCap: 1 });
    expect(intake.countersFor('dock')).toMatchObject({ rejections: 1, scans: 3 });
    expect(
      sqlOf(store).prepare(`SELECT reason FROM reads WHERE outcome = 'rejected'`).pluck().all(),
    ).toEqual([past.outcomes[0]?.reason]);
    // 60 s idle later both sessions have expired: the sweep before the refusal makes room.
    const later = await intake.submit([read('PAL-5', 'GO-03', start + 70_000)]);
    expect(later.outcomes[0]?.outcome).toBe('scan');
    expect(mapper.sessionCounts().open).toBe(1);
  });

  it('expired sessions are swept on access in amortized constant time, not only when their station reads again', () => {
    const sessions = new ContainerSessions(100_000);
    for (let i = 0; i < 5_000; i++)
      expect(
        sessions.open('pallet', 'input', `station-${i}`, `P-${i}`, start + i, 1_000).opened,
      ).toBe(true);
    expect(sessions.size).toBe(5_000);
    // Reads at one live station only, long after the others went idle: within one sweep period they are gone.
    for (let i = 0; i < 5_000; i++)
      sessions.parentAt('pallet', 'station-live', start + 100_000 + i);
    expect(sessions.size).toBe(0);
  });

  it('a reload drops the counters of removed inputs', async () => {
    const mapper = new Mapper(config);
    const { intake } = setup(mapper);
    await intake.submit([
      {
        kind: 'read',
        read: { inputId: 'gone', raw: Buffer.from('X'), receivedAt: new Date(start) },
      },
      read('PK-1', 'GO-01', start),
    ]);
    expect(intake.countedInputs()).toBe(2);
    intake.setMapping(new Mapper(config));
    expect(intake.countedInputs()).toBe(1);
  });

  it('a flood of SIGHUPs is at most one reload waiting behind the running one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-bounds-reload-'));
    dirs.push(dir);
    const file = join(dir, 'config.yaml');
    writeFileSync(
      file,
      `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:1, authUrl: http://127.0.0.1:1, clientId: c }
dcps: [{ key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }]
inputs: [{ id: inbox, type: files, dir: ${join(dir, 'inbox')}, dcp: GI-01 }]
`,
    );
    let applied = 0;
    let release: () => void = () => {};
    const reloader = new ConfigReloader({
      file,
      load: () => loadConfig(file, { baseDir: dir, env: {}, skipSecret: true }),
      apply: () => {
        applied++;
        return new Promise<void>((resolve) => (release = resolve));
      },
      refused: (err) => {
        throw err;
      },
      logger: silentLogger(),
      watch: false,
    });
    const first = reloader.trigger();
    await waitFor(() => applied === 1, { what: 'the first reload applying' });
    // 10,000 signals while the first reload is still applying: one more reload, not 10,000.
    const rest = Array.from({ length: 10_000 }, () => reloader.trigger());
    expect(new Set(rest).size).toBe(1);
    release();
    await first;
    // The one more reload is applying (its own release) before it is let go.
    await waitFor(() => applied === 2, { what: 'the second reload applying' });
    release();
    await Promise.all(rest);
    await reloader.settled();
    expect(applied).toBe(2);
  });
});
