import { ErrorCodes, httpStatusOf, isGatewayError, isNotSent } from '../errors.js';

/**
 * Exponential backoff with full jitter: a delay drawn uniformly from [0, min(cap, base·2^attempt)],
 * so that many gateways recovering at once do not retry in step. When the service said
 * `Retry-After`, the delay is at least that.
 *
 * @param attempt 0 for the first retry.
 * @returns delay in ms.
 */
export function backoffDelay(
  attempt: number,
  opts: { baseMs: number; maxMs: number; retryAfterMs?: number; random?: () => number },
): number {
  const ceiling = Math.min(opts.maxMs, opts.baseMs * 2 ** Math.min(attempt, 30));
  const jittered = Math.floor((opts.random ?? Math.random)() * ceiling);
  return Math.max(jittered, opts.retryAfterMs ?? 0);
}

/** What the delivery does with a failed upstream call. */
export type FailureAction =
  | { action: 'retry'; retryAfterMs?: number; answerLost: boolean }
  | { action: 'split' }
  | { action: 'newAddress' }
  | { action: 'hold' };

/**
 * Tells retryable failures from permanent ones (design: retries). 408, 429, 5xx and network errors
 * are retried without limit, as is anything that never left (`isNotSent`: a token failure of any kind)
 * and a redirect; 413 (or a body over the limit) splits the batch; a refused pre-signed
 * address asks for a new one; an auth failure is retried (credentials get fixed without losing
 * data); any other 4xx holds the batch with the answer stored.
 */
export function classifyFailure(err: unknown): FailureAction {
  if (!isGatewayError(err)) return { action: 'retry', answerLost: true };
  const status = httpStatusOf(err);
  const retryAfterMs =
    typeof err.details.retryAfterMs === 'number' ? err.details.retryAfterMs : undefined;
  // Checked before the code: a call that never left (no token could be had, the connection was
  // refused) is retried whatever the failure looked like. A token endpoint answering 200 with an
  // unreadable body, or 404, says nothing about the upload, which was not sent.
  if (isNotSent(err))
    return {
      action: 'retry',
      answerLost: false,
      ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    };
  switch (err.code) {
    case ErrorCodes.BODY_TOO_LARGE:
      return { action: 'split' };
    case ErrorCodes.PRESIGNED_REFUSED:
      return { action: 'newAddress' };
    case ErrorCodes.UPSTREAM_NETWORK:
      // A refused or unresolvable connection (or no token to send with) carried nothing.
      return {
        action: 'retry',
        answerLost: !isNotSent(err),
        ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
      };
    case ErrorCodes.UPSTREAM_AUTH:
      return { action: 'retry', answerLost: false };
    case ErrorCodes.UPSTREAM_RESPONSE:
    case ErrorCodes.UPSTREAM_ANSWER_TOO_LARGE:
      return { action: 'retry', answerLost: true };
    case ErrorCodes.UPSTREAM_REDIRECT:
      // Answered, not processed: retried (a corrected address takes effect after a reload).
      return { action: 'retry', answerLost: false };
    case ErrorCodes.UPSTREAM_HTTP:
      if (status === 413) return { action: 'split' };
      if (status === undefined || status === 408 || status === 429 || status >= 500) {
        return {
          action: 'retry',
          answerLost: false,
          ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
        };
      }
      return { action: 'hold' };
    default:
      return { action: 'retry', answerLost: true };
  }
}
