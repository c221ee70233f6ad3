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

  // The tests below look at the buffer between two of the thread's writes, while the thread lets
  // the loop go first. Its production bound (50 ms) lets it write anyway when the loop is slow to
  // run, as a loaded machine can be: long here, so no assertion depends on the machine's speed.
  const thread = (over: Partial<ConstructorParameters<typeof BatchThread>[0]> = {}) => {
    const t = new BatchThread({
      path: store.path,
      logger: silentLogger(),
      turnYieldMs: 30_000,
      ...over,
    });
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

  /**
   * Starts `t` with its connection open: opening it writes a check, which {@link lockOut} would
   * hold up. A body read does it (the body of no batch is `[]`).
   */
  const opened = async (t: BatchThread) => {
    expect((await t.body(0)).toString()).toBe('[]');
  };
  /**
   * Holds the buffer's write lock on a connection of its own, so the thread's next write
   * transaction waits in SQLite with its turn taken: what a test looks at stays as it is meanwhile.
   */
  const lockOut = () => {
    const other = new Database(store.path);
    other.exec('BEGIN IMMEDIATE');
    return {
      release: () => {
        other.exec('ROLLBACK');
        other.close();
      },
    };
  };
  /** Waits until the thread is in a write transaction, then lets it commit; settles with the loop's turn. */
  const oneWrite = async (t: BatchThread, lock: { release(): void }) => {
    let turn: Promise<void> | undefined;
    await waitFor(() => (turn = t.writing()) !== undefined, { timeoutMs: 5000 });
    // One promise for every writer that asks while the thread writes.
    expect(t.writing()).toBe(turn);
    lock.release();
    await turn;
  };
  /** The store connection commits without waiting at all: no other connection is writing. */
  const commitAtOnce = (records: IntakeRecord[]) => {
    const db = sqlOf(store);
    db.pragma('busy_timeout = 0');
    try {
      store.intake.commitIntake(records, Date.now());
    } finally {
      db.pragma('busy_timeout = 5000');
    }
  };

  it("gives the store connection's writers their turn: writing() waits only for a write transaction of the thread", async () => {
    const t = thread();
    const batcher = backlog('W', 2500, t);
    // No thread running: nothing to wait for.
    expect(t.writing()).toBeUndefined();
    await opened(t);
    const lock = lockOut();
    batcher.formIfDue();
    await oneWrite(t, lock);
    // Settled with the batch committed and the turn the loop's until the next tick: a writer in
    // its reactions meets no lock, and the batch is there.
    expect(store.batches.batchesInState('ready')).toHaveLength(1);
    commitAtOnce([scan('W-new')]);
    expect(t.writing()).toBeUndefined();
    await batcher.settled();
    expect(store.batches.pending().count).toBe(1501);
    // Reading a body is no write: the loop's writers do not wait for it.
    const [batch] = store.batches.batchesInState('ready');
    const body = t.body(batch!.id);
    expect(t.writing()).toBeUndefined();
    commitAtOnce([scan('W-newer')]);
    expect((await body).length).toBeGreaterThan(0);
  });

  it("writes a backlog's batch in steps: writers go in between, the batch is whole after each step and named until the last", async () => {
    const t = thread();
    // Steps of 400 for a batch of 1,000: 400, 400, 200.
    const batcher = backlog('S', 2500, t, undefined, 400);
    await opened(t);
    const lock = lockOut();
    expect(batcher.formIfDue()).toBe(FORMING_WAIT_MS);
    await oneWrite(t, lock);
    // After the first step: a whole batch of 400, and the store's connection writes without
    // waiting (the thread's next step waits for the loop's turn to end).
    const [first] = store.batches.batchesInState('ready');
    expect(first?.scanCount).toBe(400);
    commitAtOnce([scan('S-new')]);
    expectWhole();
    // Not to be sent until its last step.
    expect(batcher.unfinished(first!.id)).toBe(true);
    expect(batcher.unfinished(first!.id - 1)).toBe(false);
    await batcher.settled();

    // One request for the whole batch.
    expect(t.done).toMatchObject({ form: 1 });
    expect(batcher.unfinished(first!.id)).toBe(false);
    const [batch] = store.batches.batchesInState('ready');
    expect(batch?.scanCount).toBe(1000);
    expect(store.batches.pending().count).toBe(1501);
    expectWhole();
    const refs = (
      JSON.parse((await t.body(batch!.id)).toString('utf8')) as { reference: string }[]
    ).map((s) => s.reference);
    expect(refs).toEqual(Array.from({ length: 1000 }, (_, i) => `S-${i}`));
  });

  it('lets a writer that waits go in between two steps, and goes on with the next', async () => {
    const t = thread();
    // Steps of 250 for a batch of 1,000.
    const batcher = backlog('P', 1500, t, undefined, 250);
    await opened(t);
    let lock = lockOut();
    batcher.formIfDue();
    await oneWrite(t, lock);
    expect(store.batches.batchesInState('ready').map((b) => b.scanCount)).toEqual([250]);
    // The next step waits in SQLite with the thread's turn taken, so a writer here asks before
    // it can end.
    lock = lockOut();
    await oneWrite(t, lock);
    // The writer's turn came right after that step, before the next.
    expect(store.batches.batchesInState('ready').map((b) => b.scanCount)).toEqual([500]);
    commitAtOnce([scan('P-new')]);
    expectWhole();
    await batcher.settled();
    expect(t.done).toMatchObject({ form: 1 });
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
    await opened(t);
    const lock = lockOut();
    batcher.formIfDue();
    await oneWrite(t, lock);
    db.prepare(`UPDATE scan_rows SET state = 'pending' WHERE reference = 'C-500'`).run();
    await batcher.settled();
    expect(t.done).toMatchObject({ form: 1 });
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
    await opened(t);
    const lock = lockOut();
    batcher.formIfDue();
    await oneWrite(t, lock);
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
