import { describe, expect, it } from 'vitest';
import { batchView } from '../../src/queries/reports.js';

describe('batchView (a batch as /api/v1/status shows it)', () => {
  it('shows instants as ISO 8601 and never the pre-signed address, which is a write credential until it expires', () => {
    const view = batchView({
      id: 7,
      state: 'presigned',
      presignedUrl: 'https://bucket.example/obj?X-Amz-Signature=abc123',
      presignedExpiresAt: Date.UTC(2026, 10, 24, 12, 0, 0),
      putStartedAt: null,
      nextAttemptAt: 0,
    });
    expect(view).not.toHaveProperty('presignedUrl');
    expect(JSON.stringify(view)).not.toContain('X-Amz-Signature');
    expect(view).toEqual({
      id: 7,
      state: 'presigned',
      presignedExpiresAt: '2026-11-24T12:00:00.000Z',
      putStartedAt: null,
      nextAttemptAt: null,
    });
  });
});
