import type { Readable } from 'node:stream';
import { ErrorCodes, GatewayError, isGatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../clock.js';
import type { Answer, Bounds } from './exchange.js';
import { httpError, parseRetryAfter } from './http-errors.js';
import type { TokenCache } from './token-cache.js';

const JSON_ACCEPT = 'application/json, text/json;q=0.9, text/plain;q=0.8';

/** What {@link authorizedCall} needs of the client: its address, tokens, bounds and exchange. */
export interface CallContext {
  /** The service's base address, without a trailing slash. */
  base: string;
  tokens: TokenCache;
  /** The bounds of a request sending `body`, its answer capped at `maxBytes`. */
  bounds: (body: string | Buffer | undefined, maxBytes: number) => Bounds;
  /** One exchange on the client's dispatcher (exchange.ts). */
  exchange: (
    method: string,
    url: string,
    headers: Record<string, string>,
    body: string | Buffer | Readable | undefined,
    label: string,
    bounds: Bounds,
  ) => Promise<Answer>;
  now: Clock;
  log: Logger;
}

/**
 * A token for a call that has not been sent yet: a failure to get one (the auth server down,
 * the secret refused) is marked `notSent`, since the call itself never left.
 */
export async function bearer(tokens: TokenCache): Promise<string> {
  try {
    return await tokens.get();
  } catch (err) {
    if (isGatewayError(err)) {
      err.details.notSent = true;
      err.details.stage = 'token';
      throw err;
    }
    // Not one of ours (a bug): still, nothing was sent.
    throw new GatewayError(
      ErrorCodes.UPSTREAM_TOKEN,
      `token request failed: ${(err as Error).message}`,
      {
        cause: err,
        retryable: true,
        details: { notSent: true, stage: 'token' },
      },
    );
  }
}

/** An authorized call: bearer token, one token refresh on 401, non-2xx → error. */
export async function authorizedCall(
  at: CallContext,
  method: string,
  path: string,
  body: string | Buffer | undefined,
  /** Statuses besides 2xx answered rather than thrown. */
  allowed: number[],
  /** Most answer bytes read. */
  maxBytes: number,
): Promise<Answer> {
  const headers: Record<string, string> = { accept: JSON_ACCEPT };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const started = at.now();
  const token = await bearer(at.tokens);
  const bounds = at.bounds(body, maxBytes);
  let answer = await at.exchange(
    method,
    at.base + path,
    { ...headers, authorization: `Bearer ${token}` },
    body,
    `${method} ${path}`,
    bounds,
  );
  if (answer.status === 401) {
    at.log.info({ path }, 'access token refused, requesting a new one');
    at.tokens.invalidate(token);
    const fresh = await bearer(at.tokens);
    answer = await at.exchange(
      method,
      at.base + path,
      { ...headers, authorization: `Bearer ${fresh}` },
      body,
      `${method} ${path}`,
      bounds,
    );
    if (answer.status === 401) {
      throw new GatewayError(
        ErrorCodes.UPSTREAM_AUTH,
        `${method} ${path} answered 401 with a freshly obtained token`,
        {
          details: { status: 401, method, path },
        },
      );
    }
  }
  at.log.debug(
    { method, path, status: answer.status, ms: at.now() - started },
    'upstream answered',
  );
  if ((answer.status >= 200 && answer.status < 300) || allowed.includes(answer.status))
    return answer;
  throw httpError(
    method,
    path,
    answer.status,
    answer.text,
    parseRetryAfter(answer.headers['retry-after'], at.now()),
  );
}
