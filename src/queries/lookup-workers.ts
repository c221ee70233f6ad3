import { Worker } from 'node:worker_threads';
import { ErrorCodes, GatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import { threadScript } from '../paths.js';
import type { ItemAnswer, ItemQuestion } from './item-questions.js';

/** A question posted to a lookup thread (lookup-worker.ts). */
export interface LookupRequest {
  id: number;
  question: ItemQuestion;
  /** The configured DCPs' kinds, as `[key, kind]` pairs (a Map does not cross as one). */
  dcpKinds: [string, string][];
}

/** A lookup thread's reply: the answer, or the message of what it threw. */
export type LookupReply = { id: number } & (ItemAnswer | { error: string });

/** Niceness of a lookup thread (0 the process's, 19 the lowest priority): see lookup-worker.ts. */
export const LOOKUP_NICENESS = 10;

/**
 * Longest a lookup may run in its thread before the thread is ended and a new one started, ms:
 * counted from when the thread runs (its start, tens of ms on a busy machine, is not the lookup's).
 */
export const LOOKUP_DEADLINE_MS = 30_000;

/**
 * The lookup could not be answered for a reason of the threads, not of the question: the thread
 * died or was ended past its deadline (restarted for the next lookup), its script is missing, or
 * the gateway is stopping. The route answers 503 with {@link LookupUnavailable.reason}.
 */
export class LookupUnavailable extends GatewayError {
  constructor(readonly reason: string) {
    super(ErrorCodes.INTERNAL, `item lookup unavailable: ${reason}`);
    this.name = 'LookupUnavailable';
  }
}

/** How {@link LookupWorkers} runs. */
export interface LookupWorkersOptions {
  /** The buffer file (not `:memory:`: a thread opens it on its own). */
  path: string;
  /** Threads, each answering one question at a time (`http.limits.maxItemLookups`, ≥ 1). */
  threads: number;
  logger: Logger;
  /** See {@link LOOKUP_DEADLINE_MS}. */
  deadlineMs?: number;
  /** The thread's script; default the built lookup-worker.js (see {@link lookupWorkerScript}). */
  script?: URL;
}

interface Job {
  request: LookupRequest;
  resolve: (answer: ItemAnswer) => void;
  reject: (err: Error) => void;
}

interface Slot {
  worker?: Worker;
  /** Whether `worker` runs (its `online` event came): the deadline counts from then. */
  online?: boolean;
  job?: Job;
  timer?: NodeJS.Timeout;
}

/**
 * The built thread script: beside this module in dist/ and in the bundle, dist/'s under vitest
 * (`threadScript`: tests of the item routes need `npm run build` first, as `npm test` does).
 * @throws GatewayError `SCANGW_E_INTERNAL` when it is not built.
 */
export function lookupWorkerScript(): URL {
  return threadScript(
    new URL('./lookup-worker.js', import.meta.url),
    'dist/src/queries/lookup-worker.js',
  );
}

/**
 * Item lookups answered in worker threads, each with its own read-only connection to the buffer,
 * so the main thread's event loop only posts a question and sends the text it gets back: probes,
 * ingest and the other routes are served while a wide lookup runs (tens of ms of SQLite and JSON).
 *
 * Threads start at their first question, at most `threads`; a thread that dies (or is ended past
 * its deadline) fails its question with {@link LookupUnavailable} and is started again at the next
 * one. Questions beyond `threads` wait here in order; the route's bounded queue (WorkQueue) keeps
 * them at most `threads`. {@link LookupWorkers.close} ends every thread.
 */
export class LookupWorkers {
  private readonly slots: Slot[];
  private readonly waiting: Job[] = [];
  private readonly deadlineMs: number;
  private nextId = 1;
  private closed = false;

  constructor(private readonly options: LookupWorkersOptions) {
    this.slots = Array.from({ length: Math.max(1, options.threads) }, () => ({}));
    this.deadlineMs = options.deadlineMs ?? LOOKUP_DEADLINE_MS;
  }

  /** Threads running now (started and not exited). */
  get threads(): number {
    return this.slots.filter((s) => s.worker).length;
  }

  /**
   * Answers `question` in a thread.
   * @throws LookupUnavailable (rejects) as told there; a GatewayError `SCANGW_E_BUFFER` with SQLite's message when the
   *   thread could not read the buffer.
   */
  run(question: ItemQuestion, dcpKinds: ReadonlyMap<string, string>): Promise<ItemAnswer> {
    if (this.closed) return Promise.reject(new LookupUnavailable('the gateway is stopping'));
    return new Promise<ItemAnswer>((resolve, reject) => {
      this.waiting.push({
        request: { id: this.nextId++, question, dcpKinds: [...dcpKinds] },
        resolve,
        reject,
      });
      this.dispatch();
    });
  }

  /** Ends every thread; questions not yet answered fail with {@link LookupUnavailable}. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.waiting.splice(0))
      job.reject(new LookupUnavailable('the gateway is stopping'));
    const ending: Promise<number>[] = [];
    for (const slot of this.slots) {
      this.settle(slot, new LookupUnavailable('the gateway is stopping'));
      if (slot.worker) ending.push(slot.worker.terminate());
      delete slot.worker;
    }
    await Promise.all(ending);
  }

  private dispatch(): void {
    for (const slot of this.slots) {
      if (slot.job) continue;
      const job = this.waiting.shift();
      if (!job) return;
      let worker: Worker;
      try {
        worker = slot.worker ?? this.spawn(slot);
      } catch (err) {
        job.reject(
          new LookupUnavailable(`the lookup thread cannot start: ${(err as Error).message}`),
        );
        continue;
      }
      slot.job = job;
      if (slot.online) this.armDeadline(slot, worker);
      worker.postMessage(job.request);
    }
  }

  /**
   * Past the deadline the thread is ended: unlike synchronous work in the main thread, a lookup in
   * a thread can be cut, and a stuck one would otherwise hold its slot for good.
   */
  private armDeadline(slot: Slot, worker: Worker): void {
    const job = slot.job;
    if (!job || slot.timer) return;
    slot.timer = setTimeout(() => {
      this.options.logger.warn(
        { component: 'http', question: job.request.question, deadlineMs: this.deadlineMs },
        'item lookup ran past its deadline; its thread is ended and started again at the next lookup',
      );
      this.settle(
        slot,
        new LookupUnavailable(
          `it ran longer than ${this.deadlineMs} ms; its thread was ended and is started again for the next lookup`,
        ),
      );
      this.drop(slot, worker);
      void worker.terminate();
      this.dispatch();
    }, this.deadlineMs);
    slot.timer.unref();
  }

  private spawn(slot: Slot): Worker {
    const script = this.options.script ?? lookupWorkerScript();
    const worker = new Worker(script, { workerData: { path: this.options.path } });
    // An idle thread must not keep the process alive; a lookup in flight is held by its request.
    worker.unref();
    slot.online = false;
    worker.once('online', () => {
      if (slot.worker !== worker) return;
      slot.online = true;
      this.armDeadline(slot, worker);
    });
    worker.on('message', (reply: LookupReply) => {
      if (slot.worker !== worker || slot.job?.request.id !== reply.id) return;
      // The question failed in SQLite (the thread lives on): a buffer error, answered 500 as in the loop.
      this.settle(
        slot,
        'error' in reply
          ? new GatewayError(ErrorCodes.BUFFER, reply.error)
          : { code: reply.code, json: reply.json },
      );
      this.dispatch();
    });
    worker.on('error', (err) =>
      this.died(slot, worker, `the lookup thread failed: ${err.message}`),
    );
    worker.on('exit', (code) => this.died(slot, worker, `the lookup thread exited (code ${code})`));
    slot.worker = worker;
    return worker;
  }

  private died(slot: Slot, worker: Worker, reason: string): void {
    if (slot.worker !== worker) return;
    this.drop(slot, worker);
    if (this.closed) return;
    this.options.logger.warn(
      { component: 'http', path: this.options.path, reason },
      'item lookup thread ended; it is started again at the next lookup',
    );
    this.settle(slot, new LookupUnavailable(`${reason}; it is started again for the next lookup`));
    this.dispatch();
  }

  private drop(slot: Slot, worker: Worker): void {
    if (slot.worker === worker) delete slot.worker;
  }

  private settle(slot: Slot, outcome: ItemAnswer | Error): void {
    const job = slot.job;
    if (slot.timer) clearTimeout(slot.timer);
    delete slot.timer;
    delete slot.job;
    if (!job) return;
    if (outcome instanceof Error) job.reject(outcome);
    else job.resolve(outcome);
  }
}
