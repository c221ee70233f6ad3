/** How a {@link LoopSleep.sleep} ended: its time ran out, {@link LoopSleep.wake} or `interrupt`, or its signal aborted. */
export type SleepEnd = 'elapsed' | 'woken' | 'aborted';

/**
 * The one interruptible sleep of the background loops (the uploader, the status tracker, the
 * status-event reader, the leader election, the MQTT input's submit retries). A loop sleeps
 * between its steps; a stop (an `AbortSignal`) or new work ({@link wake}) ends the sleep at once,
 * so a loop never waits out its interval to notice either. The timer is cleared when the sleep
 * ends, whichever way.
 *
 * A `wake()` that comes while the loop is busy (no sleep in progress) is kept and ends the next
 * sleep at once: work that arrived during a step is looked at before sleeping. `interrupt()` ends
 * only the sleeps in progress (for a caller that re-checks its own flags after each sleep).
 * Several sleeps may be in progress at once (the MQTT input's submits); both end them all.
 *
 * A sleep is a plain timer and the resolve of its promise, cleared and called by whatever ends it
 * first: no error is made to end one. An `AbortController` per sleep and `timers/promises` made
 * two (a `DOMException` and the timer's `AbortError`, each with its stack) per wake, and a drain
 * wakes the uploader's loop at every commit: about 0.4 s of the event loop's 12.8 s of work in the
 * outage row's 1 M drain (docs/performance.md, section 16).
 */
export class LoopSleep {
  /** The sleeps in progress, by the function that ends each. */
  private readonly sleeping = new Set<(how: SleepEnd) => void>();
  private pending = false;

  /**
   * Sleeps `ms` milliseconds (negative counts as 0), or less when woken or when `signal` aborts.
   * Never rejects. Answers at once, without a timer, when `signal` has aborted already (`aborted`)
   * or a wake is pending (`woken`, and the wake is used up).
   */
  sleep(ms: number, signal?: AbortSignal): Promise<SleepEnd> {
    if (signal?.aborted) return Promise.resolve('aborted');
    if (this.pending) {
      this.pending = false;
      return Promise.resolve('woken');
    }
    return new Promise<SleepEnd>((resolve) => {
      const end = (how: SleepEnd): void => {
        if (!this.sleeping.delete(end)) return;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(how);
      };
      const onAbort = (): void => end('aborted');
      const timer = setTimeout(() => end('elapsed'), Math.max(0, ms));
      this.sleeping.add(end);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Ends the sleeps in progress; when none is, the next sleep ends at once. */
  wake(): void {
    if (this.sleeping.size === 0) this.pending = true;
    else this.interrupt();
  }

  /** Ends the sleeps in progress only; a later sleep runs its full time. */
  interrupt(): void {
    for (const end of [...this.sleeping]) end('woken');
  }
}
