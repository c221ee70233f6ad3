import { describe, expect, it } from 'vitest';
import { ProbeSnapshot } from '../../src/health/probe-snapshot.js';
import type { GatewayStatus } from '../../src/health/status.js';

/** A snapshot over a fake clock and a status that counts its gathers. */
function setup() {
  let now = 1_000_000;
  let key = 'running';
  let gathered = 0;
  const snapshot = new ProbeSnapshot({
    gather: () => {
      gathered++;
      return { state: 'ok', phase: key } as unknown as GatewayStatus;
    },
    render: (s) => {
      const body = JSON.stringify({ phase: s.phase, n: gathered });
      const a = { code: 200, body };
      return { healthzState: a, healthzDetail: a, readyz: a, leader: a };
    },
    changeKey: () => key,
    now: () => now,
  });
  return {
    snapshot,
    gathers: () => gathered,
    advance: (ms: number) => (now += ms),
    setKey: (k: string) => (key = k),
  };
}

describe('ProbeSnapshot', () => {
  it('gathers once per second however often it is asked', () => {
    const t = setup();
    for (let i = 0; i < 1000; i++) {
      t.snapshot.answers();
      t.advance(2);
    }
    // 2 s of asking: the first gather, one at 1 s, one at 2 s.
    expect(t.gathers()).toBe(2);
    t.snapshot.answers();
    expect(t.gathers()).toBe(3);
  });

  it('gathers anew on a change of the key, but not more often than every 100 ms', () => {
    const t = setup();
    t.snapshot.answers();
    t.setKey('stopping');
    t.advance(50);
    expect(JSON.parse(t.snapshot.answers().readyz.body)).toEqual({ phase: 'running', n: 1 });
    t.advance(50);
    expect(JSON.parse(t.snapshot.answers().readyz.body)).toEqual({ phase: 'stopping', n: 2 });
    t.advance(500);
    t.snapshot.answers();
    expect(t.gathers()).toBe(2);
  });

  it('takes an offered status without gathering, and gathers when the clock went back', () => {
    const t = setup();
    t.snapshot.offer({ state: 'ok', phase: 'offered' } as unknown as GatewayStatus);
    expect(JSON.parse(t.snapshot.answers().healthzState.body)).toMatchObject({ phase: 'offered' });
    expect(t.gathers()).toBe(0);
    t.advance(-5000);
    t.snapshot.answers();
    expect(t.gathers()).toBe(1);
  });
});
