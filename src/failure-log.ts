import { isGatewayError, isTokenFailure } from './errors.js';

/**
 * Log fields for a failed upstream call. An expected failure (a `GatewayError`: the network, an
 * error status, a refused token) is one line: its stable `code`, the `cause` (a socket code such
 * as `ECONNREFUSED`, `DEADLINE`, or the HTTP status) and the message, without a stack, since a
 * stack says nothing about a service that is down. Anything else is a bug: it keeps the whole
 * error (`err`, with its stack) so it can be found.
 */
export function failureFields(err: unknown): Record<string, unknown> {
  if (!isGatewayError(err)) return { err };
  const cause = err.details.cause ?? err.details.status;
  return {
    code: err.code,
    ...(cause !== undefined ? { cause } : {}),
    ...(isTokenFailure(err) ? { stage: 'token' } : {}),
    reason: err.message,
  };
}
