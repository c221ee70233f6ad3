import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { deliverySchema, statusEventTopic, upstreamSchema } from '../../src/config/schema.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { fileNameOf, StatusEventFeed, type TopicReader } from '../../src/delivery/status-events.js';
import { StatusTracker } from '../../src/delivery/status-tracker.js';
import { ErrorCodes, GatewayError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import type { FetchResult } from '../../src/upstream/status-topic.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { waitFor } from '../helpers/wait.js';

// The status-event feed (src/delivery/status-events.ts) against an in-memory topic standing in for
// the Kafka reader (the seam: the wire is tested end to end against the sandbox's broker in
// test/e2e/status-events.test.ts), with a real SQLite buffer and the real status tracker.

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** One partition in memory: `append` adds an event; a fetch answers what lies after the position, or empty after a short wait. */
class MemoryTopic {
  readonly log: (Buffer | null)[] = [];
  /** When each event was written (ms). */
  readonly times: number[] = [];
  /** An error every connect (partitions()) throws while set. */
  refusing: Error | undefined;
  /** Positions asked for by each fetch. */
  readonly fetchedFrom: bigint[] = [];
  /** Offset of the first retained event (retention). */
  start = 0n;
  connects = 0;
  private waiters: (() => void)[] = [];

  append(value: unknown, at = Date.now()): void {
    this.log.push(
      value === null
        ? null
        : Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)),
    );
    this.times.push(at);
    for (const w of this.waiters.splice(0)) w();
  }

  reader(): TopicReader {
    let closed = false;
    return {
      partitions: async () => {
        this.connects++;
        if (this.refusing) throw this.refusing;
        return [0];
      },
      offsets: async (which) => {
        if (which === 'earliest') return new Map([[0, this.start]]);
        const at =
          which === 'latest'
            ? -1
            : this.times.findIndex((t, i) => BigInt(i) >= this.start && t >= which.since);
        return new Map([[0, at < 0 ? BigInt(this.log.length) : BigInt(at)]]);
      },
      fetch: async (positions): Promise<FetchResult> => {
        const from = positions.get(0)!;
        this.fetchedFrom.push(from);
        if (from < this.start || from > BigInt(this.log.length))
          return { records: [], ends: new Map(), next: new Map(positions), outOfRange: [0] };
        if (from === BigInt(this.log.length))
          await new Promise<void>((resolve) => {
            this.waiters.push(resolve);
            setTimeout(resolve, 50);
          });
        if (closed) throw new GatewayError(ErrorCodes.EVENTS_NETWORK, 'closed');
        const records = this.log
          .slice(Number(from))
          .map((value, i) => ({ partition: 0, offset: from + BigInt(i), value }));
        const end = BigInt(this.log.length);
        return {
          records,
          ends: new Map([[0, end]]),
          next: new Map([[0, from + BigInt(records.length)]]),
          outOfRange: [],
        };
      },
      close: async () => void (closed = true),
    };
  }
}

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

function setup(
  options: {
    dir?: string;
    logger?: ReturnType<typeof memoryLogger>;
    maxLagEvents?: number;
    staleAfterMs?: number;
    holdMs?: number;
    topic?: MemoryTopic;
    connect?: (topic: MemoryTopic) => Promise<TopicReader>;
    otherWriter?: () => Promise<void> | undefined;
  } = {},
) {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'sg-events-'));
  const store = BufferStore.openAt(join(dir, 'buffer.db'));
  const clock = { t: Date.now() };
  const topic = options.topic ?? new MemoryTopic();
  const config = deliverySchema.parse({
    statusPollMs: 100,
    statusPollMaxMs: 1000,
    notFoundGraceMs: 10_000,
  });
  const logger = options.logger?.logger ?? silentLogger();
  const tracker = new StatusTracker({
    store,
    api: { getScanStatus: () => Promise.reject(new Error('no poll in this test')) },
    config,
    logger,
    now: () => clock.t,
    concurrency: 1,
    onResend: () => {},
  });
  let paceChanges = 0;
  const feed = new StatusEventFeed({
    store,
    topic: 'test-site-status-event',
    connect: options.connect ? () => options.connect!(topic) : () => topic.reader(),
    apply: (ref, status, source) => tracker.apply(ref, status, source),
    onPaceChange: () => paceChanges++,
    safetyPollMs: 600_000,
    maxLagEvents: options.maxLagEvents ?? 1000,
    staleAfterMs: options.staleAfterMs ?? 30_000,
    logger,
    now: () => clock.t,
    retryBaseMs: 20,
    retryMaxMs: 50,
    ...(options.holdMs !== undefined ? { holdMs: options.holdMs } : {}),
    ...(options.otherWriter ? { otherWriter: options.otherWriter } : {}),
  });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await feed.stop();
    store.close();
  };
  cleanups.push(stop);
  /** A batch of `refs` in state `uploaded` with `requestId`. */
  const uploaded = (requestId: string, ...refs: string[]) => {
    store.intake.commitIntake(refs.map(scan), clock.t);
    const b = formBatch(store, {
      mode: 'direct',
      maxScans: 100,
      maxBytes: 1e6,
      nowIso: new Date(clock.t).toISOString(),
    })!;
    store.batches.updateBatch(b.id, {
      state: 'uploaded',
      requestId,
      uploadedAt: new Date(clock.t).toISOString(),
      nextAttemptAt: clock.t + 100,
    });
    return b.id;
  };
  return {
    dir,
    store,
    clock,
    topic,
    tracker,
    feed,
    uploaded,
    stop,
    paceChanges: () => paceChanges,
  };
}

const success = (requestId: number, processed = 1) => ({
  state: 'Success',
  requestId,
  description: 'done',
  processed,
});

describe('status events: each event through the tracker, positions with the effect', () => {
  it('finishes a batch from its terminal event and stores the position after it in the same buffer', async () => {
    const t = setup();
    const id = t.uploaded('41', 'A', 'B');
    t.feed.start();
    await waitFor(() => t.feed.snapshot().state === 'flowing', { what: 'connected' });
    t.topic.append(success(41, 2));
    await waitFor(() => t.store.batches.batch(id)?.state === 'done', {
      what: 'batch done by the event',
    });
    expect(t.store.batches.batch(id)).toMatchObject({ upstreamState: 'Success', processed: 2 });
    expect(t.store.positions.eventPositions('test-site-status-event').get(0)).toBe(1n);
    expect(t.feed.snapshot()).toMatchObject({
      received: 1,
      applied: 1,
      ignored: 0,
      invalid: 0,
      duplicates: 0,
      lag: 0,
    });
  });

  it("applies a fetch's events only after another connection's write in progress ends (the batch thread's), not in SQLite's busy handler", async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let asked = 0;
    const t = setup({
      otherWriter: () => {
        asked++;
        return gate;
      },
    });
    cleanups.push(open);
    const id = t.uploaded('41', 'A', 'B');
    t.topic.append(success(41, 2));
    t.feed.start();
    // The first fetch holds the event; its transaction waits for the other writer.
    await waitFor(() => asked > 0 && t.topic.fetchedFrom.length > 0, { what: 'the fetch read' });
    expect(t.store.batches.batch(id)?.state).toBe('uploaded');
    expect(t.feed.snapshot()).toMatchObject({ received: 0, applied: 0 });
    // The position the feed started from, not the one after the event.
    expect(t.store.positions.eventPositions('test-site-status-event').get(0)).toBe(0n);
    open();
    await waitFor(() => t.store.batches.batch(id)?.state === 'done', {
      what: 'batch done once the other write ended',
    });
    expect(t.feed.snapshot()).toMatchObject({ received: 1, applied: 1 });
    expect(t.store.positions.eventPositions('test-site-status-event').get(0)).toBe(1n);
  });

  it('records an intermediate state without touching the poll schedule, and works as well when none is published', async () => {
    const t = setup();
    const withSteps = t.uploaded('1', 'A');
    const direct = t.uploaded('2', 'B');
    const before = t.store.batches.batch(withSteps)!;
    t.feed.start();
    t.topic.append({ state: 'Received', requestId: 1, description: '', processed: 0 });
    t.topic.append({ state: 'InProgress', requestId: 1, description: '', processed: 0 });
    await waitFor(() => t.feed.snapshot().received === 2);
    expect(t.store.batches.batch(withSteps)).toMatchObject({
      state: 'uploaded',
      upstreamState: 'InProgress',
      polls: before.polls,
      nextAttemptAt: before.nextAttemptAt,
    });
    t.topic.append({
      state: 'HasFailures',
      requestId: 1,
      description: 'some failed',
      processed: 1,
      failed: 1,
      failures: [{ reference: 'A', reason: 'Invalid DCP' }],
    });
    t.topic.append(success(2));
    await waitFor(
      () =>
        t.store.batches.batch(withSteps)?.state === 'done' &&
        t.store.batches.batch(direct)?.state === 'done',
    );
    expect(t.store.batches.batch(withSteps)).toMatchObject({
      upstreamState: 'HasFailures',
      failed: 1,
    });
    expect(t.store.reports.scanCounts()).toMatchObject({ failed: 1, delivered: 1 });
  });

  it('changes nothing on a repeated event, nor on a state after the end', async () => {
    const t = setup();
    const id = t.uploaded('7', 'A');
    t.feed.start();
    t.topic.append(success(7));
    await waitFor(() => t.store.batches.batch(id)?.state === 'done');
    const done = t.store.batches.batch(id);
    t.topic.append(success(7));
    t.topic.append({ state: 'InProgress', requestId: 7, description: '', processed: 0 });
    t.topic.append({ state: 'Failed', requestId: 7, description: 'late and wrong', processed: 0 });
    await waitFor(() => t.feed.snapshot().received === 4);
    expect(t.store.batches.batch(id)).toEqual(done);
    expect(t.feed.snapshot()).toMatchObject({ applied: 1, duplicates: 3 });
  });

  it('counts events of other requestIds as ignored, invalid ones as invalid (one log line), and keeps reading', async () => {
    const log = memoryLogger();
    const t = setup({ logger: log });
    const id = t.uploaded('5', 'A');
    t.feed.start();
    t.topic.append(success(999));
    t.topic.append('not json {');
    t.topic.append(null);
    t.topic.append({ state: 'Success', description: 'no id', processed: 1 });
    t.topic.append({ state: 'Exploded', requestId: 5, description: '', processed: 1 });
    t.topic.append({ state: 'Success', requestId: 5, description: '', processed: -1 });
    t.topic.append(success(5));
    await waitFor(() => t.store.batches.batch(id)?.state === 'done');
    expect(t.feed.snapshot()).toMatchObject({ received: 7, applied: 1, ignored: 1, invalid: 5 });
    const lines = log.parsed().filter((l) => l.msg.includes('not a status object'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ invalid: 1 });
  });

  it('goes on after the last stored position when started again: none lost, none applied twice', async () => {
    const first = setup();
    const a = first.uploaded('10', 'A');
    const b = first.uploaded('11', 'B');
    first.feed.start();
    first.topic.append(success(10));
    await waitFor(() => first.store.batches.batch(a)?.state === 'done');
    await first.stop();
    // Published while the gateway was stopped.
    first.topic.append(success(11));
    const second = setup({ dir: first.dir, topic: first.topic });
    const before = first.topic.fetchedFrom.length;
    second.feed.start();
    await waitFor(() => second.store.batches.batch(b)?.state === 'done', {
      what: 'the event published while stopped',
    });
    expect(second.topic.fetchedFrom[before]).toBe(1n);
    expect(second.topic.fetchedFrom.slice(before)).not.toContain(0n);
    expect(second.feed.snapshot()).toMatchObject({ received: 1, applied: 1, duplicates: 0 });
  });

  it('reads a topic never read from the events written since its oldest unfinished batch was formed, less 5 minutes, else from 5 minutes ago', async () => {
    const topic = new MemoryTopic();
    const hour = 3_600_000;
    topic.append(success(9), Date.now() - 3 * hour);
    topic.append(success(1), Date.now() - 2 * hour);
    topic.append(success(8), Date.now() - 60_000);
    const waiting = setup({ topic });
    waiting.clock.t -= 2 * hour + 60_000;
    const id = waiting.uploaded('1', 'A');
    waiting.clock.t += 2 * hour + 60_000;
    waiting.feed.start();
    await waitFor(() => waiting.store.batches.batch(id)?.state === 'done', {
      what: 'the event of the batch formed two hours ago',
    });
    expect(waiting.topic.fetchedFrom[0]).toBe(1n);
    await waiting.stop();

    const quiet = setup({ topic });
    const before = topic.fetchedFrom.length;
    quiet.feed.start();
    await waitFor(() => quiet.feed.snapshot().received === 1);
    expect(quiet.topic.fetchedFrom[before]).toBe(2n);
    expect(quiet.feed.snapshot()).toMatchObject({ ignored: 1, applied: 0 });
  });

  it('reads from the earliest retained event when the stored position is gone (retention)', async () => {
    const t = setup();
    t.feed.start();
    await waitFor(() => t.feed.snapshot().state === 'flowing');
    await t.feed.stop();
    for (let i = 0; i < 5; i++) t.topic.append(success(100 + i));
    t.topic.start = 3n;
    t.store.positions.saveEventPosition('test-site-status-event', 0, 1n, new Date().toISOString());
    t.feed.start();
    await waitFor(() => t.feed.snapshot().received === 2);
    expect(t.store.positions.eventPositions('test-site-status-event').get(0)).toBe(5n);
    expect(t.feed.snapshot().ignored).toBe(2);
  });

  it('holds an event that comes before its upload is recorded, and applies it when the batch is uploaded', async () => {
    const t = setup();
    t.store.intake.commitIntake([scan('A')], t.clock.t);
    const b = formBatch(t.store, {
      mode: 'direct',
      maxScans: 100,
      maxBytes: 1e6,
      nowIso: new Date(t.clock.t).toISOString(),
    })!;
    t.store.batches.updateBatch(b.id, { state: 'uploading' });
    t.feed.start();
    t.topic.append(success(77));
    await waitFor(() => t.feed.snapshot().received === 1);
    expect(t.feed.snapshot()).toMatchObject({ applied: 0, ignored: 0 });
    t.store.batches.updateBatch(b.id, {
      state: 'uploaded',
      requestId: '77',
      uploadedAt: new Date(t.clock.t).toISOString(),
    });
    t.feed.batchUploaded();
    expect(t.store.batches.batch(b.id)?.state).toBe('done');
    expect(t.feed.snapshot()).toMatchObject({ applied: 1, ignored: 0 });
  });
});

describe('status events for SFTP batches: by file name, else by references', () => {
  /** An SFTP batch of `refs` whose file is `/in/<name>`, in `state`; `transferred` finishes it as the tracker does. */
  function sftpBatch(
    t: ReturnType<typeof setup>,
    name: string,
    state: 'uploading' | 'uploaded' | 'transferred',
    ...refs: string[]
  ) {
    t.store.intake.commitIntake(refs.map(scan), t.clock.t);
    const b = formBatch(t.store, {
      mode: 'sftp',
      maxScans: 100,
      maxBytes: 1e6,
      nowIso: new Date(t.clock.t).toISOString(),
    })!;
    t.store.batches.updateBatch(b.id, {
      state: state === 'uploading' ? 'uploading' : 'uploaded',
      remotePath: `/in/${name}`,
      sha256: 'ab'.repeat(32),
      uploadedAt: new Date(t.clock.t).toISOString(),
    });
    if (state === 'transferred')
      expect(t.tracker.apply(b.id, { state: 'transferred', requestId: '' })).toBe('done');
    return b.id;
  }

  it('finishes a transferred batch from the event whose description names its file; the steps before and a repeat change nothing', async () => {
    const t = setup();
    const id = sftpBatch(t, 's-1-aaa.json', 'transferred', 'A', 'B');
    const other = sftpBatch(t, 's-2-bbb.json', 'transferred', 'C');
    t.feed.start();
    t.topic.append({
      state: 'Received',
      requestId: 500,
      description: 's-1-aaa.json: Upload received, waiting to be processed',
      processed: 0,
    });
    t.topic.append({
      state: 'InProgress',
      requestId: 500,
      description: 's-1-aaa.json: Batch is being processed',
      processed: 1,
    });
    t.topic.append({
      state: 'Success',
      requestId: 500,
      description: 's-1-aaa.json: All 2 scans processed successfully',
      processed: 2,
    });
    t.topic.append({
      state: 'Success',
      requestId: 500,
      description: 's-1-aaa.json: All 2 scans processed successfully',
      processed: 2,
    });
    await waitFor(() => t.feed.snapshot().received === 4, { what: 'four events read' });
    expect(t.store.batches.batch(id)).toMatchObject({
      state: 'done',
      upstreamState: 'Success',
      requestId: '500',
      processed: 2,
    });
    expect(t.store.batches.batch(other)).toMatchObject({
      upstreamState: 'transferred',
      requestId: null,
    });
    expect(t.feed.snapshot()).toMatchObject({ applied: 1, duplicates: 3, ignored: 0, invalid: 0 });
    // The positions after the events are stored with their effect.
    expect(t.store.positions.eventPositions('test-site-status-event').get(0)).toBe(4n);
  });

  it('finishes a transferred batch from the references of its failures when the description names no file of ours', async () => {
    const t = setup();
    const id = sftpBatch(t, 's-1-aaa.json', 'transferred', 'A', 'B', 'C');
    t.feed.start();
    // Another site's batch: references we do not hold, and a name we never wrote.
    t.topic.append({
      state: 'HasFailures',
      requestId: 600,
      description: 'x-9-zzz.json: 1 of 2 scans failed to process',
      processed: 2,
      failed: 1,
      failures: [{ reference: 'Z', reason: 'Invalid DCP' }],
    });
    t.topic.append({
      state: 'HasFailures',
      requestId: 601,
      description: '1 of 3 scans failed to process',
      processed: 3,
      failed: 1,
      failures: [{ reference: 'B', reason: 'Invalid DCP' }],
    });
    t.topic.append({
      state: 'HasFailures',
      requestId: 601,
      description: '1 of 3 scans failed to process',
      processed: 3,
      failed: 1,
      failures: [{ reference: 'B', reason: 'Invalid DCP' }],
    });
    await waitFor(() => t.feed.snapshot().received === 3, { what: 'three events read' });
    expect(t.store.batches.batch(id)).toMatchObject({
      state: 'done',
      upstreamState: 'HasFailures',
      requestId: '601',
      failed: 1,
    });
    expect(t.store.reports.scanCounts()).toMatchObject({ delivered: 2, failed: 1 });
    expect(t.feed.snapshot()).toMatchObject({ applied: 1, duplicates: 1, ignored: 1 });
  });

  it('takes a terminal event for a batch whose transfer is recorded but not yet finished, and holds one that comes while its file is being written', async () => {
    const t = setup();
    const uploaded = sftpBatch(t, 's-1-aaa.json', 'uploaded', 'A');
    const writing = sftpBatch(t, 's-2-bbb.json', 'uploading', 'B');
    t.feed.start();
    t.topic.append({
      state: 'Success',
      requestId: 700,
      description: 's-1-aaa.json: All 1 scans processed successfully',
      processed: 1,
    });
    t.topic.append({
      state: 'Failed',
      requestId: 701,
      description: 's-2-bbb.json: All scans failed to process',
      processed: 1,
      failed: 1,
      failures: [{ reference: 'B', reason: 'Invalid DCP' }],
    });
    await waitFor(() => t.feed.snapshot().received === 2, { what: 'two events read' });
    expect(t.store.batches.batch(uploaded)).toMatchObject({
      state: 'done',
      upstreamState: 'Success',
    });
    expect(t.store.batches.batch(writing)?.state).toBe('uploading');
    expect(t.feed.snapshot()).toMatchObject({ applied: 1, ignored: 0, duplicates: 0 });
    t.store.batches.updateBatch(writing, { state: 'uploaded' });
    t.feed.batchUploaded();
    expect(t.store.batches.batch(writing)).toMatchObject({
      state: 'done',
      upstreamState: 'Failed',
      requestId: '701',
    });
    expect(t.feed.snapshot()).toMatchObject({ applied: 2, ignored: 0 });
  });

  it('reads the file name as the text before the first ": " (a path reduced to its last part)', () => {
    expect(fileNameOf('s-1-aaa.json: All 5 scans processed successfully')).toBe('s-1-aaa.json');
    expect(fileNameOf('/in/s-1-aaa.json: x: y')).toBe('s-1-aaa.json');
    expect(fileNameOf('s-1-aaa.json')).toBe('s-1-aaa.json');
    expect(fileNameOf(undefined)).toBeUndefined();
    expect(fileNameOf(': nothing')).toBeUndefined();
    expect(fileNameOf(`${'x'.repeat(300)}: long`)).toBeUndefined();
  });
});

describe('status events: the pace of polling and the health facts', () => {
  it('says events flow only after a read, and not when refused; the reason carries its code; it reconnects by itself', async () => {
    const t = setup();
    t.topic.refusing = new GatewayError(
      ErrorCodes.EVENTS_AUTH,
      'the brokers refused SASL SCRAM-SHA-512 authentication of the client id',
    );
    expect(t.feed.pace().events).toBe(false);
    t.feed.start();
    await waitFor(() => t.feed.snapshot().lastError?.code === ErrorCodes.EVENTS_AUTH);
    expect(t.feed.snapshot().state).toBe('down');
    expect(t.feed.pace()).toEqual({ events: false, safetyPollMs: 600_000 });
    t.topic.refusing = new GatewayError(
      ErrorCodes.EVENTS_TLS,
      "the brokers' TLS certificate is refused",
    );
    await waitFor(() => t.feed.snapshot().lastError?.code === ErrorCodes.EVENTS_TLS);
    t.topic.refusing = undefined;
    await waitFor(() => t.feed.snapshot().state === 'flowing', {
      what: 'reconnected after the refusals',
    });
    expect(t.topic.connects).toBeGreaterThanOrEqual(3);
    expect(t.feed.pace().events).toBe(true);
    expect(t.paceChanges()).toBeGreaterThanOrEqual(2);
  });

  it('reconnects at once when asked (new credentials after a reload), counting no failure and applying each event once', async () => {
    const t = setup();
    const id = t.uploaded('7', 'A');
    t.feed.start();
    await waitFor(() => t.feed.snapshot().state === 'flowing');
    const connects = t.topic.connects;
    await t.feed.reconnect();
    await waitFor(() => t.topic.connects === connects + 1, { what: 'a new connection' });
    t.topic.append(success(7));
    await waitFor(() => t.store.batches.batch(id)?.state === 'done');
    expect(t.feed.snapshot()).toMatchObject({ state: 'flowing', applied: 1 });
    expect(t.feed.snapshot().lastError).toBeUndefined();
  });

  it('says starting until its reader is made (the daemon loads the Kafka client then), connecting until the first read; a reader that cannot be made is a failure like any other', async () => {
    let failLoad = true;
    const loads: (() => void)[] = [];
    let contacted: (() => void) | undefined;
    const t = setup({
      // The daemon loads the Kafka client on the first connect (src/app/status-events-part.ts): a reader made asynchronously.
      connect: async (topic) => {
        await new Promise<void>((resolve) => loads.push(resolve));
        if (failLoad) throw new Error('Cannot find package @platformatic/kafka');
        const reader = topic.reader();
        return {
          ...reader,
          partitions: async () => (
            await new Promise<void>((resolve) => (contacted = resolve)),
            reader.partitions()
          ),
        };
      },
    });
    expect(t.feed.snapshot().state).toBe('starting');
    expect(t.feed.pace().events).toBe(false);
    expect(loads).toHaveLength(0);
    t.feed.start();
    await waitFor(() => loads.length === 1, { what: 'the first connect' });
    expect(t.feed.snapshot().state).toBe('starting');
    loads[0]!();
    await waitFor(() => t.feed.snapshot().state === 'down', { what: 'the failed load reported' });
    expect(t.feed.snapshot().lastError).toMatchObject({
      code: ErrorCodes.EVENTS_NETWORK,
      message: 'Cannot find package @platformatic/kafka',
    });
    failLoad = false;
    await waitFor(() => loads.length === 2, { what: 'the next connect' });
    loads[1]!();
    await waitFor(() => contacted !== undefined, { what: 'the first contact' });
    expect(t.feed.snapshot().state).toBe('down');
    contacted!();
    await waitFor(() => t.feed.snapshot().state === 'flowing', {
      what: 'connected once the reader could be made',
    });
    expect(loads).toHaveLength(2);
  });

  it('is connecting, not starting, between its reader made and the first read', async () => {
    let contacted: (() => void) | undefined;
    const t = setup({
      connect: async (topic) => {
        const reader = topic.reader();
        return {
          ...reader,
          partitions: async () => (
            await new Promise<void>((resolve) => (contacted = resolve)),
            reader.partitions()
          ),
        };
      },
    });
    t.feed.start();
    await waitFor(() => contacted !== undefined, { what: 'the first contact' });
    expect(t.feed.snapshot().state).toBe('connecting');
    contacted!();
    await waitFor(() => t.feed.snapshot().state === 'flowing', { what: 'the first read' });
  });

  it('closes a reader that was still being made when it stopped', async () => {
    let release: (() => void) | undefined;
    let closed = false;
    const t = setup({
      connect: async (topic) => {
        await new Promise<void>((resolve) => (release = resolve));
        const reader = topic.reader();
        return { ...reader, close: async () => void (closed = true) };
      },
    });
    t.feed.start();
    await waitFor(() => release !== undefined, { what: 'connect called' });
    const stopped = t.feed.stop();
    release!();
    await stopped;
    expect(closed).toBe(true);
    expect(t.topic.connects).toBe(0);
  });

  it('lets polling take over when the last read is older than staleAfterMs or the lag is above maxLagEvents', async () => {
    const stale = setup({ staleAfterMs: 1000 });
    stale.feed.start();
    await waitFor(() => stale.feed.pace().events);
    stale.clock.t += 5000;
    expect(stale.feed.snapshot().state).toBe('lagging');
    expect(stale.feed.pace().events).toBe(false);
    await stale.stop();

    const topic = new MemoryTopic();
    const behind = setup({ maxLagEvents: 10, topic });
    // Reads one event per fetch, and the second fetch waits for the test: a lag of 49 meanwhile.
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    let fetches = 0;
    const reader = topic.reader.bind(topic);
    topic.reader = () => {
      const r = reader();
      return {
        ...r,
        fetch: async (p) => {
          if (++fetches === 2) await gate;
          const res = await r.fetch(p);
          const one = res.records.slice(0, 1);
          return { ...res, records: one, next: new Map([[0, p.get(0)! + BigInt(one.length)]]) };
        },
      };
    };
    for (let i = 0; i < 50; i++) topic.append(success(1000 + i));
    behind.uploaded('1', 'A');
    behind.feed.start();
    await waitFor(() => behind.feed.snapshot().received === 1);
    expect(behind.feed.snapshot()).toMatchObject({ state: 'lagging', lag: 49 });
    expect(behind.feed.pace().events).toBe(false);
    release();
    await waitFor(() => behind.feed.snapshot().received === 50);
    expect(behind.feed.snapshot()).toMatchObject({ state: 'flowing', lag: 0 });
  });

  it('slows the tracker to the safety interval while events flow, and back to its normal pace when they stop', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-pace-'));
    const store = BufferStore.openAt(join(dir, 'buffer.db'));
    cleanups.push(() => store.close());
    let polls = 0;
    const pace = { events: true, safetyPollMs: 600_000 };
    const tracker = new StatusTracker({
      store,
      api: {
        getScanStatus: async (requestId) => {
          polls++;
          return { state: 'InProgress', requestId };
        },
      },
      config: deliverySchema.parse({ statusPollMs: 20, statusPollMaxMs: 50 }),
      logger: silentLogger(),
      now: Date.now,
      concurrency: 2,
      onResend: () => {},
      pace: () => pace,
    });
    cleanups.push(() => tracker.stop());
    store.intake.commitIntake([scan('A')], Date.now());
    const b = formBatch(store, {
      mode: 'direct',
      maxScans: 100,
      maxBytes: 1e6,
      nowIso: new Date().toISOString(),
    })!;
    store.batches.updateBatch(b.id, {
      state: 'uploaded',
      requestId: '9',
      uploadedAt: new Date().toISOString(),
      nextAttemptAt: Date.now() + 20,
    });
    tracker.start();
    await new Promise((r) => setTimeout(r, 600));
    expect(polls).toBe(0);
    pace.events = false;
    tracker.wake();
    await waitFor(() => polls > 0, { what: 'a poll at the normal pace' });
  });
});

describe('status events: configuration', () => {
  const upstream = {
    baseUrl: 'https://scan.example.com',
    authUrl: 'https://auth.example.com',
    clientId: 'plant-7',
  };

  it('is off by default, and names the topic {env}-{client_internal_name}-status-event (contract §6), the internal name defaulting to the client id', () => {
    const off = upstreamSchema.parse(upstream);
    expect(off.statusEvents).toMatchObject({ enabled: false, safetyPollMs: 600_000 });
    const on = upstreamSchema.parse({
      ...upstream,
      statusEvents: {
        enabled: true,
        bootstrapServers: ['kafka-1.example.com:9093'],
        environment: 'prod',
      },
    });
    expect(statusEventTopic(on)).toBe('prod-plant-7-status-event');
    const named = upstreamSchema.parse({
      ...upstream,
      statusEvents: {
        enabled: true,
        bootstrapServers: ['k:9093'],
        environment: 'test',
        clientInternalName: 'acme-cells',
      },
    });
    expect(statusEventTopic(named)).toBe('test-acme-cells-status-event');
    const explicit = upstreamSchema.parse({
      ...upstream,
      statusEvents: {
        enabled: true,
        bootstrapServers: ['k:9093'],
        topic: 'sandbox-plant-7-status-event',
      },
    });
    expect(statusEventTopic(explicit)).toBe('sandbox-plant-7-status-event');
  });

  it('refuses an enabled consumer without brokers or topic, a broker without port, and a key it does not know (no password key: the secret never sits in the YAML)', () => {
    const issues = (statusEvents: unknown) => {
      const r = upstreamSchema.safeParse({ ...upstream, statusEvents });
      return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    };
    expect(issues({ enabled: true })).toEqual([
      'statusEvents.bootstrapServers: status events need at least one bootstrap server (host:port)',
      'statusEvents.environment: status events need the environment name of the topic (or topic itself)',
    ]);
    expect(
      issues({ enabled: true, bootstrapServers: ['kafka-1'], environment: 'e' }).join(),
    ).toContain('must be host:port');
    expect(
      issues({ enabled: true, bootstrapServers: ['k:1'], environment: 'e', password: 'x' }).join(),
    ).toContain('password');
  });
});
