import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { loadUndici } from '../http-client.js';
import type { z } from 'zod';
import { describeIssues } from '@scan-gateway/contract';
import { ErrorCodes, GatewayError } from '../errors.js';
import { discard, NOT_JSON, readCapped, safeJson } from './answer-body.js';
import { deadlineError, networkError, redirectError } from './http-errors.js';

/** An answer of the service as read: status, headers and the body as text (capped). */
export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/** What one exchange may take: its deadline and the most answer bytes read. */
export interface Bounds {
  deadlineMs: number;
  maxBytes: number;
}

/**
 * One HTTP exchange within `bounds`: the whole of it (connect, headers, every byte of the
 * answer) under one deadline (`AbortSignal.timeout`), the answer read up to `bounds.maxBytes`.
 * Redirects are never followed (undici's `request` does not, and no redirect interceptor is
 * installed): a 3xx is `UPSTREAM_REDIRECT`, so a token never goes to another address.
 *
 * @throws GatewayError `UPSTREAM_NETWORK` (transport failure, `details.cause: 'DEADLINE'` when the
 *   deadline passed), `UPSTREAM_REDIRECT` (3xx), `UPSTREAM_ANSWER_TOO_LARGE` (a 2xx answer over the
 *   cap). An error answer (4xx/5xx) over the cap is cut at the cap and returned.
 */
export async function exchange(
  method: string,
  url: string,
  headers: Record<string, string>,
  body: string | Buffer | Readable | undefined,
  label: string,
  bounds: Bounds,
  dispatcher: Dispatcher,
  /** The connect, headers and body inactivity timeouts, in ms. */
  timeoutMs: number,
): Promise<Answer> {
  const target = label.replace(/^\S+ /, '');
  const signal = AbortSignal.timeout(bounds.deadlineMs);
  let res: Dispatcher.ResponseData;
  try {
    const { request } = await loadUndici();
    res = await request(url, {
      method: method as Dispatcher.HttpMethod,
      headers,
      ...(body !== undefined ? { body } : {}),
      dispatcher,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal,
    });
  } catch (err) {
    throw signal.aborted
      ? deadlineError(method, target, bounds.deadlineMs, err)
      : networkError(method, target, err);
  }
  const status = res.statusCode;
  if (status >= 300 && status < 400) {
    discard(res.body);
    throw redirectError(method, target, status, res.headers.location);
  }
  let read: { text: string; truncated: boolean };
  try {
    read = await readCapped(res.body, bounds.maxBytes, res.headers['content-length']);
  } catch (err) {
    throw signal.aborted
      ? deadlineError(method, target, bounds.deadlineMs, err)
      : networkError(method, target, err);
  }
  if (read.truncated && status >= 200 && status < 300) {
    throw new GatewayError(
      ErrorCodes.UPSTREAM_ANSWER_TOO_LARGE,
      `${method} ${target} answered HTTP ${status} with more than ${bounds.maxBytes} bytes; stopped reading`,
      { details: { status, method, path: target, limit: bounds.maxBytes } },
    );
  }
  return { status, headers: res.headers, text: read.text };
}

/**
 * The answer's body read as JSON and checked against `schema`.
 *
 * @throws GatewayError `UPSTREAM_RESPONSE` when it is not JSON or not of the schema's shape.
 */
export function parseAnswer<T>(schema: z.ZodType<T>, answer: Answer, operation: string): T {
  const json = safeJson(answer.text);
  if (json === NOT_JSON) {
    throw new GatewayError(
      ErrorCodes.UPSTREAM_RESPONSE,
      `${operation}: response body is not JSON`,
      {
        details: {
          status: answer.status,
          contentType: answer.headers['content-type'],
          body: answer.text.slice(0, 2048),
        },
      },
    );
  }
  const result = schema.safeParse(json);
  if (!result.success) {
    throw new GatewayError(
      ErrorCodes.UPSTREAM_RESPONSE,
      `${operation}: unexpected response: ${describeIssues(result.error, 'response')}`,
      {
        details: {
          status: answer.status,
          fields: result.error.issues.map((i) => i.path.join('.')),
        },
      },
    );
  }
  return result.data;
}
