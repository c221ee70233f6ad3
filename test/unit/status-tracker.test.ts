import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { deliverySchema } from '../../src/config/schema.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { Circuit } from '../../src/delivery/circuit.js';
import { StatusTracker } from '../../src/delivery/status-tracker.js';
import { silentLogger } from '../../src/log.js';
import { waitFor } from '../helpers/wait.js';

// The status tracker's one door to a terminal state (`apply`), which a poll answer and a status
// event both go through; and the circuit on its own. Real SQLite buffer, no loop started.

let store: BufferStore | undefined;
afterEach(() => store?.close());

function scan(reference: string): IntakeRecord {
  const body = JSON.stringify({ reference, dcpKey: 'GI-01' });
  return {
    inputId: 'in',
    receivedAt: new Date(0),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: { reference, dcpKey: 'GI-01', instant: new Date(0), body },
  };
}

function setup() {
  const s = (store = BufferStore.openAt(
    join(mkdtempSync(join(tmpdir(), 'sg-tracker-')), 'buffer.db'),
  ));
  const clock = { t: 1_700_000_000_000 };
  let resends = 0;
  const config = deliverySchema.parse({
    statusPollMs: 100,
    statusPollMaxMs: 1000,
    notFoundGraceMs: 10_000,
  });
  const tracker = new StatusTracker({
    store: s,
    api: { getScanStatus: () => Promise.reject(new Error('no poll in this test')) },
    config,
    logger: silentLogger(),
    now: () => clock.t,
    concurrency: 1,
    onResend: () => resends++,
  });
  /** An uploaded batch of `refs`, with `requestId`. */
  const uploaded = (requestId: string, mode: 'direct' | 'presigned', ...refs: string[]) => {
    s.intake.commitIntake(refs.map(scan), clock.t);
    const b = formBatch(s, {
      mode,
      maxScans: 100,
      maxBytes: 1e6,
      nowIso: new Date(clock.t).toISOString(),
    })!;
    s.batches.updateBatch(b.id, {
      state: 'uploaded',
      requestId,
      uploadedAt: new Date(clock.t).toISOString(),
      nextAttemptAt: clock.t + 100,
    });
    return b.id;
  };
  return { s, clock, tracker, uploaded, resends: () => resends };
}

describe('status tracker: apply, the one door to a terminal state', () => {
  it('finishes a batch named by its requestId, maps each failure to its scan, and ignores a repeated answer', () => {
    const t = setup();
    const id = t.uploaded('R-1', 'direct', 'A', 'B');
    const answer = {
      state: 'HasFailures',
      requestId: 'R-1',
      processed: 1,
      failed: 1,
      failures: [{ reference: 'B', reason: 'Invalid DCP' }],
    };
    expect(t.tracker.apply({ requestId: 'R-1' }, answer)).toBe('done');
    expect(t.s.batches.batch(id)).toMatchObject({
      state: 'done',
      upstreamState: 'HasFailures',
      processed: 1,
      failed: 1,
    });
    expect(t.s.reports.scanCounts()).toMatchObject({ delivered: 1, failed: 1 });
    expect(t.tracker.apply({ requestId: 'R-1' }, { state: 'Success', requestId: 'R-1' })).toBe(
      'ignored',
    );
    expect(t.tracker.apply(id, { state: 'Success', requestId: 'R-1' })).toBe('ignored');
    expect(t.s.batches.batch(id)).toMatchObject({ state: 'done', upstreamState: 'HasFailures' });
  });

  it('answers ignored for an unknown requestId, touching nothing', () => {
    const t = setup();
    const id = t.uploaded('R-1', 'direct', 'A');
    expect(t.tracker.apply({ requestId: 'R-404' }, { state: 'Success', requestId: 'R-404' })).toBe(
      'ignored',
    );
    expect(t.s.batches.batch(id)?.state).toBe('uploaded');
  });

  it('records a state in progress and schedules the next poll with a growing interval', () => {
    const t = setup();
    const id = t.uploaded('R-1', 'presigned', 'A');
    expect(t.tracker.apply(id, { state: 'Processing', requestId: 'R-1' })).toBe('waiting');
    expect(t.s.batches.batch(id)).toMatchObject({
      state: 'uploaded',
      upstreamState: 'Processing',
      polls: 1,
      nextAttemptAt: t.clock.t + 150,
    });
  });

  it('sends a batch again when the service still does not know it after the grace window', () => {
    const t = setup();
    const direct = t.uploaded('R-1', 'direct', 'A');
    const presigned = t.uploaded('R-2', 'presigned', 'B');
    expect(t.tracker.apply(direct, { state: 'NotFound', requestId: 'R-1' })).toBe('waiting');
    t.clock.t += 10_001;
    expect(t.tracker.apply(direct, { state: 'NotFound', requestId: 'R-1' })).toBe('resend');
    expect(t.tracker.apply({ requestId: 'R-2' }, { state: 'NotFound', requestId: 'R-2' })).toBe(
      'resend',
    );
    expect(t.s.batches.batch(direct)).toMatchObject({
      state: 'ready',
      requestId: null,
      possibleDuplicate: 1,
    });
    expect(t.s.batches.batch(presigned)).toMatchObject({ state: 'presigned', requestId: 'R-2' });
    expect(t.resends()).toBe(2);
  });
});

describe('status tracker: while status events flow', () => {
  it('polls only at the safety pace, but at the normal pace a batch the service has not confirmed past the grace', async () => {
    const s = (store = BufferStore.openAt(
      join(mkdtempSync(join(tmpdir(), 'sg-tracker-pace-')), 'buffer.db'),
    ));
    const clock = { t: 1_700_000_000_000 };
    const polled: string[] = [];
    const tracker = new StatusTracker({
      store: s,
      api: {
        getScanStatus: async (requestId) => {
          polled.push(requestId);
          return { state: 'NotFound', requestId, description: '', processed: 0 };
        },
      },
      config: deliverySchema.parse({ statusPollMs: 100, notFoundGraceMs: 120_000 }),
      logger: silentLogger(),
      now: () => clock.t,
      concurrency: 1,
      onResend: () => {},
      pace: () => ({ events: true, safetyPollMs: 600_000 }),
    });
    for (const [ref, requestId, uploadedAgoMs] of [
      ['A', 'R-fresh', 1_000],
      ['B', 'R-past-grace', 150_000],
    ] as const) {
      s.intake.commitIntake([scan(ref)], clock.t);
      const b = formBatch(s, {
        mode: 'direct',
        maxScans: 1,
        maxBytes: 1e6,
        nowIso: new Date(clock.t).toISOString(),
      })!;
      s.batches.updateBatch(b.id, {
        state: 'uploaded',
        requestId,
        uploadedAt: new Date(clock.t - uploadedAgoMs).toISOString(),
        nextAttemptAt: clock.t - 1,
      });
    }
    tracker.start();
    try {
      await waitFor(() => polled.includes('R-past-grace'), {
        timeoutMs: 10_000,
        what: 'the batch past its grace polled',
      });
      // Past the grace and still NotFound: sent again; the fresh one waits for its event.
      await waitFor(() => s.batches.batchesInState('ready').length === 1, { timeoutMs: 10_000 });
      expect(polled).not.toContain('R-fresh');
    } finally {
      await tracker.stop();
    }
  });
});

describe('status tracker: a service that takes a second PUT to a used pre-signed address', () => {
  it('counts a pre-signed batch reported with more scans processed than it holds as a possible duplicate; a direct one, or an exact count, not', () => {
    const t = setup();
    const doubled = t.uploaded('R-1', 'presigned', 'A', 'B');
    const exact = t.uploaded('R-2', 'presigned', 'C', 'D');
    const direct = t.uploaded('R-3', 'direct', 'E');
    // §4.5: both uploads to the one address are tracked under its one requestId.
    expect(
      t.tracker.apply({ requestId: 'R-1' }, { state: 'Success', requestId: 'R-1', processed: 4 }),
    ).toBe('done');
    expect(
      t.tracker.apply({ requestId: 'R-2' }, { state: 'Success', requestId: 'R-2', processed: 2 }),
    ).toBe('done');
    expect(
      t.tracker.apply({ requestId: 'R-3' }, { state: 'Success', requestId: 'R-3', processed: 2 }),
    ).toBe('done');
    expect(t.s.batches.batch(doubled)).toMatchObject({
      state: 'done',
      processed: 4,
      possibleDuplicate: 1,
    });
    expect(t.s.batches.batch(exact)).toMatchObject({ state: 'done', possibleDuplicate: 0 });
    expect(t.s.batches.batch(direct)).toMatchObject({ state: 'done', possibleDuplicate: 0 });
    // A double the service itself reported is known, not possible: counted for life, not as open.
    expect(t.s.reports.possibleDuplicates()).toEqual({
      uploads: 0,
      scans: 0,
      totalUploads: 1,
      totalScans: 2,
    });
    expect(t.s.reports.scanCounts()).toEqual({ delivered: 5 });
  });
});

describe('circuit', () => {
  it('stays closed for two failures, opens at the third until its retry time, then half-opens; a success closes it', () => {
    const clock = { t: 1_000_000 };
    const c = new Circuit({
      config: { retryBaseMs: 1000, retryMaxMs: 8000 },
      now: () => clock.t,
      random: () => 0.5,
    });
    expect(c.failed()).toBe(500);
    expect(c.failed()).toBe(1000);
    expect(c.snapshot().circuit).toBe('closed');
    const delay = c.failed(5000);
    expect(delay).toBe(5000);
    c.retryAt(clock.t + delay);
    expect(c.snapshot()).toEqual({
      circuit: 'open',
      consecutiveFailures: 3,
      nextRetryAt: new Date(clock.t + 5000).toISOString(),
      failingSince: new Date(clock.t).toISOString(),
    });
    clock.t += 5000;
    expect(c.state()).toBe('half-open');
    c.succeeded();
    expect(c.snapshot()).toEqual({ circuit: 'closed', consecutiveFailures: 0 });
  });
});
