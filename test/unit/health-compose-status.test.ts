import { describe, expect, it } from 'vitest';
import { composeStatus, type StatusParts } from '../../src/health/compose-status.js';
import { HEALTH_THRESHOLDS } from '../../src/health/derive.js';

const NOW = Date.parse('2026-03-02T10:00:00Z');

function parts(overrides: Partial<StatusParts['buffer']> = {}): StatusParts {
  return {
    nowMs: NOW,
    phase: 'running',
    version: '1.2.3',
    site: { id: 'plant-7', timezone: 'Europe/Berlin' },
    startedAtMs: NOW - 90_000,
    config: { file: '/etc/scan-gateway/config.yaml', loadedAt: '2026-03-02T09:58:30.000Z' },
    inputs: [{ id: 'line-1', type: 'tcp', state: 'up' }],
    buffer: {
      path: '/var/lib/scan-gateway/buffer.db',
      totals: { pendingScans: 2, pendingBytes: 200, undeliveredScans: 5, undeliveredBytes: 500 },
      scans: { pending: 2, batched: 3, held: 1, failed: 4 },
      oldestUndeliveredCreatedAt: NOW - 61_000,
      lastUploadAt: '2026-03-02T09:59:00.000Z',
      fileBytes: 4096,
      batches: [],
      problems: [
        {
          kind: 'rejected',
          inputId: 'line-1',
          reason: 'no rule matches',
          raw: Buffer.from([0x41, 0x1d, 0x42, 0x0d]),
          at: '2026-03-02T09:59:30.000Z',
        },
      ],
      ...overrides,
    },
    recent: {
      reads: 10,
      rejections: 1,
      rejectionsByInput: [{ inputId: 'line-1', count: 1 }],
      failedScans: 0,
      filesRefused: [],
      filesRefusedCount: 0,
    },
    stuckBatches: [],
    delivery: {
      mode: 'direct',
      token: { expiresAt: new Date('2026-03-02T11:00:00Z'), refreshes: 2 },
    },
    sessions: [],
    admin: { enabled: false, actions: [] },
  };
}

describe('composeStatus', () => {
  it('is pure: the same snapshots give the same status, ages and uptime from the snapshot instant', () => {
    const a = composeStatus(parts());
    expect(composeStatus(parts())).toEqual(a);
    expect(a).toMatchObject({
      generatedAt: '2026-03-02T10:00:00.000Z',
      startedAt: '2026-03-02T09:58:30.000Z',
      uptimeSec: 90,
      recent: {
        windowMs: HEALTH_THRESHOLDS.windowMs,
        reads: 10,
        rejections: 1,
        filesRefused: 0,
        failedScans: 0,
      },
      buffer: {
        pendingScans: 2,
        undeliveredScans: 5,
        heldScans: 1,
        oldestPendingAgeMs: 61_000,
        fileBytes: 4096,
      },
      delivery: {
        mode: 'direct',
        lastSuccessAt: '2026-03-02T09:59:00.000Z',
        token: { expiresAt: '2026-03-02T11:00:00.000Z', refreshes: 2 },
      },
      problems: [{ raw: 'A<GS>B<CR>' }],
    });
    expect(a.buffer).not.toHaveProperty('quotaScans');
  });

  it('takes the state and reasons from the health rules: a failed commit makes it down', () => {
    const s = composeStatus(
      parts({ commitError: { message: 'SQLITE_IOERR', at: '2026-03-02T09:59:59.000Z' } }),
    );
    expect(s.state).toBe('down');
    expect(s.reasons.length).toBeGreaterThan(0);
    expect(s.reasons).toEqual(
      s.healthProblems!.filter((p) => p.severity !== 'info').map((p) => p.sentence),
    );
    expect(s.buffer.lastCommitError).toEqual({
      message: 'SQLITE_IOERR',
      at: '2026-03-02T09:59:59.000Z',
    });
  });
});
