import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { deliverySchema, type DeliveryConfig } from '../../src/config/schema.js';
import { Deliverer } from '../../src/delivery/deliverer.js';
import { BATCH_THREAD_MIN_BODY_BYTES, BatchThread } from '../../src/delivery/batch-thread.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { silentLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { UpstreamClient } from '../../src/upstream/client.js';
import { waitFor } from '../helpers/wait.js';
import { Batcher, formBatch } from '../../src/delivery/batcher.js';
import { sandboxRefs } from '../helpers/sandbox-scans.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { traceItem } from '../../src/queries/items.js';
import { formatTrace } from '../../src/cli/trace-command.js';
import { queriesOf } from '../helpers/queries.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

function scan(reference: string, dcpKey = 'GI-01'): IntakeRecord {
  const body = {
    reference,
    timeStamp: '2026-11-18T07:00:00',
    dcpKey,
    productModelKey: 'PACK-A',
    supplierKey: 'SUP-0042',
    parents: [],
    attributes: [],
  };
  return {
    inputId: 'test',
    receivedAt: new Date(),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: { reference, dcpKey, instant: new Date(), body: JSON.stringify(body) },
  };
}

describe('delivery against the sandbox over real HTTP', () => {
  let sandbox: RunningSandbox;
  let store: BufferStore;
  let client: UpstreamClient;
  let deliverer: Deliverer | undefined;

  beforeEach(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 100 });
    store = BufferStore.openAt(join(mkdtempSync(join(tmpdir(), 'sg-delivery-')), 'buffer.db'));
    client = new UpstreamClient({
      baseUrl: sandbox.url,
      authUrl: sandbox.url,
      clientId: 'demo-client',
      clientSecret: SECRET,
    });
  });
  afterEach(async () => {
    await deliverer?.stop();
    deliverer = undefined;
    await client.close();
    store.close();
    await sandbox.close();
  });

  const config = (over: Partial<DeliveryConfig>): DeliveryConfig =>
    deliverySchema.parse({
      maxBatchDelayMs: 50,
      statusPollMs: 50,
      statusPollMaxMs: 200,
      retryBaseMs: 20,
      retryMaxMs: 200,
      ...over,
    });

  function start(over: Partial<DeliveryConfig>): Deliverer {
    deliverer = new Deliverer({ store, api: client, config: config(over), logger: silentLogger() });
    deliverer.start();
    return deliverer;
  }

  it('sends direct bodies of 256 KiB or more as the thread read them, every scan once', async () => {
    // About 330 bytes a scan: a batch of 1,000 is over the size from which the thread reads it.
    const pad = 'x'.repeat(180);
    store.intake.commitIntake(
      Array.from({ length: 3000 }, (_, i) => scan(`P-${i}-${pad}`)),
      Date.now(),
    );
    const bodies = vi.spyOn(BatchThread.prototype, 'body');
    try {
      deliverer = new Deliverer({
        store,
        api: client,
        config: config({ mode: 'direct', maxBatchScans: 1000 }),
        logger: silentLogger(),
      });
      deliverer.start();
      await waitFor(() => store.reports.scanCounts().delivered === 3000, { timeoutMs: 60_000 });
      const sizes = store.batches.batchesInState('done').map((b) => b.bytes);
      expect(sizes).toHaveLength(3);
      expect(sizes.every((b) => b >= BATCH_THREAD_MIN_BODY_BYTES)).toBe(true);
      expect(bodies).toHaveBeenCalledTimes(3);
      const refs = await sandboxRefs(sandbox);
      expect(new Set(refs).size).toBe(3000);
      expect(refs.length).toBe(3000);
    } finally {
      bodies.mockRestore();
    }
  });

  it('delivers every scan once, each full batch formed in the thread, while the line commits beside it', async () => {
    store.intake.commitIntake(
      Array.from({ length: 6000 }, (_, i) => scan(`B-${i}`)),
      Date.now(),
    );
    const log = memoryLogger('debug');
    deliverer = new Deliverer({
      store,
      api: client,
      config: config({ mode: 'direct', maxBatchScans: 1000, uploadConcurrency: 2 }),
      logger: log.logger,
    });
    deliverer.start();
    // The line goes on while the backlog drains: its commits share the file with the thread's.
    for (let i = 0; i < 20; i++) {
      store.intake.commitIntake([scan(`L-${i}`)], Date.now());
      deliverer.wake();
      await new Promise((r) => setTimeout(r, 10));
    }
    await waitFor(() => store.reports.scanCounts().delivered === 6020, { timeoutMs: 60_000 });
    const refs = await sandboxRefs(sandbox);
    expect(refs.length).toBe(6020);
    expect(new Set(refs).size).toBe(6020);
    const formed = log.parsed().filter((l) => l.msg === 'batch formed');
    const inThread = formed.filter((l) => l.thread === true);
    // Six full batches of the backlog at least went through the thread; the line's last few
    // scans, due by age, were formed in process.
    expect(inThread.length).toBeGreaterThanOrEqual(6);
    expect(inThread.every((l) => l.scans === 1000)).toBe(true);
    expect(formed.some((l) => l.thread === undefined)).toBe(true);
  });

  it('sends a batch the thread writes in steps only once it is whole, every scan once', async () => {
    store.intake.commitIntake(
      Array.from({ length: 12_000 }, (_, i) => scan(`G-${i}`)),
      Date.now(),
    );
    // The thread's answers wait at a gate: the first batch stands in the buffer as `ready` from
    // its first step of 1,000 scans on, and the event loop has not heard of it, while the
    // uploader's loop turns.
    type Write = (body: { op: string }, ...rest: unknown[]) => Promise<unknown>;
    const proto = BatchThread.prototype as unknown as { request: Write };
    const request = proto.request;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const ops: string[] = [];
    const requests = vi.spyOn(proto, 'request').mockImplementation(async function (
      this: unknown,
      body,
      ...rest
    ) {
      ops.push(body.op);
      const reply = await request.call(this, body, ...rest);
      if (body.op === 'form') await gate;
      return reply;
    });
    const looked = vi.spyOn(Batcher.prototype, 'unfinished');
    try {
      start({ mode: 'direct', maxBatchScans: 5000, uploadConcurrency: 3 });
      await waitFor(() => store.batches.batchesInState('ready').length > 0, { timeoutMs: 30_000 });
      expect(ops).toEqual(['form']);
      const [growing] = store.batches.batchesInState('ready');
      expect(growing!.scanCount % 1000).toBe(0);
      // The loop looks for batches to send three more times before the thread's answer.
      const before = looked.mock.calls.length;
      for (let i = 0; i < 3; i++) {
        const seen = looked.mock.calls.length;
        deliverer!.wake();
        await waitFor(() => looked.mock.calls.length > seen, { timeoutMs: 10_000 });
      }
      expect(looked.mock.calls.length).toBeGreaterThanOrEqual(before + 3);
      expect(store.batches.batch(growing!.id)?.state).toBe('ready');
      expect(await sandboxRefs(sandbox)).toEqual([]);

      open();
      await waitFor(() => store.reports.scanCounts().delivered === 12_000, { timeoutMs: 60_000 });
      const counts = store.batches.batchesInState('done').map((b) => b.scanCount);
      expect(counts).toEqual([5000, 5000, 2000]);
      const refs = await sandboxRefs(sandbox);
      expect(refs.length).toBe(12_000);
      expect(new Set(refs).size).toBe(12_000);
    } finally {
      open();
      requests.mockRestore();
      looked.mockRestore();
    }
  });

  it('delivers in batches by count and records each batch processed', async () => {
    store.intake.commitIntake(
      Array.from({ length: 2500 }, (_, i) => scan(`C-${i}`)),
      Date.now(),
    );
    start({ mode: 'direct', maxBatchScans: 1000 });
    await waitFor(() => store.batches.batchesInState('done').length === 3, { timeoutMs: 30_000 });
    expect((await sandboxRefs(sandbox)).length).toBe(2500);
    expect(store.batches.batchesInState('done').map((b) => b.scanCount)).toEqual([1000, 1000, 500]);
    expect(store.reports.scanCounts()).toEqual({ delivered: 2500 });
  });

  it('stores each upstream failure on its scan', async () => {
    store.intake.commitIntake(
      [scan('OK-1'), scan('BAD-1', 'NO-SUCH-DCP'), scan('OK-2')],
      Date.now(),
    );
    start({ mode: 'direct' });
    await waitFor(() => store.batches.batchesInState('done').length === 1, { timeoutMs: 30_000 });
    const [batch] = store.batches.batchesInState('done');
    expect(batch).toMatchObject({ upstreamState: 'HasFailures', processed: 3, failed: 1 });
    expect(queriesOf(store).recentProblems(5)).toMatchObject([
      { kind: 'failed', reference: 'BAD-1', reason: 'Invalid DCP' },
    ]);
  });

  it('delivers every scan exactly once through pre-signed uploads', async () => {
    store.intake.commitIntake(
      Array.from({ length: 3000 }, (_, i) => scan(`P-${i}`)),
      Date.now(),
    );
    start({ mode: 'presigned', presignedMaxScans: 1000 });
    await waitFor(() => store.reports.scanCounts().delivered === 3000, { timeoutMs: 30_000 });
    const refs = await sandboxRefs(sandbox);
    expect(refs).toHaveLength(3000);
    expect(new Set(refs).size).toBe(3000);
  });

  it('does not send a pre-signed batch again when the service already has it (crash after the PUT)', async () => {
    store.intake.commitIntake(
      Array.from({ length: 10 }, (_, i) => scan(`X-${i}`)),
      Date.now(),
    );
    const batch = formBatch(store, {
      maxScans: 100,
      maxBytes: 1e9,
      mode: 'presigned',
      nowIso: new Date().toISOString(),
    })!;
    const address = await client.requestPresignedUpload();
    // As the deliverer does: the start of the PUT is written down before the PUT.
    store.batches.updateBatch(batch.id, {
      state: 'presigned',
      requestId: address.requestId,
      presignedUrl: address.url,
      presignedExpiresAt: Date.now() + 30 * 60_000,
      putStartedAt: Date.now(),
    });
    await client.putPresigned(address.url, store.batches.batchBody(batch.id));
    // The process "crashed" here: the PUT arrived, its success was never recorded.
    start({ mode: 'presigned' });
    await waitFor(() => store.batches.batchesInState('done').length === 1, { timeoutMs: 30_000 });
    expect(await sandboxRefs(sandbox)).toHaveLength(10);
    expect(deliverer!.snapshot().possibleDuplicates).toBe(0);
  });

  it('sends a pre-signed batch whose PUT never arrived (crash before the PUT)', async () => {
    store.intake.commitIntake(
      Array.from({ length: 10 }, (_, i) => scan(`Y-${i}`)),
      Date.now(),
    );
    const batch = formBatch(store, {
      maxScans: 100,
      maxBytes: 1e9,
      mode: 'presigned',
      nowIso: new Date().toISOString(),
    })!;
    const address = await client.requestPresignedUpload();
    store.batches.updateBatch(batch.id, {
      state: 'presigned',
      requestId: address.requestId,
      presignedUrl: address.url,
      presignedExpiresAt: Date.now() + 30 * 60_000,
    });
    start({ mode: 'presigned' });
    await waitFor(() => store.batches.batchesInState('done').length === 1, { timeoutMs: 30_000 });
    expect(await sandboxRefs(sandbox)).toHaveLength(10);
    expect(store.batches.batch(batch.id)?.requestId).toBe(address.requestId);
  });

  it('PUTs again at once to the same single-use address when a started PUT never arrived (crash during the PUT): no NotFound grace', async () => {
    store.intake.commitIntake(
      Array.from({ length: 10 }, (_, i) => scan(`Z-${i}`)),
      Date.now(),
    );
    const batch = formBatch(store, {
      maxScans: 100,
      maxBytes: 1e9,
      mode: 'presigned',
      nowIso: new Date().toISOString(),
    })!;
    const address = await client.requestPresignedUpload();
    store.batches.updateBatch(batch.id, {
      state: 'presigned',
      requestId: address.requestId,
      presignedUrl: address.url,
      presignedExpiresAt: Date.now() + 30 * 60_000,
      putStartedAt: Date.now(),
    });
    // Crashed before the body reached the service. The address takes one upload (§4.4, §8), so a
    // second PUT cannot double: it is made without waiting the grace. The grace is ten minutes, so
    // "without waiting it" holds on however slow a machine: done within a wait of one minute.
    const graceMs = 600_000;
    const started = Date.now();
    start({ mode: 'presigned', notFoundGraceMs: graceMs });
    await waitFor(() => store.batches.batchesInState('done').length === 1, { timeoutMs: 60_000 });
    expect(Date.now() - started).toBeLessThan(graceMs);
    expect(await sandboxRefs(sandbox)).toHaveLength(10);
    expect(store.batches.batch(batch.id)).toMatchObject({
      requestId: address.requestId,
      upstreamState: 'Success',
    });
    expect(deliverer!.snapshot().possibleDuplicates).toBe(0);
  });

  it('counts a direct upload whose answer was lost as a possible duplicate of its batch, until the status of the batch is known', async () => {
    // An outage that cuts every answer: the service takes each upload, the gateway never hears.
    sandbox.setFaults({ lostAnswerRate: 1 });
    store.intake.commitIntake(
      Array.from({ length: 5 }, (_, i) => scan(`L-${i}`)),
      Date.now(),
    );
    start({ mode: 'direct' });
    await waitFor(async () => (await sandboxRefs(sandbox)).length >= 10, { timeoutMs: 30_000 });
    // Sent again and not answered yet: counted, on the batch.
    await waitFor(() => deliverer!.snapshot().possibleDuplicates === 5, { timeoutMs: 30_000 });
    expect(deliverer!.snapshot().possibleDuplicateUploads).toBe(1);
    const [batchId] = [
      ...new Set(traceItem(sqlOf(store), 'L-0').scans.map((s) => s.batch?.id)),
    ] as number[];
    expect(formatTrace(traceItem(sqlOf(store), 'L-3'), 'UTC')).toContain(
      `possible duplicate: batch ${batchId} was sent again after an upload's answer was lost`,
    );

    sandbox.setFaults({ lostAnswerRate: 0 });
    await waitFor(() => store.reports.scanCounts().delivered === 5, { timeoutMs: 30_000 });
    const refs = await sandboxRefs(sandbox);
    const snapshot = deliverer!.snapshot();
    // The service's status of the batch is known: no longer a possible duplicate; the lifetime count stays.
    expect(snapshot).toMatchObject({ possibleDuplicates: 0, possibleDuplicateUploads: 0 });
    expect(refs.length - 5).toBeLessThanOrEqual(snapshot.possibleDuplicatesTotal);
    expect(store.reports.possibleDuplicates().totalScans).toBe(snapshot.possibleDuplicatesTotal);
    const trace = formatTrace(traceItem(sqlOf(store), 'L-3'), 'UTC');
    expect(trace).toContain(
      `batch ${batchId} was sent again after an upload's answer was lost; the service's status of it is known (Success)`,
    );
  });

  it('asks the service every few seconds after a failure, so catch-up does not wait for a long backoff', async () => {
    store.intake.commitIntake([scan('O-0')], Date.now());
    // A backoff of about ten minutes after the first failure (random near 1: no short draw).
    deliverer = new Deliverer({
      store,
      api: client,
      config: config({ mode: 'direct', retryBaseMs: 600_000, retryMaxMs: 600_000 }),
      logger: silentLogger(),
      random: () => 0.99,
    });
    deliverer.start();
    await waitFor(() => store.reports.scanCounts().delivered === 1, { timeoutMs: 30_000 });
    sandbox.setFaults({ errorRate: 1 });
    store.intake.commitIntake(
      Array.from({ length: 5 }, (_, i) => scan(`O-${i + 1}`)),
      Date.now(),
    );
    deliverer.wake();
    await waitFor(() => deliverer!.snapshot().consecutiveFailures >= 1, { timeoutMs: 30_000 });
    const [waiting] = store.batches.batchesInState('ready');
    const scheduledAt = waiting!.nextAttemptAt;
    expect(scheduledAt - Date.now()).toBeGreaterThan(500_000);
    sandbox.setFaults({ errorRate: 0 });
    await waitFor(() => store.reports.scanCounts().delivered === 6, {
      timeoutMs: 120_000,
      what: 'the outage caught up',
    });
    // Delivered long before the backoff's try: a probe found the service back.
    expect(Date.now()).toBeLessThan(scheduledAt);
    expect(deliverer.snapshot().consecutiveFailures).toBe(0);
  });

  it('asks the service after a failure even before any upload was answered (requestId 0, NotFound)', async () => {
    // Down from the start: no batch was ever accepted, so the gateway has no requestId of its own.
    sandbox.setFaults({ errorRate: 1 });
    store.intake.commitIntake(
      Array.from({ length: 3 }, (_, i) => scan(`F-${i}`)),
      Date.now(),
    );
    deliverer = new Deliverer({
      store,
      api: client,
      config: config({ mode: 'direct', retryBaseMs: 600_000, retryMaxMs: 600_000 }),
      logger: silentLogger(),
      random: () => 0.99,
    });
    deliverer.start();
    await waitFor(() => deliverer!.snapshot().consecutiveFailures >= 1, { timeoutMs: 30_000 });
    expect(store.batches.latestRequestId()).toBeUndefined();
    const [waiting] = store.batches.batchesInState('ready');
    const scheduledAt = waiting!.nextAttemptAt;
    expect(scheduledAt - Date.now()).toBeGreaterThan(500_000);
    sandbox.setFaults({ errorRate: 0 });
    await waitFor(() => store.reports.scanCounts().delivered === 3, {
      timeoutMs: 120_000,
      what: 'the first upload caught up',
    });
    expect(Date.now()).toBeLessThan(scheduledAt);
  });

  it('splits a batch the service refuses as too large (413) until it fits', async () => {
    sandbox.setFaults({ directLimitBytes: 20_000 });
    store.intake.commitIntake(
      Array.from({ length: 400 }, (_, i) => scan(`S-${i}`)),
      Date.now(),
    );
    start({ mode: 'direct', maxBatchScans: 400 });
    await waitFor(() => store.reports.scanCounts().delivered === 400, { timeoutMs: 30_000 });
    const refs = await sandboxRefs(sandbox);
    expect(refs).toHaveLength(400);
    expect(new Set(refs).size).toBe(400);
    for (const b of store.batches.batchesInState('done'))
      expect(b.bytes).toBeLessThanOrEqual(20_000);
    expect(store.batches.batchesInState('done').length).toBeGreaterThan(2);
  });

  it('retries through 5xx, 429 with Retry-After and resets until every scan arrived', async () => {
    sandbox.setFaults({ errorRate: 0.3, rateLimitRate: 0.1, retryAfterSec: 1, resetRate: 0.1 });
    store.intake.commitIntake(
      Array.from({ length: 2000 }, (_, i) => scan(`F-${i}`)),
      Date.now(),
    );
    start({ mode: 'direct', maxBatchScans: 200 });
    await waitFor(() => store.reports.scanCounts().delivered === 2000, { timeoutMs: 60_000 });
    const refs = await sandboxRefs(sandbox);
    expect(new Set(refs).size).toBe(2000);
    // Resets can lose an answer after the service accepted the batch: those resends are counted.
    const duplicates = refs.length - 2000;
    expect(duplicates).toBeLessThanOrEqual(deliverer!.snapshot().possibleDuplicatesTotal * 200);
  });

  it('follows batches across a restart of the service: uploaded before, processed after, none sent twice', async () => {
    sandbox.setFaults({ processingDelayMs: 1500 });
    store.intake.commitIntake(
      Array.from({ length: 300 }, (_, i) => scan(`R-${i}`)),
      Date.now(),
    );
    start({ mode: 'presigned', presignedMaxScans: 100, notFoundGraceMs: 400 });
    await waitFor(() => store.batches.batchesInState('uploaded').length === 3, {
      timeoutMs: 30_000,
    });
    await sandbox.restart({ downMs: 500 });
    sandbox.setFaults({ processingDelayMs: null });
    await waitFor(() => store.batches.batchesInState('done').length === 3, { timeoutMs: 30_000 });
    expect(store.reports.scanCounts()).toEqual({ delivered: 300 });
    expect((await sandboxRefs(sandbox)).sort()).toEqual(
      Array.from({ length: 300 }, (_, i) => `R-${i}`).sort(),
    );
    expect(store.batches.batchesInState('done').map((b) => b.upstreamState)).toEqual([
      'Success',
      'Success',
      'Success',
    ]);
    expect(deliverer!.snapshot().possibleDuplicates).toBe(0);
  });

  it('sends nothing while the token endpoint is down, and everything once it is back', async () => {
    sandbox.setFaults({ tokenResetRate: 1 });
    store.intake.commitIntake(
      Array.from({ length: 50 }, (_, i) => scan(`T-${i}`)),
      Date.now(),
    );
    start({ mode: 'direct' });
    const tokenAttempts = async () =>
      (
        (await (await fetch(`${sandbox.url}/_sandbox/requests`)).json()) as {
          requests: { path: string; status: number }[];
        }
      ).requests.filter((r) => r.path === '/oauth2/token');
    await waitFor(async () => (await tokenAttempts()).length >= 3, { timeoutMs: 30_000 });
    expect(await sandboxRefs(sandbox)).toHaveLength(0);
    expect((await tokenAttempts()).every((r) => r.status === 0)).toBe(true);
    sandbox.setFaults({ tokenResetRate: null });
    await waitFor(() => store.reports.scanCounts().delivered === 50, { timeoutMs: 30_000 });
    expect(store.reports.scanCounts()).toEqual({ delivered: 50 });
    expect(await sandboxRefs(sandbox)).toHaveLength(50);
    expect(deliverer!.snapshot().possibleDuplicates).toBe(0);
  });
});
