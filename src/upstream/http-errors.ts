import { ErrorCodes, GatewayError } from '../errors.js';
import { problemDetailsSchema, type ProblemDetails } from '@scan-gateway/contract';

/**
 * Turning HTTP outcomes into `GatewayError`s: one place decides what is retryable, how
 * `Retry-After` is read and how much of an error body is kept.
 */

/** Most bytes of an error body kept in `details.body` (2 KiB). */
export const ERROR_BODY_LIMIT = 2048;

/** Statuses after which the same request may succeed later (RFC 9110: 408, 429, 5xx). */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/**
 * `Retry-After` in ms (RFC 9110 §10.2.3): delay-seconds or an HTTP date, relative to `nowMs`.
 * A date in the past gives 0; anything unreadable gives undefined.
 */
export function parseRetryAfter(
  value: string | string[] | undefined,
  nowMs: number,
): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (raw === undefined) return undefined;
  const text = raw.trim();
  if (text === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}

/** Details of an `UPSTREAM_HTTP` error. `body` is at most {@link ERROR_BODY_LIMIT} characters. */
export interface HttpErrorDetails {
  status: number;
  method: string;
  path: string;
  retryAfterMs?: number;
  body?: string;
  problem?: ProblemDetails;
}

/** Problem details out of an error body, when it is JSON with at least one RFC 9457 member. */
export function readProblem(body: string): ProblemDetails | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  const result = problemDetailsSchema.safeParse(parsed);
  if (!result.success) return undefined;
  const p = result.data;
  const known = [p.type, p.title, p.status, p.detail, p.instance].some((v) => v !== undefined);
  return known ? p : undefined;
}

/**
 * An `UPSTREAM_HTTP` error for a non-2xx answer, retryable for 408/429/5xx. The message carries
 * the status and the problem's title/detail, never a header value.
 */
export function httpError(
  method: string,
  path: string,
  status: number,
  body: string,
  retryAfterMs: number | undefined,
): GatewayError {
  const details: HttpErrorDetails = { status, method, path };
  if (retryAfterMs !== undefined) details.retryAfterMs = retryAfterMs;
  if (body !== '')
    details.body = body.length > ERROR_BODY_LIMIT ? body.slice(0, ERROR_BODY_LIMIT) : body;
  const problem = body === '' ? undefined : readProblem(body);
  if (problem) details.problem = problem;
  const why = problem
    ? [problem.title, problem.detail].filter((s) => s !== undefined && s !== '').join(': ')
    : '';
  return new GatewayError(
    ErrorCodes.UPSTREAM_HTTP,
    `${method} ${path} answered HTTP ${status}${why ? ` (${why})` : ''}`,
    {
      retryable: isRetryableStatus(status),
      details: { ...details },
    },
  );
}

/** Error codes undici and Node give for TLS certificate problems. */
const TLS_CODES = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|ERR_SSL/;
/** Failures before a connection carried anything: no byte of the request can have arrived. */
const NOT_CONNECTED_CODES =
  /^(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|EADDRNOTAVAIL|UND_ERR_CONNECT_TIMEOUT)$/;

/**
 * An `UPSTREAM_NETWORK` error (retryable) for anything that kept an exchange from completing:
 * DNS, refused or reset connections, connect/headers/body timeouts, TLS failures.
 */
export function networkError(method: string, target: string, cause: unknown): GatewayError {
  const code = errorCode(cause);
  const message = cause instanceof Error ? cause.message : String(cause);
  return new GatewayError(
    ErrorCodes.UPSTREAM_NETWORK,
    `${method} ${target} failed: ${code ? `${code} ` : ''}${message}`,
    {
      cause,
      retryable: true,
      details: {
        method,
        path: target,
        ...(code ? { cause: code } : {}),
        ...(code && TLS_CODES.test(code) ? { tls: true } : {}),
        // Delivery counts a resend as a possible duplicate only when the request may have arrived.
        ...(code && (NOT_CONNECTED_CODES.test(code) || TLS_CODES.test(code))
          ? { notSent: true }
          : {}),
      },
    },
  );
}

/** The `code` of an error or of its cause (undici wraps socket errors). */
export function errorCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * An `UPSTREAM_NETWORK` error (retryable) for an exchange that did not complete within its
 * whole-exchange deadline (`details.cause: 'DEADLINE'`). The request may have arrived.
 */
export function deadlineError(
  method: string,
  target: string,
  deadlineMs: number,
  cause: unknown,
): GatewayError {
  return new GatewayError(
    ErrorCodes.UPSTREAM_NETWORK,
    `${method} ${target} got no complete answer within ${deadlineMs} ms (deadline)`,
    {
      cause,
      retryable: true,
      details: { method, path: target, cause: 'DEADLINE', deadlineMs },
    },
  );
}

/**
 * An `UPSTREAM_REDIRECT` error for a 3xx answer, which is never followed: the request carried the
 * client secret or a bearer token, and a redirect would hand it to the address the server names.
 * `details.location` keeps only the origin and path of the target (a query may hold a credential).
 * The request was answered, not processed: delivery retries it (a fixed `baseUrl` takes effect
 * after a reload) and does not count it as a possible duplicate.
 */
export function redirectError(
  method: string,
  target: string,
  status: number,
  location: string | string[] | undefined,
): GatewayError {
  const raw = Array.isArray(location) ? location[0] : location;
  let where: string | undefined;
  if (raw !== undefined) {
    try {
      const u = new URL(raw, 'http://relative.invalid');
      where = u.origin === 'http://relative.invalid' ? u.pathname : `${u.origin}${u.pathname}`;
    } catch {
      where = undefined;
    }
  }
  return new GatewayError(
    ErrorCodes.UPSTREAM_REDIRECT,
    `${method} ${target} answered HTTP ${status}, a redirect${where ? ` to ${where}` : ''}; redirects are not followed (the request carries credentials): set the configured address to the right one`,
    {
      retryable: true,
      details: { status, method, path: target, ...(where ? { location: where } : {}) },
    },
  );
}
