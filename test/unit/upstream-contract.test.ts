import { describe, expect, it } from 'vitest';
import {
  MAX_DIRECT_BODY_BYTES,
  PRESIGNED_VALIDITY_MS,
  SCAN_STATES,
  TERMINAL_STATES,
  TOKEN_VALIDITY_S,
  describeIssues,
  isTerminalState,
  normalizeScanStatus,
  problemDetailsSchema,
  scanBatchSchema,
  scanSchema,
  scanStatusWireSchema,
  typedPropertySchema,
} from '@scan-gateway/contract';
import {
  ERROR_BODY_LIMIT,
  httpError,
  isRetryableStatus,
  parseRetryAfter,
} from '../../src/upstream/http-errors.js';

const scan = {
  reference: 'R1',
  timeStamp: '2025-01-31T23:59:59',
  dcpKey: 'GI-01',
  productModelKey: 'PACK-A',
  parents: [],
  attributes: [{ key: 'k', value: '1' }],
};

describe('contract constants', () => {
  it('puts the direct limit just below 5.8 MiB', () => {
    const limit = 5.8 * 1024 * 1024;
    expect(MAX_DIRECT_BODY_BYTES).toBeLessThan(limit);
    expect(MAX_DIRECT_BODY_BYTES + 1).toBeGreaterThanOrEqual(limit);
    expect(MAX_DIRECT_BODY_BYTES).toBe(6_081_740);
  });

  it('has the validities and states of §3, §8', () => {
    expect(PRESIGNED_VALIDITY_MS).toBe(1_800_000);
    expect(TOKEN_VALIDITY_S).toBe(3600);
    expect([...SCAN_STATES]).toEqual([
      'Received',
      'InProgress',
      'Success',
      'Failed',
      'HasFailures',
      'NotFound',
    ]);
    expect([...TERMINAL_STATES]).toEqual(['Success', 'Failed', 'HasFailures']);
    expect(SCAN_STATES.filter(isTerminalState)).toEqual(['Success', 'Failed', 'HasFailures']);
  });
});

describe('Scan schema (§2.5)', () => {
  it('accepts a scan with and without the optional keys, and keeps none it does not know', () => {
    expect(scanSchema.parse(scan)).toEqual(scan);
    expect(scanSchema.parse({ ...scan, supplierKey: 'S', extra: 1 })).toEqual({
      ...scan,
      supplierKey: 'S',
    });
  });

  it('names the index and field of a bad element', () => {
    const result = scanBatchSchema.safeParse([
      scan,
      { ...scan, timeStamp: '2025-01-31 23:59:59' },
      { ...scan, attributes: [{ key: 'n', value: 5 }] },
    ]);
    expect(result.success).toBe(false);
    if (result.success) return;
    const text = describeIssues(result.error);
    expect(text).toContain('[1].timeStamp: must be yyyy-MM-ddTHH:mm:ss');
    expect(text).toContain('[2].attributes[0].value');
  });

  it('refuses time stamps with a zone or fraction', () => {
    for (const t of [
      '2025-01-31T23:59:59Z',
      '2025-01-31T23:59:59.5',
      '2025-13-01T00:00:00',
      '2025-01-31T24:00:00',
    ]) {
      expect(scanSchema.safeParse({ ...scan, timeStamp: t }).success, t).toBe(false);
    }
  });
});

describe('typed property (§2.4)', () => {
  it('discriminates on type and requires the members of each type', () => {
    expect(
      typedPropertySchema.safeParse({ type: 'uom', name: 'Mass', value: 3, uom: 'kg' }).success,
    ).toBe(true);
    expect(typedPropertySchema.safeParse({ type: 'uom', name: 'Mass', value: 3 }).success).toBe(
      false,
    );
    expect(typedPropertySchema.safeParse({ type: 'link', name: 'L', url: '?' }).success).toBe(true);
    expect(typedPropertySchema.safeParse({ type: 'colour', name: 'C', value: 'red' }).success).toBe(
      false,
    );
  });
});

describe('scan status (§2.8)', () => {
  it('turns the numeric requestId into a string and keeps the failures', () => {
    const wire = scanStatusWireSchema.parse({
      state: 'HasFailures',
      requestId: 1723456789012,
      description: 'd',
      processed: 2,
      failed: 1,
      failures: [{ reference: 'R1', reason: 'Invalid DCP' }],
    });
    expect(normalizeScanStatus(wire)).toEqual({
      state: 'HasFailures',
      requestId: '1723456789012',
      description: 'd',
      processed: 2,
      failed: 1,
      failures: [{ reference: 'R1', reason: 'Invalid DCP' }],
    });
    expect(
      normalizeScanStatus(
        scanStatusWireSchema.parse({
          state: 'Success',
          requestId: 7,
          description: '',
          processed: 1,
        }),
      ),
    ).toEqual({
      state: 'Success',
      requestId: '7',
      description: '',
      processed: 1,
    });
  });

  it('refuses a string requestId and an unknown state', () => {
    expect(
      scanStatusWireSchema.safeParse({
        state: 'Success',
        requestId: '7',
        description: '',
        processed: 1,
      }).success,
    ).toBe(false);
    expect(
      scanStatusWireSchema.safeParse({ state: 'Done', requestId: 7, description: '', processed: 1 })
        .success,
    ).toBe(false);
  });
});

describe('problem details and HTTP errors', () => {
  it('keeps extension members of problem details', () => {
    expect(problemDetailsSchema.parse({ title: 'Bad', status: 400, errors: { a: ['b'] } })).toEqual(
      { title: 'Bad', status: 400, errors: { a: ['b'] } },
    );
  });

  it('parses Retry-After as seconds or HTTP date', () => {
    const now = Date.parse('2025-01-01T00:00:00Z');
    expect(parseRetryAfter('7', now)).toBe(7000);
    expect(parseRetryAfter(['2'], now)).toBe(2000);
    expect(parseRetryAfter('Wed, 01 Jan 2025 00:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Tue, 31 Dec 2024 00:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
  });

  it('retries 408, 429 and 5xx only', () => {
    expect(
      [400, 401, 403, 404, 408, 409, 413, 429, 500, 502, 503].filter(isRetryableStatus),
    ).toEqual([408, 429, 500, 502, 503]);
  });

  it('truncates error bodies to 2 KiB and reads problem details', () => {
    const long = httpError('POST', '/x', 400, 'x'.repeat(5000), undefined);
    expect((long.details.body as string).length).toBe(ERROR_BODY_LIMIT);
    const problem = httpError(
      'POST',
      '/x',
      409,
      JSON.stringify({ title: 'Conflict', status: 409, detail: 'exists' }),
      1000,
    );
    expect(problem.details).toMatchObject({
      status: 409,
      retryAfterMs: 1000,
      problem: { title: 'Conflict' },
    });
    expect(problem.message).toContain('Conflict: exists');
  });
});
