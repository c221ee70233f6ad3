import { describe, expect, it } from 'vitest';
import { backoffDelay, classifyFailure } from '../../src/delivery/retry.js';
import { ErrorCodes, GatewayError } from '../../src/errors.js';
import { httpError, networkError, parseRetryAfter } from '../../src/upstream/http-errors.js';

const opts = { baseMs: 500, maxMs: 60_000 };

describe('backoff with full jitter', () => {
  it('draws from [0, base·2^attempt): the random number scales the ceiling', () => {
    expect(backoffDelay(0, { ...opts, random: () => 0 })).toBe(0);
    expect(backoffDelay(0, { ...opts, random: () => 0.5 })).toBe(250);
    expect(backoffDelay(0, { ...opts, random: () => 0.999999 })).toBe(499);
    expect(backoffDelay(3, { ...opts, random: () => 0.5 })).toBe(2000);
    expect(backoffDelay(3, { ...opts, random: () => 0.999999 })).toBe(3999);
  });

  it('doubles the ceiling per attempt up to the cap, and never overflows', () => {
    const ceiling = (attempt: number) =>
      backoffDelay(attempt, { ...opts, random: () => 0.999999 }) + 1;
    expect([0, 1, 2, 3, 4, 5, 6, 7].map(ceiling)).toEqual([
      500, 1000, 2000, 4000, 8000, 16_000, 32_000, 60_000,
    ]);
    expect(ceiling(1000)).toBe(60_000);
    expect(
      Number.isFinite(backoffDelay(Number.MAX_SAFE_INTEGER, { ...opts, random: () => 0.5 })),
    ).toBe(true);
  });

  it('spreads the delays of many clients over the whole interval (jitter)', () => {
    let seed = 42;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const delays = Array.from({ length: 1000 }, () => backoffDelay(4, { ...opts, random }));
    expect(Math.min(...delays)).toBeLessThan(800);
    expect(Math.max(...delays)).toBeGreaterThan(7200);
    expect(delays.every((d) => d >= 0 && d < 8000)).toBe(true);
  });

  it('waits at least what Retry-After asked for, even when the jitter drew less', () => {
    expect(backoffDelay(0, { ...opts, random: () => 0, retryAfterMs: 3000 })).toBe(3000);
    expect(backoffDelay(10, { ...opts, random: () => 0.999999, retryAfterMs: 3000 })).toBe(59_999);
    expect(backoffDelay(0, { ...opts, random: () => 0.5, retryAfterMs: 0 })).toBe(250);
  });
});

describe('Retry-After', () => {
  const now = Date.parse('2026-11-18T07:00:00Z');
  it('reads delay-seconds and HTTP dates (RFC 9110 §10.2.3)', () => {
    expect(parseRetryAfter('2', now)).toBe(2000);
    expect(parseRetryAfter('0', now)).toBe(0);
    expect(parseRetryAfter('Wed, 18 Nov 2026 07:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('Wed, 18 Nov 2026 06:59:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
  });

  it('reaches the retry decision from a 429 or 503 answer', () => {
    expect(
      classifyFailure(httpError('POST', '/api/trace/v3/scans', 429, '', parseRetryAfter('7', now))),
    ).toEqual({ action: 'retry', answerLost: false, retryAfterMs: 7000 });
    expect(
      classifyFailure(
        httpError('GET', '/x', 503, '', parseRetryAfter('Wed, 18 Nov 2026 07:00:30 GMT', now)),
      ),
    ).toEqual({
      action: 'retry',
      answerLost: false,
      retryAfterMs: 30_000,
    });
  });
});

describe('retryable and permanent failures told apart', () => {
  const http = (status: number) =>
    httpError('POST', '/api/trace/v3/scans', status, '{"title":"x"}', undefined);

  it.each([408, 429, 500, 502, 503, 504])(
    'HTTP %i is retried without limit; the answer was received',
    (status) => {
      expect(classifyFailure(http(status))).toEqual({ action: 'retry', answerLost: false });
    },
  );

  it.each([400, 403, 404, 409, 422])(
    'HTTP %i holds the batch with the answer (never dropped, never retried blindly)',
    (status) => {
      expect(classifyFailure(http(status))).toEqual({ action: 'hold' });
    },
  );

  it('HTTP 413 and a body over the limit split the batch', () => {
    expect(classifyFailure(http(413))).toEqual({ action: 'split' });
    expect(classifyFailure(new GatewayError(ErrorCodes.BODY_TOO_LARGE, 'too large'))).toEqual({
      action: 'split',
    });
  });

  it('a 401 that persisted after the client refreshed its token once is retried, not held', () => {
    expect(
      classifyFailure(
        new GatewayError(ErrorCodes.UPSTREAM_AUTH, 'answered 401 with a fresh token', {
          details: { status: 401 },
        }),
      ),
    ).toEqual({
      action: 'retry',
      answerLost: false,
    });
  });

  it('a refused pre-signed address asks for a new one', () => {
    expect(classifyFailure(new GatewayError(ErrorCodes.PRESIGNED_REFUSED, 'used'))).toEqual({
      action: 'newAddress',
    });
  });

  it('a network failure is retried and may have lost an answer the service sent (possible duplicate)', () => {
    const reset = Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' });
    expect(classifyFailure(networkError('POST', '/api/trace/v3/scans', reset))).toEqual({
      action: 'retry',
      answerLost: true,
    });
    expect(classifyFailure(new GatewayError(ErrorCodes.UPSTREAM_RESPONSE, 'not JSON'))).toEqual({
      action: 'retry',
      answerLost: true,
    });
    expect(classifyFailure(new Error('anything else'))).toEqual({
      action: 'retry',
      answerLost: true,
    });
  });

  it('retries anything marked notSent (a token failure of any kind), whatever its code or status, and never holds it', () => {
    const token = { notSent: true, stage: 'token' };
    expect(
      classifyFailure(
        new GatewayError(ErrorCodes.UPSTREAM_TOKEN, 'token response cannot be used', {
          details: { status: 200, ...token },
        }),
      ),
    ).toEqual({ action: 'retry', answerLost: false });
    expect(
      classifyFailure(
        new GatewayError(ErrorCodes.UPSTREAM_RESPONSE, 'unreadable', {
          details: { status: 200, ...token },
        }),
      ),
    ).toEqual({ action: 'retry', answerLost: false });
    const notFound = httpError('POST', '/oauth2/token', 404, '', undefined);
    Object.assign(notFound.details, token);
    expect(classifyFailure(notFound)).toEqual({ action: 'retry', answerLost: false });
  });

  it('retries a redirect without counting it, and treats an answer over the cap as unreadable', () => {
    expect(
      classifyFailure(
        new GatewayError(ErrorCodes.UPSTREAM_REDIRECT, '307', { details: { status: 307 } }),
      ),
    ).toEqual({ action: 'retry', answerLost: false });
    expect(
      classifyFailure(
        new GatewayError(ErrorCodes.UPSTREAM_ANSWER_TOO_LARGE, 'cap', { details: { status: 200 } }),
      ),
    ).toEqual({ action: 'retry', answerLost: true });
  });
});
