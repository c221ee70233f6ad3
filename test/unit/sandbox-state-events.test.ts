import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ScanStatusWire } from '@scan-gateway/contract';
import { SandboxState } from '@scan-gateway/sandbox';

// The one place a sandbox batch's state moves: every change is announced once, in order, with
// the status object the status endpoint answers at that moment (what the Kafka endpoint publishes).
//
// The state moves on its own timer and Date.now(); both are the test's (fake timers), advanced
// step by step, or the clock moved past a timer before it fires, as on a loaded machine.

const CLIENT = {
  clientId: 'c1',
  clientSecret: 's',
  dcps: ['GI-01'],
  products: [{ key: 'PACK-A', name: 'A' }],
};
const SCAN = {
  reference: 'R-1',
  timeStamp: '2025-01-02T03:04:05',
  dcpKey: 'GI-01',
  productModelKey: 'PACK-A',
  parents: [],
  attributes: [],
};

describe('SandboxState status changes', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: new Date('2025-01-02T03:04:05Z') });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('announces Received, InProgress and the terminal state once each, as status() answers them', () => {
    const state = new SandboxState([CLIENT]);
    const seen: Array<[string, ScanStatusWire]> = [];
    state.onStatusChange((clientId, status) => seen.push([clientId, status]));
    // A listener that throws does not keep the others from hearing.
    state.onStatusChange(() => {
      throw new Error('a broken listener');
    });
    const id = state.nextRequestId();
    state.acceptBatch(
      id,
      'c1',
      'direct',
      [SCAN, { ...SCAN, reference: 'R-2', dcpKey: 'XX' }],
      200,
      Date.now(),
    );
    expect(seen.map(([, s]) => s.state)).toEqual(['Received']);
    vi.advanceTimersByTime(99);
    expect(seen).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(seen.map(([, s]) => s.state)).toEqual(['Received', 'InProgress']);
    vi.advanceTimersByTime(100);
    // Terminal: nothing more comes, however long the batch is left.
    vi.advanceTimersByTime(60_000);
    expect(vi.getTimerCount()).toBe(0);
    expect(seen.map(([c, s]) => [c, s.state])).toEqual([
      ['c1', 'Received'],
      ['c1', 'InProgress'],
      ['c1', 'HasFailures'],
    ]);
    expect(seen[2]?.[1]).toEqual(state.status(id, 'c1', Date.now()));
  });

  it('announces InProgress before the terminal state when its timer fires after the end of the delay (a busy process)', () => {
    const state = new SandboxState([CLIENT]);
    const seen: ScanStatusWire[] = [];
    state.onStatusChange((_c, s) => seen.push(s));
    state.acceptBatch('31', 'c1', 'direct', [SCAN, { ...SCAN, reference: 'R-2' }], 200, Date.now());
    // The clock passes the whole delay before the half-way timer runs.
    vi.setSystemTime(Date.now() + 500);
    vi.advanceTimersByTime(100);
    expect(seen.map((s) => [s.state, s.processed])).toEqual([
      ['Received', 0],
      ['InProgress', 0],
      ['Success', 2],
    ]);
    expect(seen[1]).toEqual(state.status('31', 'c1', Date.now() - 500));
    expect(seen[2]).toEqual(state.status('31', 'c1', Date.now()));
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a batch processed at once (delay 0), or unreadable, announces its terminal state only', () => {
    const state = new SandboxState([CLIENT]);
    const seen: string[] = [];
    state.onStatusChange((_c, s) => seen.push(`${s.requestId}:${s.state}`));
    state.acceptBatch('11', 'c1', 'direct', [SCAN], 0, Date.now());
    state.acceptUnreadable('12', 'c1', 'not an array', 0, Date.now());
    expect(seen).toEqual(['11:Success', '12:Failed']);
    // No timer left to announce anything more.
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(60_000);
    expect(seen).toEqual(['11:Success', '12:Failed']);
  });

  it('names a transferred file first in the description of every status of its batch, announced and answered alike (docs/delivery.md "SFTP")', () => {
    const state = new SandboxState([CLIENT]);
    const seen: ScanStatusWire[] = [];
    state.onStatusChange((_c, s) => seen.push(s));
    state.acceptBatch(
      '21',
      'c1',
      'sftp',
      [SCAN, { ...SCAN, reference: 'R-2', dcpKey: 'XX' }],
      100,
      Date.now(),
      's-7-abc.json',
    );
    state.acceptUnreadable(
      '22',
      'c1',
      'The transferred file is not a JSON array of scans.',
      0,
      Date.now(),
      's-8-def.json',
    );
    state.acceptBatch('23', 'c1', 'presigned', [SCAN], 0, Date.now());
    vi.advanceTimersByTime(50);
    vi.advanceTimersByTime(50);
    expect(seen.filter((s) => s.requestId === 21).map((s) => s.description)).toEqual([
      's-7-abc.json: Upload received, waiting to be processed',
      's-7-abc.json: Batch is being processed',
      's-7-abc.json: 1 of 2 scans failed to process',
    ]);
    expect(state.status('21', 'c1', Date.now())).toEqual(seen.at(-1));
    expect(state.status('22', 'c1', Date.now()).description).toBe(
      's-8-def.json: The transferred file is not a JSON array of scans.',
    );
    expect(state.status('23', 'c1', Date.now()).description).toBe(
      'All 1 scans processed successfully',
    );
  });
});
