import type { Dispatcher } from 'undici';
import { oauthErrorSchema } from '@scan-gateway/contract';
import { ErrorCodes, GatewayError, isGatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../clock.js';
import { NOT_JSON, safeJson } from './answer-body.js';
import type { Credentials } from './client-options.js';
import { exchange, type Answer, type Bounds } from './exchange.js';
import { httpError, parseRetryAfter } from './http-errors.js';
import { readTokenAnswer, tokenExpiry, type AccessToken } from './token-cache.js';

/** Where and within what bounds {@link fetchToken} asks for a token (the client's settings now). */
export interface TokenEndpoint {
  /** `{authUrl}/oauth2/token`. */
  tokenUrl: string;
  /** The configured `authUrl`, named in errors. */
  authUrl: string;
  /** The bounds of a request sending this body. */
  bounds: (body: string) => Bounds;
  /** The connect, headers and body inactivity timeouts, in ms. */
  timeoutMs: number;
  now: Clock;
  log: Logger;
}

/**
 * POST {authUrl}/oauth2/token (§5). Every failure here is a failure to get a token; `bearer()`
 * marks it `notSent` for the caller. A 2xx answer that holds no usable token is
 * `UPSTREAM_TOKEN` (never `UPSTREAM_RESPONSE`, which delivery reads as "upload accepted").
 */
export async function fetchToken(
  credentials: Credentials,
  dispatcher: Dispatcher,
  at: TokenEndpoint,
): Promise<AccessToken> {
  const form = new URLSearchParams({
    client_id: credentials.clientId,
    client_secret: credentials.clientSecret,
    grant_type: 'client_credentials',
  }).toString();
  const headers = {
    'content-type': 'application/x-www-form-urlencoded',
    accept: 'application/json',
  };
  let answer: Answer;
  try {
    answer = await exchange(
      'POST',
      at.tokenUrl,
      headers,
      form,
      'POST /oauth2/token',
      at.bounds(form),
      dispatcher,
      at.timeoutMs,
    );
  } catch (err) {
    if (isGatewayError(err, ErrorCodes.UPSTREAM_ANSWER_TOO_LARGE)) {
      throw new GatewayError(ErrorCodes.UPSTREAM_TOKEN, `token request: ${err.message}`, {
        cause: err,
        retryable: true,
        details: { ...err.details },
      });
    }
    throw err;
  }
  if (answer.status === 400 || answer.status === 401 || answer.status === 403) {
    const oauth = oauthErrorSchema.safeParse(safeJson(answer.text));
    const reason = oauth.success ? oauth.data.error : undefined;
    throw new GatewayError(
      ErrorCodes.UPSTREAM_AUTH,
      `token request for client ${credentials.clientId} refused with HTTP ${answer.status}${reason ? ` (${reason})` : ''}`,
      { details: { status: answer.status, ...(reason ? { error: reason } : {}) } },
    );
  }
  if (answer.status < 200 || answer.status >= 300) {
    throw httpError(
      'POST',
      '/oauth2/token',
      answer.status,
      answer.text,
      parseRetryAfter(answer.headers['retry-after'], at.now()),
    );
  }
  // Read without echoing the body anywhere: it holds the token.
  const json = safeJson(answer.text);
  const token = json === NOT_JSON ? { problem: 'the answer is not JSON' } : readTokenAnswer(json);
  if ('problem' in token) {
    throw new GatewayError(
      ErrorCodes.UPSTREAM_TOKEN,
      `token response from ${at.authUrl} cannot be used: ${token.problem}`,
      {
        retryable: true,
        details: { status: answer.status, contentType: answer.headers['content-type'] },
      },
    );
  }
  const expiresAtMs = tokenExpiry(token, at.now());
  at.log.info(
    { clientId: credentials.clientId, expiresAt: new Date(expiresAtMs).toISOString() },
    'obtained access token',
  );
  return { value: token.access_token, expiresAtMs };
}
