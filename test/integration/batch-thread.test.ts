import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { deliverySchema, type DeliveryConfig } from '../../src/config/schema.js';
import { BatchThread, BatchThreadUnavailable } from '../../src/delivery/batch-thread.js';
import { Batcher, FORMING_WAIT_MS, formBatch } from '../../src/delivery/batcher.js';
import { ErrorCodes, isGatewayError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { scanAt } from '../helpers/records.js';
import { waitFor } from '../helpers/wait.js';

const scan = (reference: string): IntakeRecord => scanAt(reference, 'GI-01', Date.now());

const config = (over: Partial<DeliveryConfig> = {}): DeliveryConfig =>
  deliverySchema.parse({
    mode: 'direct',
    maxBatchScans: 1000,
    maxBatchDelayMs: 50,
    statusPollMs: 50,
    statusPollMaxMs: 200,
    retryBaseMs: 20,
    retryMaxMs: 200,
    ...over,
  });

describe('the batch thread: a backlog formed and read off the event loop', () => {
  let dir: string;
  let store: BufferStore;
  const threads: BatchThread[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sg-batch-thread-'));
    store = BufferStore.openAt(join(dir, 'buffer.db'));
  });
  afterEach(async () => {
    await Promise.all(threads.splice(0).map((t) => t.close()));
    store.close();
  });

  const thread = (over: Partial<ConstructorParameters<typeof BatchThread>[0]> = {}) => {
    const t = new BatchThread({ path: store.path, logger: silentLogger(), ...over });
    threads.push(t);
    return t;
  };
  /** `count` pending scans named `prefix-i`, and a Batcher forming through `t`. */
  const backlog = (
    prefix: string,
    count: number,
    t: BatchThread,
    onFormed?: () => void,
    formStepScans?: number,
  ) => {
    store.intake.commitIntake(
      Array.from({ length: count }, (_, i) => scan(`${prefix}-${i}`)),
      Date.now(),
    );
    return new Batcher({
      store,
      config: config(),
      logger: silentLogger(),
      now: Date.now,
      thread: t,
      ...(onFormed ? { onFormed } : {}),
      ...(formStepScans === undefined ? {} : { formStepScans }),
    });
  };
  /** The pending scans as the totals say and as the rows say, and the batched scans per batch. */
  const ledger = () => {
    const db = sqlOf(store);
    return {
      pendingTotal: store.batches.pending().count,
      pendingRows: db
        .prepare(`SELECT count(*) FROM scan_rows WHERE state = 'pending'`)
        .pluck()
        .get(),
      perBatch: db
        .prepare(
          `SELECT b.id, b.scan_count AS counted, b.bytes AS bytes, count(r.id) AS rows,
                  2 + coalesce(sum(r.bytes), 0) + max(count(r.id) - 1, 0) AS rowBytes
             FROM batches b LEFT JOIN scan_rows r ON r.batch_id = b.id GROUP BY b.id ORDER BY b.id`,
        )
        .all() as { id: number; counted: number; bytes: number; rows: number; rowBytes: number }[],
    };
  };
  /** Each batch's scan_count and bytes are its rows' (a whole batch). */
  const expectWhole = () => {
    const l = ledger();
    expect(l.pendingTotal).toBe(l.pendingRows);
    for (const b of l.perBatch) {
      expect(b.counted).toBe(b.rows);
      expect(b.bytes).toBe(b.rowBytes);
    }
    return l;
  };

  it('forms a full batch in the thread, wakes its caller, and the body it reads is the one read in process', async () => {
    const t = thread();
    let woken = 0;
    const batcher = backlog('T', 2500, t, () => woken++);

    // The first call starts the form and answers at once; a call meanwhile starts no second one.
    expect(batcher.formIfDue()).toBe(FORMING_WAIT_MS);
    expect(batcher.formIfDue()).toBe(FORMING_WAIT_MS);
    await batcher.settled();
    expect(woken).toBe(1);
    expect(t.done.form).toBe(1);

    const [batch] = store.batches.batchesInState('ready');
    expect(batch?.scanCount).toBe(1000);
    expect(store.batches.pending().count).toBe(1500);

    const inThread = await t.body(batch!.id);
    expect(t.done.body).toBe(1);
    expect(inThread.equals(store.batches.batchBodyBytes(batch!.id))).toBe(true);
    const refs = (JSON.parse(inThread.toString('utf8')) as { reference: string }[]).map(
      (s) => s.reference,
    );
    expect(refs).toEqual(Array.from({ length: 1000 }, (_, i) => `T-${i}`));
  });

  it("tells the store connection's writers when its write ends: writing() settles as the batch is written", async () => {
    const t = thread();
    const batcher = backlog('W', 2500, t);
    expect(t.writing()).toBeUndefined();
    batcher.formIfDue();
    const writing = t.writing();
    expect(writing).toBeInstanceOf(Promise);
    // One promise for the writes in flight, whoever asks.
    expect(t.writing()).toBe(writing);
    await writing;
    // Settled with the batch committed: a writer that waited meets no lock and the batch is there.
    expect(t.writing()).toBeUndefined();
    expect(store.batches.batchesInState('ready')).toHaveLength(1);
    await batcher.settled();
  });

  it("writes a backlog's batch in steps: writers go in between, the batch is whole after each step and named until the last", async () => {
    const t = thread();
    // Steps of 400 for a batch of 1,000: 400, 400, 200.
    const batcher = backlog('S', 2500, t, undefined, 400);
    expect(batcher.formIfDue()).toBe(FORMING_WAIT_MS);
    await t.writing();
    // After the first step: a whole batch of 400, named as growing, and the store's connection
    // writes without waiting (the next step is posted only after the loop turned).
    const [first] = store.batches.batchesInState('ready');
    expect(first?.scanCount).toBe(400);
    expect(t.growing).toBe(first!.id);
    expect(batcher.formingBatchId()).toBe(first!.id);
    store.intake.commitIntake([scan('S-new')], Date.now());
    expectWhole();
    await batcher.settled();

    // No writer asked during the later steps: the thread took them in one request.
    expect(t.done).toMatchObject({ form: 1, grow: 1 });
    expect(batcher.formingBatchId()).toBeUndefined();
    const [batch] = store.batches.batchesInState('ready');
    expect(batch?.scanCount).toBe(1000);
    expect(store.batches.pending().count).toBe(1501);
    expectWhole();
    const refs = (
      JSON.parse((await t.body(batch!.id)).toString('utf8')) as { reference: string }[]
    ).map((s) => s.reference);
    expect(refs).toEqual(Array.from({ length: 1000 }, (_, i) => `S-${i}`));
  });

  it('goes from step to step while no writer waits, and stops after the step at hand when one asks', async () => {
    const t = thread();
    // Steps of 250 for a batch of 1,000.
    const batcher = backlog('P', 1500, t, undefined, 250);
    batcher.formIfDue();
    await t.writing();
    expect(store.batches.batchesInState('ready').map((b) => b.scanCount)).toEqual([250]);
    // Another connection holds the write lock, so the thread's next step cannot end before a
    // writer here has asked.
    const other = new Database(store.path);
    try {
      other.exec('BEGIN IMMEDIATE');
      let waits: Promise<void> | undefined;
      await waitFor(() => (waits = t.writing()) !== undefined, { timeoutMs: 5000 });
      other.exec('ROLLBACK');
      await waits;
      // It stopped after one step for the writer, then took the last two without a pause.
      expect(store.batches.batchesInState('ready').map((b) => b.scanCount)).toEqual([500]);
      expectWhole();
      await batcher.settled();
    } finally {
      other.close();
    }
    expect(t.done).toMatchObject({ form: 1, grow: 2 });
    expect(store.batches.batchesInState('ready').map((b) => b.scanCount)).toEqual([1000]);
    expectWhole();
  });

  it('ends a batch at the step whose span changed since the plan, and batches that span next', async () => {
    const t = thread();
    const batcher = backlog('C', 2500, t, undefined, 400);
    // C-500 is held when the batch is planned; it is pending again before the second step (as a
    // batch split by a 413 releases its scans): that span is no longer what was planned.
    const db = sqlOf(store);
    db.prepare(`UPDATE scan_rows SET state = 'held' WHERE reference = 'C-500'`).run();
    batcher.formIfDue();
    await t.writing();
    db.prepare(`UPDATE scan_rows SET state = 'pending' WHERE reference = 'C-500'`).run();
    await batcher.settled();
    expect(t.done).toMatchObject({ form: 1, grow: 1 });
    expect(store.batches.batchesInState('ready').map((b) => b.scanCount)).toEqual([400]);
    expectWhole();

    // The next batch starts where the first ended and takes C-500 in its place.
    batcher.formIfDue();
    await batcher.settled();
    const [, second] = store.batches.batchesInState('ready');
    const refs = (
      JSON.parse((await t.body(second!.id)).toString('utf8')) as { reference: string }[]
    ).map((s) => s.reference);
    expect(refs.slice(0, 3)).toEqual(['C-400', 'C-401', 'C-402']);
    expect(refs).toContain('C-500');
    expect(new Set(refs).size).toBe(refs.length);
    expectWhole();
  });

  it('leaves a whole, smaller batch when the thread ends between steps', async () => {
    const t = thread();
    const batcher = backlog('X', 2500, t, undefined, 400);
    batcher.formIfDue();
    await t.writing();
    await t.close();
    await batcher.settled();
    expect(store.batches.batchesInState('ready').map((b) => b.scanCount)).toEqual([400]);
    expect(store.batches.pending().count).toBe(2100);
    expectWhole();
  });

  it('forms a batch due by age, a few scans, in process without starting the thread', () => {
    store.intake.commitIntake([scan('A-1'), scan('A-2')], Date.now() - 1000);
    const t = thread();
    const batcher = new Batcher({
      store,
      config: config(),
      logger: silentLogger(),
      now: Date.now,
      thread: t,
    });
    expect(batcher.formIfDue()).toBe(0);
    expect(store.batches.batchesInState('ready').map((b) => b.scanCount)).toEqual([2]);
    expect(t.running).toBe(false);
    expect(t.done.form).toBe(0);
  });

  it('tells what failed in SQLite as the buffer error it is, at the next call, and leaves the scans pending', async () => {
    // A trigger refuses every new batch: the thread's own transaction fails, as a full disk would.
    sqlOf(store).exec(
      `CREATE TRIGGER no_batches BEFORE INSERT ON batches BEGIN SELECT RAISE(ABORT, 'no batch may be written'); END`,
    );
    const t = thread();
    const batcher = backlog('E', 1200, t);
    expect(batcher.formIfDue()).toBe(FORMING_WAIT_MS);
    await batcher.settled();
    let thrown: unknown;
    try {
      batcher.formIfDue();
    } catch (err) {
      thrown = err;
    }
    expect(isGatewayError(thrown, ErrorCodes.BUFFER)).toBe(true);
    expect((thrown as Error).message).toContain('no batch may be written');
    expect(store.batches.pending().count).toBe(1200);
    expect(store.batches.batchesInState('ready')).toEqual([]);
    expect(t.usable).toBe(true);
  });

  it('forms on the store connection when the thread cannot open the buffer, and logs why', async () => {
    const log = memoryLogger('warn');
    const t = thread({ path: join(dir, 'no-such-buffer.db'), logger: log.logger });
    const batcher = backlog('O', 1200, t);
    expect(batcher.formIfDue()).toBe(FORMING_WAIT_MS);
    await batcher.settled();
    expect(t.usable).toBe(false);
    const warning = log.parsed().find((l) => l.msg.startsWith('the batch thread is unavailable'));
    expect(String(warning?.reason)).toMatch(/^it cannot open the buffer: .*no-such-buffer\.db/);
    expect(batcher.formIfDue()).toBe(0);
    expect(store.batches.batchesInState('ready').map((b) => b.scanCount)).toEqual([1000]);
  });

  it('forms on the store connection while a thread that died is cooling down, and logs why', async () => {
    const script = join(dir, 'dies.mjs');
    writeFileSync(script, 'process.exit(3);\n');
    const log = memoryLogger('warn');
    const t = thread({ script: pathToFileURL(script), logger: log.logger });
    const batcher = backlog('D', 1200, t);
    expect(batcher.formIfDue()).toBe(FORMING_WAIT_MS);
    await batcher.settled();
    expect(t.usable).toBe(false);
    const warning = log.parsed().find((l) => l.msg.startsWith('the batch thread is unavailable'));
    expect(warning?.reason).toBe('it exited (code 3)');
    // The next call forms the batch itself.
    expect(batcher.formIfDue()).toBe(0);
    expect(store.batches.batchesInState('ready').map((b) => b.scanCount)).toEqual([1000]);
    await expect(t.body(1)).rejects.toBeInstanceOf(BatchThreadUnavailable);
  });

  it('fails what is asked after close with the reason, and forms nothing then', async () => {
    const t = thread();
    await t.close();
    expect(t.usable).toBe(false);
    await expect(t.form([])).rejects.toThrow(/the gateway is stopping/);
  });

  it('ends an idle thread and starts it again at the next request', async () => {
    store.intake.commitIntake([scan('I-1')], Date.now());
    const t = thread({ idleMs: 50 });
    const batch = formBatch(store, {
      mode: 'direct',
      maxScans: 10,
      maxBytes: 1_000_000,
      nowIso: new Date().toISOString(),
    });
    await t.body(batch!.id);
    expect(t.running).toBe(true);
    await waitFor(() => !t.running, { timeoutMs: 10_000 });
    const again = await t.body(batch!.id);
    expect(JSON.parse(again.toString('utf8'))).toHaveLength(1);
    expect(t.running).toBe(true);
  });
});
