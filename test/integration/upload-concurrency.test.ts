import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { deliverySchema, type DeliveryConfig } from '../../src/config/schema.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { Deliverer } from '../../src/delivery/deliverer.js';
import { batchBodyChunks } from '../../src/delivery/sftp-transfer.js';
import type { DeliveryApi, StreamedBody } from '../../src/delivery/types.js';
import { isGatewayError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { UpstreamClient } from '../../src/upstream/client.js';
import { httpError, networkError } from '../../src/upstream/http-errors.js';
import { waitFor } from '../helpers/wait.js';
import { sandboxRefs } from '../helpers/sandbox-scans.js';

/**
 * Uploads in flight at once (`delivery.uploadConcurrency`) against the sandbox over real
 * HTTP: the sandbox holds each answer back (`answerDelayMs`), so uploads really overlap. The only
 * seam is a thin wrapper around the real client that counts the uploads in flight and, where a
 * test says so, fails one call (before sending, or after a real send with its answer "lost").
 */

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

function scan(reference: string): IntakeRecord {
  // Multi-byte characters: a streamed body must count bytes, not characters.
  const body = {
    reference,
    timeStamp: '2026-11-18T07:00:00',
    dcpKey: 'GI-01',
    productModelKey: 'PACK-A',
    supplierKey: 'SUP-0042',
    parents: [],
    attributes: [{ key: 'note', value: 'Größe µ€' }],
  };
  return {
    inputId: 'test',
    receivedAt: new Date(),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: { reference, dcpKey: 'GI-01', instant: new Date(), body: JSON.stringify(body) },
  };
}

type Upload = 'uploadScans' | 'putPresigned' | 'putPresignedStream';
/** A scripted failure of the n-th call (1-based) of an upload: before sending, or after sending with the answer lost. */
type Script = Partial<Record<Upload, Map<number, 'before' | 'answerLost' | 'http503'>>>;

/** The real client, with the uploads in flight counted and some calls failed as scripted. */
class CountingApi implements DeliveryApi {
  inFlight = 0;
  maxInFlight = 0;
  calls: Record<Upload, number> = { uploadScans: 0, putPresigned: 0, putPresignedStream: 0 };
  failed: string[] = [];
  /** Uploads already in flight when each call started, in call order. */
  startedBeside: number[] = [];

  constructor(
    private readonly client: UpstreamClient,
    private readonly script: Script = {},
  ) {}

  private async counted<T>(op: Upload, send: () => Promise<T>): Promise<T> {
    const n = ++this.calls[op];
    const fault = this.script[op]?.get(n);
    this.startedBeside.push(this.inFlight);
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      if (fault === 'before') {
        this.failed.push(`${op}#${n} before`);
        throw networkError('PUT', 'test', new Error('connection reset before sending'));
      }
      if (fault === 'http503') {
        // Answered after a while, as a busy service does: the uploads beside it are in flight meanwhile.
        await new Promise((resolve) => setTimeout(resolve, 200));
        this.failed.push(`${op}#${n} 503`);
        throw httpError('POST', '/api/trace/v3/scans', 503, '', undefined);
      }
      const result = await send();
      if (fault === 'answerLost') {
        this.failed.push(`${op}#${n} answer lost`);
        throw networkError('PUT', 'test', new Error('connection reset while reading the answer'));
      }
      return result;
    } finally {
      this.inFlight--;
    }
  }

  uploadScans(body: string) {
    return this.counted('uploadScans', () => this.client.uploadScans(body));
  }
  requestPresignedUpload() {
    return this.client.requestPresignedUpload();
  }
  putPresigned(url: string, body: string) {
    return this.counted('putPresigned', () => this.client.putPresigned(url, body));
  }
  putPresignedStream(url: string, body: StreamedBody) {
    return this.counted('putPresignedStream', () => this.client.putPresignedStream(url, body));
  }
  getScanStatus(requestId: string) {
    return this.client.getScanStatus(requestId);
  }
}

describe('uploads in flight at once (uploadConcurrency) against the sandbox', () => {
  let sandbox: RunningSandbox;
  let store: BufferStore;
  let client: UpstreamClient;
  let deliverer: Deliverer | undefined;

  beforeEach(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 50 });
    store = BufferStore.openAt(
      join(mkdtempSync(join(tmpdir(), 'sg-upload-concurrency-')), 'buffer.db'),
    );
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
      maxBatchDelayMs: 20,
      statusPollMs: 50,
      statusPollMaxMs: 200,
      retryBaseMs: 50,
      retryMaxMs: 200,
      notFoundGraceMs: 400,
      ...over,
    });

  function start(
    api: DeliveryApi,
    over: Partial<DeliveryConfig>,
    random?: () => number,
  ): Deliverer {
    deliverer = new Deliverer({
      store,
      api,
      config: config(over),
      logger: silentLogger(),
      ...(random ? { random } : {}),
    });
    deliverer.start();
    return deliverer;
  }

  it.each([
    ['presigned', 3, 'putPresignedStream'],
    ['direct', 2, 'uploadScans'],
  ] as const)(
    '%s: keeps %i uploads in flight at once, never more, and delivers every scan once',
    async (mode, bound, op) => {
      sandbox.setFaults({ answerDelayMs: 300 });
      const refs = Array.from({ length: 1000 }, (_, i) => `${mode}-${i}`);
      store.intake.commitIntake(refs.map(scan), Date.now());
      const api = new CountingApi(client);
      const d = start(api, {
        mode,
        uploadConcurrency: bound,
        maxBatchScans: 100,
        presignedMaxScans: 100,
      });
      await waitFor(() => store.reports.scanCounts().delivered === 1000, {
        timeoutMs: 30_000,
        what: 'every scan delivered',
      });
      // Ten batches, each answer held 300 ms: the bound is reached, and never passed.
      expect(api.maxInFlight).toBe(bound);
      expect(api.calls[op]).toBe(10);
      // Pre-signed bodies are streamed from the buffer, never built as one string.
      expect(api.calls.putPresigned).toBe(0);
      const received = await sandboxRefs(sandbox);
      expect(received.sort()).toEqual([...refs].sort());
      expect(d.snapshot()).toMatchObject({ possibleDuplicates: 0, consecutiveFailures: 0 });
    },
  );

  it('uploadConcurrency 1 sends one batch at a time', async () => {
    sandbox.setFaults({ answerDelayMs: 100 });
    store.intake.commitIntake(
      Array.from({ length: 300 }, (_, i) => scan(`one-${i}`)),
      Date.now(),
    );
    const api = new CountingApi(client);
    start(api, { mode: 'presigned', uploadConcurrency: 1, presignedMaxScans: 100 });
    await waitFor(() => store.reports.scanCounts().delivered === 300, { timeoutMs: 30_000 });
    expect(api.maxInFlight).toBe(1);
    expect(api.calls.putPresignedStream).toBe(3);
  });

  it('pre-signed: a PUT that fails before sending and one whose answer is lost, beside others in flight, lose and double nothing', async () => {
    sandbox.setFaults({ answerDelayMs: 300 });
    const refs = Array.from({ length: 1000 }, (_, i) => `pf-${i}`);
    store.intake.commitIntake(refs.map(scan), Date.now());
    // The 2nd PUT reaches the service but its answer is lost; the 3rd never leaves.
    const api = new CountingApi(client, {
      putPresignedStream: new Map([
        [2, 'answerLost'],
        [3, 'before'],
      ]),
    });
    const d = start(api, { mode: 'presigned', uploadConcurrency: 3, presignedMaxScans: 100 });
    await waitFor(() => store.reports.scanCounts().delivered === 1000, {
      timeoutMs: 30_000,
      what: 'every scan delivered',
    });
    expect(api.failed.sort()).toEqual([
      'putPresignedStream#2 answer lost',
      'putPresignedStream#3 before',
    ]);
    // Uploads overlapped the failures, and the one that arrived was not sent again (its status said so).
    expect(api.maxInFlight).toBe(3);
    expect(api.calls.putPresignedStream).toBe(11);
    const received = await sandboxRefs(sandbox);
    expect(received).toHaveLength(1000);
    expect(new Set(received).size).toBe(1000);
    expect(d.snapshot()).toMatchObject({
      possibleDuplicates: 0,
      consecutiveFailures: 0,
      circuit: 'closed',
    });
    expect(store.batches.batchesInState('done')).toHaveLength(10);
  });

  it('direct: a 503 to one POST beside others in flight is retried alone; nothing lost, nothing doubled, nothing counted', async () => {
    sandbox.setFaults({ answerDelayMs: 300 });
    const refs = Array.from({ length: 600 }, (_, i) => `df-${i}`);
    store.intake.commitIntake(refs.map(scan), Date.now());
    const api = new CountingApi(client, { uploadScans: new Map([[2, 'http503']]) });
    const d = start(api, { mode: 'direct', uploadConcurrency: 3, maxBatchScans: 100 });
    await waitFor(() => store.reports.scanCounts().delivered === 600, {
      timeoutMs: 30_000,
      what: 'every scan delivered',
    });
    expect(api.failed).toEqual(['uploadScans#2 503']);
    expect(api.calls.uploadScans).toBe(7);
    const received = await sandboxRefs(sandbox);
    expect(received.sort()).toEqual([...refs].sort());
    expect(d.snapshot()).toMatchObject({ possibleDuplicates: 0, consecutiveFailures: 0 });
  });

  it('starts nothing new while the circuit is open, and one upload at a time after a failure until one succeeds', async () => {
    store.intake.commitIntake(
      Array.from({ length: 500 }, (_, i) => `cb-${i}`).map(scan),
      Date.now(),
    );
    // Three failures in a row open the circuit; every call before the fourth fails before sending.
    sandbox.setFaults({ answerDelayMs: 100 });
    const api = new CountingApi(client, {
      uploadScans: new Map([
        [1, 'http503'],
        [2, 'http503'],
        [3, 'http503'],
      ]),
    });
    // No jitter: each backoff is the full 3 s, long beside the 150 ms looked at below, so the
    // circuit is still open then on however slow a machine.
    const d = start(
      api,
      {
        mode: 'direct',
        uploadConcurrency: 3,
        maxBatchScans: 100,
        retryBaseMs: 3000,
        retryMaxMs: 3000,
      },
      () => 1,
    );
    await waitFor(() => d.snapshot().consecutiveFailures === 3, { timeoutMs: 30_000 });
    expect(d.snapshot().circuit).toBe('open');
    const callsWhenOpen = api.calls.uploadScans;
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(api.calls.uploadScans).toBe(callsWhenOpen);
    await waitFor(() => store.reports.scanCounts().delivered === 500, { timeoutMs: 30_000 });
    // Three failed side by side (in flight before the first failed), then five went through.
    expect(api.calls.uploadScans).toBe(8);
    expect(api.startedBeside.slice(0, 3).some((n) => n > 0)).toBe(true);
    // The fourth, once the backoff was over, went alone (the half-open probe); more only after it succeeded.
    expect(api.startedBeside[3]).toBe(0);
    expect(d.snapshot()).toMatchObject({ possibleDuplicates: 0, circuit: 'closed' });
  });
});

describe('pre-signed bodies streamed from the buffer', () => {
  let store: BufferStore;
  let server: Server | undefined;
  afterEach(async () => {
    store?.close();
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    server = undefined;
  });

  /** A real HTTP server that keeps each PUT's bytes and content-length as received. */
  async function recorder(): Promise<{
    url: string;
    puts: { length: string | undefined; body: Buffer }[];
  }> {
    const puts: { length: string | undefined; body: Buffer }[] = [];
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        puts.push({ length: req.headers['content-length'], body: Buffer.concat(chunks) });
        res.writeHead(200).end();
      });
      req.on('error', () => res.destroy());
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/bucket/object?X-Amz-Signature=abc`,
      puts,
    };
  }

  function batchOf(count: number, prefix: string) {
    store = BufferStore.openAt(join(mkdtempSync(join(tmpdir(), 'sg-stream-body-')), 'buffer.db'));
    // Sizes from a few bytes to 40 KiB, multi-byte text: pages of several sizes, bytes ≠ characters.
    const records = Array.from({ length: count }, (_, i) => {
      const r = scan(`${prefix}-${i}`);
      r.scan!.body = JSON.stringify({
        reference: `${prefix}-${i}`,
        pad: 'ü€'.repeat((i * 7919) % 13_000),
      });
      return r;
    });
    store.intake.commitIntake(records, Date.now());
    return formBatch(store, {
      mode: 'presigned',
      maxScans: count,
      maxBytes: 64 * 2 ** 20,
      nowIso: new Date().toISOString(),
    })!;
  }

  it("the streamed body has exactly the bytes of batchBody and of the batch's recorded size", async () => {
    const batch = batchOf(700, 'st');
    const expected = Buffer.from(store.batches.batchBody(batch.id));
    const chunks: Buffer[] = [];
    for await (const c of batchBodyChunks(store.batches, batch.id)) chunks.push(c);
    const streamed = Buffer.concat(chunks);
    expect(chunks.length).toBeGreaterThan(3);
    expect(streamed.length).toBe(batch.bytes);
    expect(streamed.equals(expected)).toBe(true);
  });

  it('the client sends it with content-length = the recorded bytes, byte for byte, over real HTTP', async () => {
    const batch = batchOf(300, 'http');
    const { url, puts } = await recorder();
    const client = new UpstreamClient({
      baseUrl: 'http://127.0.0.1:1',
      authUrl: 'http://127.0.0.1:1',
      clientId: 'x',
      clientSecret: 'y',
    });
    try {
      await client.putPresignedStream(url, {
        bytes: batch.bytes,
        chunks: () => batchBodyChunks(store.batches, batch.id),
      });
    } finally {
      await client.close();
    }
    expect(puts).toHaveLength(1);
    expect(puts[0]!.length).toBe(String(batch.bytes));
    expect(puts[0]!.body.equals(Buffer.from(store.batches.batchBody(batch.id)))).toBe(true);
  });

  it('a stream that does not match its content-length fails as a retryable network error, and the server takes nothing', async () => {
    const batch = batchOf(50, 'short');
    const { url, puts } = await recorder();
    const client = new UpstreamClient({
      baseUrl: 'http://127.0.0.1:1',
      authUrl: 'http://127.0.0.1:1',
      clientId: 'x',
      clientSecret: 'y',
    });
    let caught: unknown;
    try {
      await client.putPresignedStream(url, {
        bytes: batch.bytes + 10,
        chunks: () => batchBodyChunks(store.batches, batch.id),
      });
    } catch (err) {
      caught = err;
    } finally {
      await client.close();
    }
    expect(isGatewayError(caught) && caught.retryable).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(puts.filter((p) => p.body.length === batch.bytes + 10)).toEqual([]);
  });
});
