import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import type { StationRead } from '../../src/queries/station.js';
import { StationHub, type StationSource } from '../../src/health/station.js';
import type { GatewayStatus } from '../../src/health/status.js';
import { silentLogger } from '../../src/log.js';
import { waitFor } from '../helpers/wait.js';

/** A response whose client takes what is written until `full` is set (write() then answers false, as node does). */
class FakeResponse extends EventEmitter {
  text = '';
  full = false;
  destroyed = false;
  write(chunk: string): boolean {
    this.text += chunk;
    return !this.full;
  }
  end(): void {
    this.destroy();
  }
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.emit('close');
  }
}

function source(): StationSource & { add: (reference: string) => void } {
  const rows: (StationRead & { inputLevel: boolean })[] = [];
  return {
    add: (reference) =>
      rows.push({
        id: rows.length + 1,
        station: 'EOL-3',
        inputId: 'mes',
        receivedAt: '2026-11-24T08:00:00.000Z',
        outcome: 'scan',
        reason: null,
        reference,
        raw: reference,
        scanState: 'pending',
        failureReason: null,
        inputLevel: false,
      }),
    dcps: () => [{ key: 'EOL-3', kind: 'endOfProcess', inputs: ['mes'] }],
    site: () => ({ id: 's', timezone: 'UTC', shifts: [{ name: 'day', start: '00:00' }] }),
    recent: () => [],
    counts: () => ({}),
    readsAfter: (afterId, limit) => rows.filter((r) => r.id > afterId).slice(0, limit),
    lastReadId: () => rows.length,
    status: () =>
      ({
        delivery: { circuit: 'closed', consecutiveFailures: 0 },
        buffer: { undeliveredScans: 0 },
      }) as unknown as GatewayStatus,
  };
}

let hub: StationHub | undefined;
afterEach(() => hub?.close());

describe('station hub: clients that do not read, and the share per address', () => {
  it('stops writing to a stream whose send buffer is full and closes it after stallMs; a reading one keeps going', async () => {
    const src = source();
    const stalled: { remote: string; blockedMs: number }[] = [];
    hub = new StationHub(src, silentLogger(), {
      pollMs: 10,
      heartbeatMs: 20,
      stallMs: 150,
      onStalled: (remote, blockedMs) => stalled.push({ remote, blockedMs }),
    });
    const slow = new FakeResponse();
    const reader = new FakeResponse();
    expect(hub.open('EOL-3', slow as unknown as ServerResponse, '10.0.0.1')).toBe(true);
    expect(hub.open('EOL-3', reader as unknown as ServerResponse, '10.0.0.2')).toBe(true);
    slow.full = true;
    src.add('PK-1');
    await waitFor(() => reader.text.includes('PK-1'), { what: 'the read on the reading screen' });
    const written = slow.text.length;
    src.add('PK-2');
    await waitFor(() => reader.text.includes('PK-2'), { what: 'the second read' });
    // Nothing more once write() said the buffers are full: no read, no heartbeat.
    expect(slow.text.length).toBe(written);
    await waitFor(() => slow.destroyed, { what: 'the stalled stream closed' });
    expect(stalled).toEqual([{ remote: '10.0.0.1', blockedMs: expect.any(Number) }]);
    expect(stalled[0]!.blockedMs).toBeGreaterThanOrEqual(150);
    expect(hub.size).toBe(1);
    expect(reader.destroyed).toBe(false);
  });

  it('sends a fresh snapshot to a stream that drains in time, in place of the reads it missed', async () => {
    const src = source();
    hub = new StationHub(src, silentLogger(), { pollMs: 10, heartbeatMs: 1000, stallMs: 10_000 });
    const res = new FakeResponse();
    hub.open('EOL-3', res as unknown as ServerResponse, '10.0.0.1');
    res.full = true;
    src.add('PK-1');
    await waitFor(() => res.text.includes('PK-1'), { what: 'the read that filled the buffer' });
    src.add('PK-2');
    await new Promise((r) => setTimeout(r, 50));
    expect(res.text).not.toContain('PK-2');
    const snapshots = res.text.split('event: snapshot').length - 1;
    res.full = false;
    res.emit('drain');
    expect(res.text.split('event: snapshot').length - 1).toBe(snapshots + 1);
    src.add('PK-3');
    await waitFor(() => res.text.includes('PK-3'), { what: 'reads again after the drain' });
    expect(res.destroyed).toBe(false);
  });

  it('holds one address to maxStreamsPerClient', () => {
    hub = new StationHub(source(), silentLogger(), { maxStreamsPerClient: 2 });
    const open = (remote: string) =>
      hub!.open('EOL-3', new FakeResponse() as unknown as ServerResponse, remote);
    expect([open('10.0.0.1'), open('10.0.0.1'), open('10.0.0.1'), open('10.0.0.2')]).toEqual([
      true,
      true,
      false,
      true,
    ]);
    expect(hub.fullFor('10.0.0.1')).toBe(true);
    expect(hub.fullFor('10.0.0.2')).toBe(false);
    expect(hub.size).toBe(3);
  });
});
