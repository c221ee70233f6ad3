import type { Clock } from '../clock.js';

/**
 * How long a replaced token is still accepted when no caller has used the new one yet, in ms
 * (15 minutes): long enough to update the callers (an MES, a browser) after a reload, short enough
 * that a token rotated away because it leaked stops working soon (docs/operations.md, "Rotating a
 * secret").
 */
export const TOKEN_OVERLAP_MS = 15 * 60_000;

/** What a route's guard asks of a token: is one configured, and does a given check accept it. */
export interface TokenGuard {
  /** Whether a token is configured (without one, the route is open or off, as the route says). */
  configured(): boolean;
  /**
   * Whether `check` accepts the current token, or the replaced one while it is still kept. Both
   * are checked every time (the same work whichever matches); a match of the current token ends
   * the overlap at once: the new one is proven, the old one is dropped.
   */
  accepts(check: (token: string) => boolean): boolean;
}

/**
 * A bearer token that a reload may replace (the admin, read and ingest tokens). The replaced token
 * stays accepted until a caller proves the new one, or at most {@link TOKEN_OVERLAP_MS}, so callers
 * switched after the gateway are not refused in between. Removing the token drops both at once.
 */
export class RotatingToken implements TokenGuard {
  private previous: { value: string; until: number } | undefined;

  constructor(
    private current: string | undefined,
    private readonly now: Clock = Date.now,
    private readonly overlapMs = TOKEN_OVERLAP_MS,
  ) {}

  configured(): boolean {
    return this.current !== undefined && this.current !== '';
  }

  /** The token in force (never logged). */
  value(): string | undefined {
    return this.current;
  }

  accepts(check: (token: string) => boolean): boolean {
    const current = this.current !== undefined && this.current !== '' && check(this.current);
    const old = this.previous;
    const kept = old !== undefined && this.now() < old.until;
    const previous = kept && check(old.value);
    if (current || !kept) this.previous = undefined;
    return current || previous;
  }

  /**
   * Puts `next` in force. Answers whether it differs from the token in force. The token it
   * replaces is kept for the overlap; `undefined` (the token removed) keeps nothing.
   */
  replace(next: string | undefined): boolean {
    if (next === this.current) return false;
    this.previous =
      next !== undefined && this.current !== undefined && this.current !== ''
        ? { value: this.current, until: this.now() + this.overlapMs }
        : undefined;
    this.current = next;
    return true;
  }
}

/** A guard for a fixed token or none (tests and the commands pass plain strings). */
export function tokenGuard(token: string | TokenGuard | undefined): TokenGuard {
  return typeof token === 'object' ? token : new RotatingToken(token);
}
