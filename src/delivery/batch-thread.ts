import { Worker } from 'node:worker_threads';
import { ErrorCodes, GatewayError, type ErrorCode } from '../errors.js';
import type { Logger } from '../log.js';
import { threadScript } from '../paths.js';
import type { BatchRow } from '../buffer/store.js';
import type { FormOptions } from './batcher.js';
import { LoopTurn } from './write-turn.js';

/** A request posted to the batch thread (batch-worker.ts). */
export type BatchThreadRequest =
  | {
      id: number;
      /**
       * Forms one batch by `formFirst`: the first of `attempts` that packs any scan; with
       * `stepScans`, a backlog's batch written in steps (`formInSteps`).
       */
      op: 'form';
      attempts: FormOptions[];
      stepScans?: number;
    }
  | {
      id: number;
      /** Reads a batch's body as bytes (`Batches.batchBodyBytes`). */
      op: 'body';
      batchId: number;
    };

/** Each member of the union `T` without its `id` (a conditional type distributes over a union). */
type WithoutId<T> = T extends unknown ? Omit<T, 'id'> : never;

/** A {@link BatchThreadRequest} before its id is given. */
type RequestBody = WithoutId<BatchThreadRequest>;

/**
 * The batch thread's reply: the batch formed (null: none), the body, what failed in SQLite, or
 * why the thread cannot work on the buffer at all (its connection could not open).
 */
export type BatchThreadReply = { id: number } & (
  | { batch: BatchRow | null }
  | { body: Uint8Array }
  | { error: { code: ErrorCode; message: string } }
  | { unavailable: string }
);

/** After this long without a request the thread ends, and its memory with it, ms. */
export const BATCH_THREAD_IDLE_MS = 30_000;

/**
 * After the thread failed to start, could not open the buffer or died, it is not used for this
 * long (the caller works in process), ms.
 */
export const BATCH_THREAD_COOLDOWN_MS = 60_000;

/**
 * A direct batch's body is read in the thread from this size on, bytes: a smaller one takes SQLite
 * well under a millisecond a hundred KiB on the event loop, less than the round trip to a thread.
 */
export const BATCH_THREAD_MIN_BODY_BYTES = 256 * 1024;

/**
 * The thread could not do the work for a reason of the thread, not of the buffer: its script is
 * missing, it could not start, it died, or the gateway is stopping. The caller does the work on its
 * own connection instead.
 */
export class BatchThreadUnavailable extends GatewayError {
  constructor(readonly reason: string) {
    super(ErrorCodes.INTERNAL, `the batch thread is unavailable: ${reason}`);
    this.name = 'BatchThreadUnavailable';
  }
}

/**
 * Before a write of a batch's state on the store's connection: waits for `thread`'s writes in
 * flight to end ({@link BatchThread.writing}), so the event loop serves reads meanwhile instead of
 * sleeping in SQLite's busy handler. At once without a thread, or when it writes nothing.
 */
export async function threadWritesEnded(thread: BatchThread | undefined): Promise<void> {
  const writing = thread?.writing();
  if (writing) await writing;
}

/** How {@link BatchThread} runs. */
export interface BatchThreadOptions {
  /** The buffer file (not `:memory:`: the thread opens it on its own). */
  path: string;
  logger: Logger;
  /** See {@link BATCH_THREAD_IDLE_MS}. */
  idleMs?: number;
  /** The thread's script; default the built batch-worker.js (see {@link batchWorkerScript}). */
  script?: URL;
  /**
   * Longest the thread lets the loop's writers go first, ms, per wait; default `THREAD_YIELD_MS`
   * (write-turn.ts). Tests that look at the buffer between two steps set it long.
   */
  turnYieldMs?: number;
}

interface Pending {
  resolve: (reply: BatchThreadReply) => void;
  reject: (err: Error) => void;
}

/**
 * The built thread script: beside this module in dist/ and in the bundle, dist/'s under vitest
 * (`threadScript`).
 * @throws GatewayError `SCANGW_E_INTERNAL` when it is not built.
 */
export function batchWorkerScript(): URL {
  return threadScript(
    new URL('./batch-worker.js', import.meta.url),
    'dist/src/delivery/batch-worker.js',
  );
}

/**
 * Delivery's heavy SQLite work in a worker thread with its own connection to the buffer: forming a
 * batch from a backlog (5,000 scans moved `pending` → `batched` and committed, about 20 ms) and
 * reading a direct batch's body (3.7 MB, about 5 ms). On the event loop those were most of its
 * time while a backlog drained, and every read of the line, probe and lookup waited behind them
 * (docs/performance.md, section 16). The loop's writers that can wait do so for {@link writing}
 * instead of for SQLite's write lock (`busy_timeout`), so the loop serves others meanwhile.
 *
 * Started at the first request, ended after {@link BATCH_THREAD_IDLE_MS} without one: a gateway
 * that delivers as it scans never starts it. When it cannot start, cannot open the buffer (a
 * buffer opened exclusively) or dies, the requests in flight
 * fail with {@link BatchThreadUnavailable} and {@link usable} is false for
 * {@link BATCH_THREAD_COOLDOWN_MS}: the callers work in process meanwhile, as without a thread.
 * What the thread writes is one transaction per batch, or per step of a batch written in steps
 * (each leaving a whole batch), so a thread ended at any point leaves the buffer with whole batches.
 */
export class BatchThread {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closed = false;
  private unusableUntil = 0;
  private idleTimer: NodeJS.Timeout | undefined;
  /** Requests answered by a thread, by kind (for tests). */
  readonly done = { form: 0, body: 0 };
  /** Whose turn it is to write the buffer, shared with the thread (write-turn.ts). */
  private readonly turn = new LoopTurn();

  constructor(private readonly options: BatchThreadOptions) {}

  /** Whether requests go to the thread now (not closed, not within a cooldown after a failure). */
  get usable(): boolean {
    return !this.closed && performance.now() >= this.unusableUntil;
  }

  /** Whether a thread is running now. */
  get running(): boolean {
    return this.worker !== undefined;
  }

  /**
   * Forms one batch in the thread: the first of `attempts` that packs a scan. With `stepScans`, a
   * backlog's batch is written in steps of that many scans (`formInSteps`),
   * each its own transaction in the thread's turn to write ({@link writing}): the store
   * connection's writers that wait go in between two steps, so they wait for one step, not for the
   * whole batch. The batch is whole after every step, and the uploader does not send it before
   * this answer (`Batcher.unfinished`). A step that fails ends the batch with the steps before
   * (its error is thrown).
   *
   * Resolves with the batch, or undefined when none packed any.
   * @throws BatchThreadUnavailable (rejects) as told there; GatewayError with the code of what
   *   failed in SQLite (`SCANGW_E_BUFFER_DISK_FULL` on a full disk, else `SCANGW_E_BUFFER`).
   */
  async form(attempts: FormOptions[], stepScans?: number): Promise<BatchRow | undefined> {
    const reply = await this.request({
      op: 'form',
      attempts,
      ...(stepScans === undefined ? {} : { stepScans }),
    });
    this.done.form++;
    return 'batch' in reply && reply.batch ? reply.batch : undefined;
  }

  /**
   * The turn to write the buffer for a writer on the store's connection (write-turn.ts):
   * undefined when the thread is not in a write transaction, the turn then held until the next
   * tick, so the caller writes at once, synchronously; else a promise settled once that
   * transaction ended, with the turn held for the loop's writers, who write in its reactions.
   * Asking tells the thread that a writer waits: it lets the writer go in before its next write
   * transaction (the next step of a batch written in steps). Never rejects; undefined while no
   * thread runs.
   *
   * A writer on the store's connection that can wait (intake's group commit, the uploader's and
   * the status tracker's updates of a batch) waits for this instead of meeting the thread's
   * transaction in SQLite's busy handler, which sleeps on the event loop until the transaction
   * ends, during which no read, probe or lookup is served. A backlog's drain keeps the thread
   * writing much of the time (docs/performance.md, section 16).
   */
  writing(): Promise<void> | undefined {
    if (this.worker === undefined) return undefined;
    return this.turn.take();
  }

  /**
   * A batch's body, read in the thread (`Batches.batchBodyBytes`): its scans' stored JSON in id
   * order as one array, the bytes sent.
   * @throws as {@link form}.
   */
  async body(batchId: number): Promise<Buffer> {
    const reply = await this.request({ op: 'body', batchId });
    this.done.body++;
    if (!('body' in reply))
      throw new GatewayError(ErrorCodes.INTERNAL, `the batch thread sent no body for ${batchId}`);
    const b = reply.body;
    return Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  }

  /** Ends the thread; requests in flight fail with {@link BatchThreadUnavailable}. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    await this.end(new BatchThreadUnavailable('the gateway is stopping'));
  }

  private request(body: RequestBody): Promise<BatchThreadReply> {
    if (this.closed) return Promise.reject(new BatchThreadUnavailable('the gateway is stopping'));
    let worker: Worker;
    try {
      worker = this.worker ?? this.spawn();
    } catch (err) {
      this.failed(`it cannot start: ${(err as Error).message}`);
      return Promise.reject(
        new BatchThreadUnavailable(`it cannot start: ${(err as Error).message}`),
      );
    }
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    const id = this.nextId++;
    return new Promise<BatchThreadReply>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, ...body } satisfies BatchThreadRequest);
    }).then((reply) => {
      if ('error' in reply) throw new GatewayError(reply.error.code, reply.error.message);
      if ('unavailable' in reply) {
        this.failed(reply.unavailable);
        throw new BatchThreadUnavailable(reply.unavailable);
      }
      return reply;
    });
  }

  private spawn(): Worker {
    const worker = new Worker(this.options.script ?? batchWorkerScript(), {
      workerData: {
        path: this.options.path,
        turn: this.turn.buffer,
        turnYieldMs: this.options.turnYieldMs,
      },
    });
    // An idle thread must not keep the process alive; the uploader's loop holds it while it works.
    worker.unref();
    worker.on('message', (reply: BatchThreadReply) => {
      if (this.worker !== worker) return;
      const waiting = this.pending.get(reply.id);
      if (!waiting) return;
      this.pending.delete(reply.id);
      if (this.pending.size === 0) this.idleLater(worker);
      waiting.resolve(reply);
    });
    worker.on('error', (err) => this.died(worker, `it failed: ${err.message}`));
    worker.on('exit', (code) => this.died(worker, `it exited (code ${code})`));
    this.worker = worker;
    this.options.logger.debug({ component: 'delivery' }, 'batch thread started');
    return worker;
  }

  /** Ends the thread after {@link BATCH_THREAD_IDLE_MS} without a request. */
  private idleLater(worker: Worker): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.worker !== worker || this.pending.size > 0) return;
      this.options.logger.debug({ component: 'delivery' }, 'batch thread idle; ended');
      void this.end(new BatchThreadUnavailable('it was ended'));
    }, this.options.idleMs ?? BATCH_THREAD_IDLE_MS);
    this.idleTimer.unref();
  }

  private died(worker: Worker, reason: string): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    this.turn.threadGone();
    this.failed(reason);
    this.rejectAll(new BatchThreadUnavailable(reason));
  }

  private failed(reason: string): void {
    if (this.closed) return;
    this.unusableUntil = performance.now() + BATCH_THREAD_COOLDOWN_MS;
    this.options.logger.warn(
      { component: 'delivery', path: this.options.path, reason },
      `the batch thread is unavailable; batches are formed on the main connection for ${BATCH_THREAD_COOLDOWN_MS / 1000} s`,
    );
  }

  private rejectAll(err: Error): void {
    const waiting = [...this.pending.values()];
    this.pending.clear();
    for (const p of waiting) p.reject(err);
  }

  private async end(err: Error): Promise<void> {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    const worker = this.worker;
    this.worker = undefined;
    this.rejectAll(err);
    if (worker) await worker.terminate();
    // Ended in a write transaction, it never gave its turn back.
    this.turn.threadGone();
  }
}
