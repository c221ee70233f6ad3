import { TOKEN_VALIDITY_S, type TokenResponse } from '@scan-gateway/contract';
import type { Clock } from '../clock.js';

/** An access token and the instant (ms since epoch, on the cache's clock) at which it expires. */
export interface AccessToken {
  value: string;
  expiresAtMs: number;
}

/**
 * The token answer read tolerantly (contract §5 does not show the field names): the RFC 6749 §5.1
 * names `access_token`, `expires_in`, `token_type`, or the common camel-case spelling
 * `accessToken`, `expiresIn`, `tokenType` (the snake-case member wins when both are present).
 * `expires_in` may be a number or a string of digits. A `token_type` other than `Bearer`
 * (case-insensitive) is refused: the token would be sent in a way the service does not expect.
 *
 * @returns the answer in RFC 6749 form, or `{ problem }` naming what is missing or wrong. The
 *   problem text never contains the token.
 */
export function readTokenAnswer(json: unknown): TokenResponse | { problem: string } {
  if (json === null || typeof json !== 'object' || Array.isArray(json))
    return { problem: 'the answer is not a JSON object' };
  const o = json as Record<string, unknown>;
  const pick = (snake: string, camel: string) => (o[snake] !== undefined ? o[snake] : o[camel]);
  const token = pick('access_token', 'accessToken');
  if (typeof token !== 'string' || token === '') {
    const seen = Object.keys(o).slice(0, 10).join(', ') || 'none';
    return {
      problem: `no access_token (or accessToken) string in the answer; its members: ${seen}`,
    };
  }
  const type = pick('token_type', 'tokenType');
  if (type !== undefined && (typeof type !== 'string' || type.toLowerCase() !== 'bearer')) {
    return { problem: `token_type is ${JSON.stringify(type)}, expected Bearer` };
  }
  const expires = pick('expires_in', 'expiresIn');
  const answer: TokenResponse = { access_token: token };
  if (typeof type === 'string') answer.token_type = type;
  if (typeof expires === 'number' || (typeof expires === 'string' && /^\d+$/.test(expires)))
    answer.expires_in = expires;
  return answer;
}

/** Renew this long before expiry at most (60 s), and never later than 90 % into the lifetime. */
const MAX_RENEW_MARGIN_MS = 60_000;

/**
 * The expiry of a token answer (contract §5): `expires_in` when given, else the JWT's `exp` claim,
 * else {@link TOKEN_VALIDITY_S}. `nowMs` is the instant the answer arrived.
 */
export function tokenExpiry(response: TokenResponse, nowMs: number): number {
  if (response.expires_in !== undefined) {
    const seconds = Number(response.expires_in);
    if (Number.isFinite(seconds) && seconds > 0) return nowMs + seconds * 1000;
  }
  const exp = jwtExpiry(response.access_token);
  if (exp !== undefined) return exp;
  return nowMs + TOKEN_VALIDITY_S * 1000;
}

/** The `exp` claim of a JWT in ms since epoch, read without verifying (we only schedule renewal). */
export function jwtExpiry(token: string): number | undefined {
  const parts = token.split('.');
  if (parts.length !== 3 || parts[1] === undefined) return undefined;
  try {
    const payload = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8')) as {
      exp?: unknown;
    };
    return typeof payload.exp === 'number' && Number.isFinite(payload.exp)
      ? payload.exp * 1000
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * One cached access token shared by every caller. A refresh is single-flight: callers arriving
 * while a token request runs wait for that request instead of starting another. A token is renewed
 * shortly before it expires, and dropped when the service refused it (`invalidate`).
 */
export class TokenCache {
  private current: (AccessToken & { issuedAtMs: number }) | undefined;
  private inflight: Promise<string> | undefined;
  private fetched = 0;

  constructor(
    private readonly fetchToken: () => Promise<AccessToken>,
    private readonly now: Clock,
  ) {}

  /** A valid token, from the cache or freshly requested. Rejects with the token request's error. */
  get(): Promise<string> {
    const token = this.current;
    if (token && this.now() < renewAt(token)) return Promise.resolve(token.value);
    this.inflight ??= this.refresh().finally(() => {
      this.inflight = undefined;
    });
    return this.inflight;
  }

  /** Forget `value` if it is still the cached token (a 401 answered it); a newer token is kept. */
  invalidate(value: string): void {
    if (this.current?.value === value) this.current = undefined;
  }

  /**
   * Puts `token`, obtained at `issuedAtMs` (ms since epoch), in place of the cached one: a reload
   * proved new credentials with it, so the next call uses it rather than the old credentials' token.
   */
  replace(token: AccessToken, issuedAtMs: number): void {
    this.current = { ...token, issuedAtMs };
    this.fetched += 1;
  }

  /** When the cached token expires, and how many tokens were obtained so far. */
  info(): { expiresAt?: Date; refreshes: number } {
    return this.current
      ? { expiresAt: new Date(this.current.expiresAtMs), refreshes: this.fetched }
      : { refreshes: this.fetched };
  }

  private async refresh(): Promise<string> {
    const issuedAtMs = this.now();
    const token = await this.fetchToken();
    this.current = { ...token, issuedAtMs };
    this.fetched += 1;
    return token.value;
  }
}

function renewAt(token: AccessToken & { issuedAtMs: number }): number {
  const lifetime = Math.max(0, token.expiresAtMs - token.issuedAtMs);
  return token.expiresAtMs - Math.min(MAX_RENEW_MARGIN_MS, lifetime * 0.1);
}
