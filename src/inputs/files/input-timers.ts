/**
 * The timers of one files input, shared by its three parts (folder watch, queue, take of a file),
 * so that one `stop()` ends them all: pending retries are cancelled and every sleep wakes at once
 * (answering false), which is what lets `FilesInput.stop()` finish a chunk in flight and return
 * without waiting out a backoff.
 */
export class InputTimers {
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly sleepers = new Set<() => void>();
  private stoppingNow = false;

  /**
   * @param retryBaseMs first retry delay, in ms (doubles with each attempt).
   * @param retryMaxMs longest retry delay, in ms.
   */
  constructor(
    private readonly retryBaseMs: number,
    private readonly retryMaxMs: number,
  ) {}

  /** True from `stop()` until the next `start()`: no new work, no new timers. */
  get stopping(): boolean {
    return this.stoppingNow;
  }

  /** Allows timers again (the input starts, or starts again after a stop). */
  start(): void {
    this.stoppingNow = false;
  }

  /** Cancels every pending `after` and wakes every `sleep` (they answer false). */
  stop(): void {
    this.stoppingNow = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    for (const wake of this.sleepers) wake();
  }

  /** Delay before retry number `attempt` (0-based), in ms: `retryBaseMs` doubling, capped at `retryMaxMs`. */
  backoff(attempt: number): number {
    return Math.min(this.retryMaxMs, this.retryBaseMs * 2 ** Math.min(attempt, 30));
  }

  /** Runs `fn` after `delayMs` ms unless the input stops first. */
  after(delayMs: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.stoppingNow) fn();
    }, delayMs);
    this.timers.add(timer);
  }

  /** Resolves true after `ms` ms, or false at once when the input stops. */
  sleep(ms: number): Promise<boolean> {
    if (this.stoppingNow) return Promise.resolve(false);
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.sleepers.delete(wake);
        resolve(false);
      };
      const timer = setTimeout(() => {
        this.sleepers.delete(wake);
        resolve(true);
      }, ms);
      this.sleepers.add(wake);
    });
  }
}
