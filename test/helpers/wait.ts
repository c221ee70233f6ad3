/** Default ceiling of {@link waitFor}, in ms: generous, to catch a hang only (the vitest test timeout is 60 s). */
export const WAIT_FOR_DEFAULT_MS = 30_000;

/** Options of {@link waitFor}. */
export interface WaitForOptions {
  /**
   * Give up after this long, in ms. Default 30 000: the ceiling only catches a hang. A loaded
   * machine may take seconds for what an idle one does in milliseconds, and a wait for a condition
   * costs nothing once the condition holds.
   */
  timeoutMs?: number;
  /** Pause between two checks, in ms. Default 25. */
  intervalMs?: number;
  /** What is being waited for, for the timeout message. */
  what?: string;
}

/**
 * Polls `predicate` until it returns a truthy value (returned) or the time is up. A predicate that
 * throws counts as "not yet"; its last error is quoted in the timeout message, so a failing test
 * says what it was waiting for and what it saw.
 *
 * @throws Error `waitFor timed out after N ms: <what>` when the time is up.
 */
export async function waitFor<T>(
  predicate: () => T | Promise<T>,
  options: WaitForOptions = {},
): Promise<NonNullable<T>> {
  const timeoutMs = options.timeoutMs ?? WAIT_FOR_DEFAULT_MS;
  const intervalMs = options.intervalMs ?? 25;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  let lastValue: unknown;
  for (;;) {
    try {
      const value = await predicate();
      if (value) return value as NonNullable<T>;
      lastValue = value;
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= deadline) break;
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
  const what = options.what ?? predicate.toString().replace(/\s+/g, ' ').slice(0, 200);
  const seen =
    lastError !== undefined
      ? `; last check threw: ${lastError instanceof Error ? lastError.message : String(lastError)}`
      : `; last value: ${String(lastValue)}`;
  throw new Error(`waitFor timed out after ${timeoutMs} ms: ${what}${seen}`);
}
