import { setTimeout as delay } from 'node:timers/promises';

/** How a {@link LoopSleep.sleep} ended: its time ran out, {@link LoopSleep.wake} or `interrupt`, or its signal aborted. */
export type SleepEnd = 'elapsed' | 'woken' | 'aborted';

/**
 * The one interruptible sleep of the background loops (the uploader, the status tracker, the
 * status-event reader, the leader election, the MQTT input's submit retries). A loop sleeps
 * between its steps; a stop (an `AbortSignal`) or new work ({@link wake}) ends the sleep at once,
 * so a loop never waits out its interval to notice either. Built on `timers/promises`: the timer
 * is cleared when the sleep ends, whichever way.
 *
 * A `wake()` that comes while the loop is busy (no sleep in progress) is kept and ends the next
 * sleep at once: work that arrived during a step is looked at before sleeping. `interrupt()` ends
 * only the sleeps in progress (for a caller that re-checks its own flags after each sleep).
 * Several sleeps may be in progress at once (the MQTT input's submits); both end them all.
 */
export class LoopSleep {
  private readonly sleeping = new Set<AbortController>();
  private pending = false;

  /**
   * Sleeps `ms` milliseconds (negative counts as 0), or less when woken or when `signal` aborts.
   * Never rejects. Answers at once, without a timer, when `signal` has aborted already (`aborted`)
   * or a wake is pending (`woken`, and the wake is used up).
   */
  async sleep(ms: number, signal?: AbortSignal): Promise<SleepEnd> {
    if (signal?.aborted) return 'aborted';
    if (this.pending) {
      this.pending = false;
      return 'woken';
    }
    const own = new AbortController();
    const onAbort = (): void => own.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    this.sleeping.add(own);
    try {
      await delay(Math.max(0, ms), undefined, { signal: own.signal });
      return 'elapsed';
    } catch {
      // timers/promises rejects only with the AbortError of `own`.
      return signal?.aborted ? 'aborted' : 'woken';
    } finally {
      this.sleeping.delete(own);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Ends the sleeps in progress; when none is, the next sleep ends at once. */
  wake(): void {
    if (this.sleeping.size === 0) this.pending = true;
    else this.interrupt();
  }

  /** Ends the sleeps in progress only; a later sleep runs its full time. */
  interrupt(): void {
    for (const own of this.sleeping) own.abort();
  }
}
