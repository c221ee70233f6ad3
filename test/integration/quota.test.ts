import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { BackPressure } from '../../src/buffer/back-pressure.js';
import { Intake } from '../../src/intake/intake.js';
import { BufferStore } from '../../src/buffer/store.js';
import { configSchema } from '../../src/config/schema.js';
import { mappingContext } from '../../src/mapping/map-read.js';
import { loadConfig } from '../../src/config/load.js';
import { ErrorCodes, isDiskFull, isQuotaRefusal } from '../../src/errors.js';
import type { InputAdapter, InputStatus, IntakeItem, IntakeSink } from '../../src/inputs/types.js';
import { silentLogger } from '../../src/log.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { waitFor } from '../helpers/wait.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { deriveHealth } from '../../src/health/derive.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

/**
 * An input that produces `total` numbered reads, `perTick` every `tickMs`, and behaves like the real
 * ones when the buffer refuses: it keeps the reads and offers them again. With `pausable` it
 * implements `setPaused` (like files and MQTT) and takes nothing while paused.
 */
class ScriptedInput implements InputAdapter {
  readonly type = 'scripted';
  produced = 0;
  committed: string[] = [];
  refusals = 0;
  quotaRefusals = 0;
  pauses: boolean[] = [];
  maxUndeliveredSeen = 0;
  private paused = false;
  private held: IntakeItem[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** A submit is in flight (it may still commit after a pause came). */
  busy = false;
  setPaused?: (paused: boolean) => void;

  constructor(
    readonly id: string,
    private readonly sink: IntakeSink,
    private readonly opts: { total: number; perTick: number; tickMs: number; pausable: boolean },
  ) {
    if (opts.pausable) {
      this.setPaused = (paused: boolean) => {
        this.paused = paused;
        this.pauses.push(paused);
      };
    }
  }

  async start(): Promise<void> {
    this.timer = setInterval(() => void this.tick(), this.opts.tickMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
  }

  status(): InputStatus {
    return { id: this.id, type: this.type, state: this.paused ? 'paused' : 'up', source: 'script' };
  }

  private async tick(): Promise<void> {
    if (this.busy || this.paused) return;
    this.busy = true;
    try {
      while (this.held.length < this.opts.perTick && this.produced < this.opts.total) {
        const n = this.produced++;
        this.held.push({
          kind: 'read',
          read: { inputId: this.id, raw: Buffer.from(`${this.id}-${n}`), receivedAt: new Date() },
        });
      }
      if (this.held.length === 0) return;
      const batch = this.held;
      try {
        await this.sink.submit(batch);
        this.held = [];
        this.committed.push(...batch.map((i) => (i.kind === 'read' ? i.read.raw.toString() : '')));
      } catch (err) {
        this.refusals++;
        if (isQuotaRefusal(err)) this.quotaRefusals++;
      }
    } finally {
      this.busy = false;
    }
  }
}

describe('back-pressure: the buffer quota', () => {
  let sandbox: RunningSandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 20 });
  });
  afterAll(async () => {
    await sandbox.close();
  });

  it(
    'pauses inputs that can wait near the quota, refuses beyond it, loses nothing and resumes as the buffer drains',
    { timeout: 60_000 },
    async () => {
      // Upstream down until the buffer is full.
      sandbox.setFaults({ errorRate: 1 });
      const dir = mkdtempSync(join(tmpdir(), 'sg-quota-'));
      const file = join(dir, 'config.yaml');
      writeFileSync(
        file,
        `site: { id: quota, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')}, maxPendingScans: 1000, pauseAtRatio: 0.6, resumeAtRatio: 0.3 }
delivery: { mode: direct, maxBatchScans: 200, maxBatchDelayMs: 20, retryBaseMs: 20, retryMaxMs: 100, statusPollMs: 30, statusPollMaxMs: 60 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042, duplicateWindowMs: 0 }
inputs:
  - { id: waiter, type: files, dir: ${join(dir, 'a')}, dcp: GI-01 }
  - { id: serial, type: files, dir: ${join(dir, 'b')}, dcp: GI-01 }
`,
      );
      const loaded = loadConfig(file, {
        baseDir: dir,
        env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET },
      });
      const inputs = new Map<string, ScriptedInput>();
      const app: App = buildApp(loaded, {
        logger: silentLogger(),
        createInput: (config, sink) => {
          const input =
            config.id === 'waiter'
              ? new ScriptedInput('waiter', sink, {
                  total: 1500,
                  perTick: 25,
                  tickMs: 5,
                  pausable: true,
                })
              : new ScriptedInput('serial', sink, {
                  total: 700,
                  perTick: 10,
                  tickMs: 10,
                  pausable: false,
                });
          inputs.set(config.id, input);
          return input;
        },
      });
      await app.start();
      const waiter = inputs.get('waiter')!;
      const serial = inputs.get('serial')!;
      let maxUndelivered = 0;
      const watch = setInterval(() => {
        maxUndelivered = Math.max(maxUndelivered, app.status().buffer.undeliveredScans);
      }, 5);
      try {
        // Upstream refuses everything: the buffer fills. At 60% the input that can wait is paused.
        await waitFor(() => waiter.pauses[0] === true, {
          timeoutMs: 30_000,
          what: 'waiter paused',
        });
        let status = app.status();
        expect(status.state).toBe('degraded');
        expect(status.buffer).toMatchObject({ intakePaused: true, quotaScans: 1000 });
        expect(status.reasons.join(' ')).toMatch(/quota/);
        expect(waiter.status().state).toBe('paused');
        // A submit already in flight when the pause came may still commit; after that, nothing.
        // Waited for by its end, not a pause a loaded machine may outlast.
        await waitFor(() => !waiter.busy, { what: 'the submit the waiter had in flight ended' });
        const waiterAtPause = waiter.committed.length;
        expect(status.buffer.undeliveredScans).toBeLessThan(1000);

        // The input that cannot wait keeps committing up to the quota itself, then is refused and keeps its reads.
        await waitFor(() => serial.quotaRefusals > 0, {
          timeoutMs: 30_000,
          what: 'serial refused at the quota',
        });
        status = app.status();
        expect(status.buffer.undeliveredScans).toBeLessThanOrEqual(1000);
        expect(status.buffer.undeliveredScans).toBeGreaterThan(900);
        expect((status.buffer.quota as { level: string }).level).toBe('full');
        expect(status.reasons.join(' ')).toMatch(/quota reached/);
        expect(waiter.committed.length).toBe(waiterAtPause);

        // Upstream back: the buffer drains, the waiter resumes, everything arrives once.
        sandbox.setFaults({ errorRate: 0 });
        await waitFor(() => waiter.pauses.includes(false), {
          timeoutMs: 30_000,
          what: 'waiter resumed',
        });
        await waitFor(() => waiter.committed.length === 1500 && serial.committed.length === 700, {
          timeoutMs: 30_000,
          what: 'all reads committed',
        });
        await waitFor(() => app.status().buffer.undeliveredScans === 0, {
          timeoutMs: 30_000,
          what: 'buffer drained',
        });
        expect(app.status().buffer.intakePaused).toBe(false);
        expect(maxUndelivered).toBeLessThanOrEqual(1000);

        const log = (await (await fetch(`${sandbox.url}/_sandbox/scans`)).json()) as {
          scans: { scan: { reference: string } }[];
        };
        const refs = log.scans.map((s) => s.scan.reference).sort();
        const expected = [
          ...Array.from({ length: 1500 }, (_, i) => `waiter-${i}`),
          ...Array.from({ length: 700 }, (_, i) => `serial-${i}`),
        ].sort();
        expect(refs).toEqual(expected);
        expect(waiter.pauses.filter((p) => p).length).toBeGreaterThanOrEqual(1);
      } finally {
        clearInterval(watch);
        await app.stop();
      }
    },
  );

  it('takes a file larger than the whole quota in chunks as delivery frees the quota (back-pressure), each row once; the files behind it wait', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-quota-file-'));
    const file = join(dir, 'config.yaml');
    writeFileSync(
      file,
      `site: { id: quota, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')}, maxPendingScans: 10 }
delivery: { mode: direct, maxBatchDelayMs: 50, maxBatchScans: 5 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042, duplicateWindowMs: 0 }
inputs:
  - { id: inbox, type: files, dir: ${join(dir, 'inbox')}, format: lines, dcp: GI-01, stableMs: 50 }
`,
    );
    const app = buildApp(
      loadConfig(file, { baseDir: dir, env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET } }),
      { logger: silentLogger() },
    );
    await app.start();
    // The buffer as the test reads it, beside the gateway's own connection.
    const db = new Database(join(dir, 'buffer.db'), { readonly: true });
    db.pragma('busy_timeout = 1000');
    try {
      writeFileSync(
        join(dir, 'inbox', 'big.txt'),
        Array.from({ length: 20 }, (_, i) => `BIG-${i}`).join('\n'),
      );
      // The small file arrives once the big one is being taken (its first chunk committed).
      const bigRows = db
        .prepare(`SELECT count(*) FROM reads WHERE CAST(raw AS TEXT) LIKE 'BIG-%'`)
        .pluck();
      await waitFor(() => (bigRows.get() as number) > 0, {
        what: "the big file's first chunk committed",
      });
      writeFileSync(join(dir, 'inbox', 'small.txt'), 'SMALL-1\nSMALL-2\nSMALL-3\n');
      await waitFor(
        () =>
          existsSync(join(dir, 'inbox', 'processed')) &&
          !existsSync(join(dir, 'inbox', 'small.txt')) &&
          !existsSync(join(dir, 'inbox', 'big.txt')),
        {
          timeoutMs: 30_000,
          what: 'both files taken',
        },
      );
      expect(
        db
          .prepare(
            `SELECT count(*) AS n, count(DISTINCT raw) AS d FROM reads WHERE outcome = 'scan'`,
          )
          .get(),
      ).toEqual({ n: 23, d: 23 });
      // The small file waited behind the big one (order of arrival kept).
      const lastBig = db
        .prepare(`SELECT max(id) FROM reads WHERE CAST(raw AS TEXT) LIKE 'BIG-%'`)
        .pluck()
        .get() as number;
      const firstSmall = db
        .prepare(`SELECT min(id) FROM reads WHERE CAST(raw AS TEXT) LIKE 'SMALL-%'`)
        .pluck()
        .get() as number;
      expect(lastBig).toBeLessThan(firstSmall);
      expect(existsSync(join(dir, 'inbox', 'failed', 'big.txt.error.txt'))).toBe(false);
    } finally {
      db.close();
      await app.stop();
    }
  });

  it('stops intake with an alarm on a full disk (SQLITE_FULL), corrupts nothing, and recovers by itself', async () => {
    // The disk is simulated full with PRAGMA max_page_count: SQLite then fails writes with
    // SQLITE_FULL exactly as on ENOSPC, and it needs neither root nor a small file system.
    const dir = mkdtempSync(join(tmpdir(), 'sg-diskfull-'));
    const store = BufferStore.openAt(join(dir, 'buffer.db'));
    const config = configSchema.parse({
      site: { id: 'full', timezone: 'Europe/Berlin' },
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
      inputs: [{ id: 'in', type: 'files', dir: join(dir, 'in'), dcp: 'GI-01' }],
    });
    const paused: boolean[] = [];
    const gate = new BackPressure({
      store,
      limits: { ...config.buffer, maxBytes: 2 * 1024 ** 3 },
      logger: silentLogger(),
      intervalMs: 20,
      // The file system itself has room; only SQLite's page limit is reached.
      freeBytes: () => 1024 ** 3,
      onPausedChange: (p) => paused.push(p),
    });
    gate.start();
    const intake = new Intake({
      store,
      mapping: mappingContext(config),
      logger: silentLogger(),
      gate,
    });
    intake.open();
    const reads = (from: number, n: number): IntakeItem[] =>
      Array.from({ length: n }, (_, i) => ({
        kind: 'read',
        read: {
          inputId: 'in',
          raw: Buffer.from(`FULL-${from + i}-${'x'.repeat(500)}`),
          receivedAt: new Date(),
        },
      }));
    try {
      await intake.submit(reads(0, 10));
      const pages = sqlOf(store).pragma('page_count', { simple: true }) as number;
      sqlOf(store).pragma(`max_page_count = ${pages + 2}`);

      const refused = await intake.submit(reads(10, 200)).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(isDiskFull(refused)).toBe(true);
      expect(refused).toMatchObject({ code: ErrorCodes.BUFFER_DISK_FULL, retryable: true });
      await waitFor(() => gate.snapshot().diskFull !== undefined);
      expect(paused).toEqual([true]);
      // What health makes of it (the page and the status show this sentence).
      const health = deriveHealth({
        inputs: [],
        buffer: {
          waitingScans: 10,
          oldestWaitingAgeMs: 0,
          heldScans: 0,
          failedScans: 0,
          quota: gate.snapshot(),
        },
        recent: {
          reads: 10,
          rejections: 0,
          rejectionsByInput: [],
          failedScans: 0,
          filesRefused: [],
          filesRefusedCount: 0,
        },
        stuckBatches: [],
        config: {},
      });
      expect(health.problems.map((p) => p.sentence).join(' ')).toMatch(
        /disk of the buffer is full: inputs are paused and nothing new is acknowledged/,
      );
      expect(intake.lastCommitError?.message).toMatch(/full/);
      // Still full: the probe keeps the alarm on.
      await new Promise((resolve) => setTimeout(resolve, 60));
      expect(gate.snapshot().diskFull).toBeDefined();
      expect(sqlOf(store).pragma('integrity_check', { simple: true })).toBe('ok');
      expect(store.reports.totals().pendingScans).toBe(10);

      // Room again: the probe notices, inputs resume, the same reads are taken.
      sqlOf(store).pragma('max_page_count = 1073741823');
      await waitFor(() => gate.snapshot().diskFull === undefined, {
        what: 'disk-full alarm cleared',
      });
      expect(paused).toEqual([true, false]);
      await intake.submit(reads(10, 200));
      expect(store.reports.totals().pendingScans).toBe(210);
      expect(intake.lastCommitError).toBeUndefined();
    } finally {
      gate.stop();
      intake.close();
      store.close();
    }
  });
});
