import PQueue from 'p-queue';

/** Bounds of a {@link WorkQueue}. */
export interface WorkQueueOptions {
  /** Jobs worked on at once (≥ 1). */
  concurrency: number;
  /** Jobs waiting for their turn (≥ 0); one more is refused. */
  maxWaiting: number;
}

/**
 * A bounded queue for work done on behalf of a request (an item lookup: SQLite in a worker thread,
 * or in this one). What the queue bounds is how much of it can pile up, in memory and in work: at
 * most `concurrency` jobs run and `maxWaiting` wait; past that {@link WorkQueue.run} refuses at
 * once, and the route answers 429.
 *
 * Each job starts from a `setImmediate`: the event loop polls for I/O between two jobs, so when a
 * job is synchronous, probes, ingest and the other routes are served between two of them rather
 * than after all of them.
 */
export class WorkQueue {
  private readonly queue: PQueue;

  constructor(private readonly options: WorkQueueOptions) {
    this.queue = new PQueue({ concurrency: Math.max(1, options.concurrency) });
  }

  /** Jobs started and not yet finished. */
  get running(): number {
    return this.queue.pending;
  }

  /** Jobs waiting for their turn. */
  get waiting(): number {
    return this.queue.size;
  }

  /**
   * Queues `work`; resolves with its result (rejects with what it throws or rejects with) once it
   * ran, a promise it returns settled.
   * @returns undefined, having queued nothing, when `concurrency` jobs run and `maxWaiting` wait.
   */
  run<T>(work: () => T | Promise<T>): Promise<T> | undefined {
    if (
      this.queue.pending + this.queue.size >=
      Math.max(1, this.options.concurrency) + this.options.maxWaiting
    )
      return undefined;
    return this.queue.add(async () => {
      await new Promise<void>((resolve) => setImmediate(resolve));
      return work();
    });
  }
}
