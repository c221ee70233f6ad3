/**
 * The current time in epoch milliseconds, like `Date.now`. Parts take one as an option instead of
 * reading the system clock themselves, so tests control time; convert with `new Date(now())` where
 * a Date is needed.
 */
export type Clock = () => number;

/** The system's clock. */
export const systemClock: Clock = () => Date.now();
