import { describe, expect, it } from 'vitest';
import { Circuit } from '../../src/delivery/circuit.js';

describe('the upload circuit', () => {
  it('says when an outage began, not when its latest retry failed, and forgets it after a success', () => {
    let now = Date.parse('2026-11-28T08:00:00Z');
    const circuit = new Circuit({
      config: { retryBaseMs: 1000, retryMaxMs: 60_000 },
      now: () => now,
    });
    circuit.failed();
    for (let i = 0; i < 5; i++) {
      now += 50_000;
      circuit.failed();
    }
    expect(circuit.snapshot()).toMatchObject({
      consecutiveFailures: 6,
      failingSince: '2026-11-28T08:00:00.000Z',
    });
    circuit.succeeded();
    expect(circuit.snapshot().failingSince).toBeUndefined();
    now += 1000;
    circuit.failed();
    expect(circuit.snapshot().failingSince).toBe(new Date(now).toISOString());
  });
});
