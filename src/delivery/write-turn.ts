/**
 * Whose turn it is to write the buffer: the event loop's connection or the batch thread's
 * (batch-thread.ts). SQLite lets one connection write at a time; the other one, when it meets the
 * lock, sleeps in SQLite's busy handler. On the batch thread that is harmless. On the event loop it
 * stops every read, probe and lookup for as long as the thread's transaction lasts, and its sleeps
 * (1, 2, 5, 10 ms and up) overshoot it. So the two take turns before SQLite's lock is met:
 *
 * - the thread takes the turn around each write transaction only ({@link ThreadTurn.hold}), not
 *   while it reads (a batch's body, the plan of a batch written in steps), so the loop's writers
 *   wait for a transaction, never for the thread's queue of requests;
 * - a writer on the loop that finds the turn free holds it until the promise jobs of the moment
 *   have run (`process.nextTick`), time enough for its synchronous transaction, and no longer: the
 *   rest of a busy turn of the event loop does not hold the thread up ({@link LoopTurn.take});
 * - one that finds the thread writing marks that it waits and gets a promise, settled with the
 *   turn held for the loop once the thread's transaction ended. The thread, seeing the mark, lets
 *   it go first before its next write transaction (a batch written in steps: the next step).
 *
 * Every wait is bounded: the thread takes the turn anyway after {@link THREAD_YIELD_MS} (a loop
 * too busy to take its turn, or a writer that gave up), and SQLite's own lock still keeps the two
 * apart then. Correctness never depends on the turn, only the event loop's latency does.
 *
 * Shape: an `Int32Array` of {@link TURN_WORDS} words on a `SharedArrayBuffer`: word 0 is 1 while a
 * writer on the loop waits; word 1 is who holds the turn (0 none, 1 the thread, 2 the loop).
 */

/** Length of the shared `Int32Array`. */
export const TURN_WORDS = 2;

const WAITS = 0;
const HOLDER = 1;
const NONE = 0;
const THREAD = 1;
const LOOP = 2;

/**
 * Longest the thread lets the loop go first, in ms: for a waiting writer to take its turn, then
 * for the loop's turn to end. A loop that stays busy longer meets SQLite's lock instead.
 */
export const THREAD_YIELD_MS = 50;

/** How often the loop looks again while it waits for the thread, ms (a missed wake-up's bound). */
const LOOP_RECHECK_MS = 100;

/** `Atomics` with `waitAsync` (ES2024, in every supported Node.js; the compiler's lib is ES2023). */
const atomics = Atomics as unknown as {
  waitAsync(
    array: Int32Array,
    index: number,
    value: number,
    timeoutMs: number,
  ): { async: false; value: string } | { async: true; value: Promise<string> };
};

/** The event loop's side of the turn. */
export class LoopTurn {
  readonly words: Int32Array;
  private waited: Promise<void> | undefined;
  private releaseScheduled = false;

  constructor(buffer: SharedArrayBuffer = new SharedArrayBuffer(TURN_WORDS * 4)) {
    this.words = new Int32Array(buffer);
  }

  /** The shared memory, for the thread's {@link ThreadTurn}. */
  get buffer(): SharedArrayBuffer {
    return this.words.buffer as SharedArrayBuffer;
  }

  /**
   * Takes the turn for the loop's writer that asks: undefined when it is the loop's now (free, or
   * held by the loop already) and held until the next tick (after the promise jobs of the
   * moment), so the caller writes at once, synchronously, or in a reaction to a promise settled
   * now. Otherwise (the thread is in a write transaction) a promise, one for every writer that
   * asks meanwhile, settled with the turn held for the loop once the thread's transaction has
   * ended; the writers write in its reactions. Never rejects.
   */
  take(): Promise<void> | undefined {
    if (this.tryHold()) return undefined;
    Atomics.store(this.words, WAITS, 1);
    // Forgotten once settled, in a reaction: the wait can end before it is stored (the thread
    // gave the turn back between the two looks), and a settled promise kept here would let the
    // next writers in while the thread writes, with the mark left set for good.
    this.waited ??= this.waitForThread().finally(() => {
      this.waited = undefined;
    });
    return this.waited;
  }

  /** Whether a writer on the loop waits for the thread now (the thread lets it go first). */
  get waiting(): boolean {
    return Atomics.load(this.words, WAITS) !== 0;
  }

  /** The thread ended (or never started): a turn it held is free. */
  threadGone(): void {
    if (Atomics.compareExchange(this.words, HOLDER, THREAD, NONE) === THREAD)
      Atomics.notify(this.words, HOLDER);
  }

  private tryHold(): boolean {
    const was = Atomics.compareExchange(this.words, HOLDER, NONE, LOOP);
    if (was === THREAD) return false;
    if (!this.releaseScheduled) {
      this.releaseScheduled = true;
      // Once the promise jobs of the moment have all run: a writer that took the turn wrote
      // synchronously or after awaits of settled promises, and those that waited wrote in the
      // reactions to its promise. A tick queued from a promise job runs after the last of them.
      queueMicrotask(() =>
        process.nextTick(() => {
          this.releaseScheduled = false;
          if (Atomics.compareExchange(this.words, HOLDER, LOOP, NONE) === LOOP)
            Atomics.notify(this.words, HOLDER);
        }),
      );
    }
    return true;
  }

  private async waitForThread(): Promise<void> {
    try {
      for (;;) {
        const wait = atomics.waitAsync(this.words, HOLDER, THREAD, LOOP_RECHECK_MS);
        if (wait.async) await wait.value;
        if (this.tryHold()) return;
      }
    } finally {
      Atomics.store(this.words, WAITS, 0);
      Atomics.notify(this.words, WAITS);
    }
  }
}

/** The batch thread's side of the turn (batch-worker.ts). */
export class ThreadTurn {
  private readonly words: Int32Array;

  /**
   * @param buffer the loop's {@link LoopTurn.buffer}
   * @param yieldMs longest each of the two waits of {@link hold}, ms; a test that looks at the
   *   buffer between two of the thread's writes sets it long, so that what it asserts does not
   *   depend on how soon a loaded machine runs its event loop.
   */
  constructor(
    buffer: SharedArrayBuffer,
    private readonly yieldMs: number = THREAD_YIELD_MS,
  ) {
    this.words = new Int32Array(buffer);
  }

  /**
   * Runs `write` (one write transaction, synchronous) with the turn: first lets a writer of the
   * loop that waits go first, then waits for the loop's turn to end, each at most `yieldMs`
   * ({@link THREAD_YIELD_MS} by default). Blocks this thread meanwhile; the turn is free again
   * when `write` returns or throws.
   */
  hold<T>(write: () => T): T {
    const words = this.words;
    let deadline = performance.now() + this.yieldMs;
    while (Atomics.load(words, WAITS) !== 0) {
      const left = deadline - performance.now();
      if (left <= 0) break;
      Atomics.wait(words, WAITS, 1, left);
    }
    deadline = performance.now() + this.yieldMs;
    for (;;) {
      const was = Atomics.compareExchange(words, HOLDER, NONE, THREAD);
      if (was === NONE) break;
      const left = deadline - performance.now();
      if (left <= 0) {
        // The loop kept its turn too long: write anyway, SQLite's lock orders the two.
        Atomics.store(words, HOLDER, THREAD);
        break;
      }
      Atomics.wait(words, HOLDER, was, left);
    }
    try {
      return write();
    } finally {
      Atomics.store(words, HOLDER, NONE);
      Atomics.notify(words, HOLDER);
    }
  }
}
