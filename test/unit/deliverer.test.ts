import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { deliverySchema, type DeliveryConfig } from '../../src/config/schema.js';
import { Deliverer } from '../../src/delivery/deliverer.js';
import type { DeliveryApi, ScanStatusLike } from '../../src/delivery/types.js';
import { ErrorCodes, GatewayError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { httpError, networkError } from '../../src/upstream/http-errors.js';
import { waitFor } from '../helpers/wait.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { queriesOf } from '../helpers/queries.js';

/** A scripted upstream: each call takes the next scripted behaviour of its kind, or the default. */
class FakeApi implements DeliveryApi {
  calls: { op: string; at: number; body?: string; url?: string; requestId?: string }[] = [];
  upload: Array<() => Promise<{ requestId: string }>> = [];
  put: Array<() => Promise<void>> = [];
  status: Array<(requestId: string) => Promise<ScanStatusLike>> = [];
  /** What the service holds: requestId → scan count. */
  received = new Map<string, number>();
  private next = 1000;

  constructor(private readonly clock: () => number) {}

  async uploadScans(body: string) {
    this.calls.push({ op: 'upload', at: this.clock(), body });
    const scripted = this.upload.shift();
    if (scripted) return scripted();
    const requestId = String(this.next++);
    this.received.set(requestId, (JSON.parse(body) as unknown[]).length);
    return { requestId };
  }
  async requestPresignedUpload() {
    const requestId = String(this.next++);
    this.calls.push({ op: 'presign', at: this.clock(), requestId });
    return { url: `http://s3.test/${requestId}`, requestId };
  }
  async putPresigned(url: string, body: string) {
    this.calls.push({ op: 'put', at: this.clock(), url, body });
    const scripted = this.put.shift();
    if (scripted) return scripted();
    this.received.set(url.split('/').pop()!, (JSON.parse(body) as unknown[]).length);
  }
  async getScanStatus(requestId: string): Promise<ScanStatusLike> {
    this.calls.push({ op: 'status', at: this.clock(), requestId });
    const scripted = this.status.shift();
    if (scripted) return scripted(requestId);
    const count = this.received.get(requestId);
    return count === undefined
      ? { state: 'NotFound', requestId }
      : { state: 'Success', requestId, processed: count };
  }
  ops(op: string) {
    return this.calls.filter((c) => c.op === op);
  }
}

function scan(reference: string): IntakeRecord {
  const body = JSON.stringify({
    reference,
    timeStamp: '2026-11-18T07:00:00',
    dcpKey: 'GI-01',
    productModelKey: 'PACK-A',
    parents: [],
    attributes: [],
  });
  return {
    inputId: 'in',
    receivedAt: new Date(0),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: { reference, dcpKey: 'GI-01', instant: new Date(0), body },
  };
}

let store: BufferStore;
let deliverer: Deliverer | undefined;
afterEach(async () => {
  await deliverer?.stop();
  deliverer = undefined;
  store?.close();
});

/** A clock the test moves; the deliverer's waits are real but short, its decisions use this clock. */
function setup(over: Partial<DeliveryConfig>, random = () => 0) {
  store = BufferStore.openAt(join(mkdtempSync(join(tmpdir(), 'sg-deliverer-')), 'buffer.db'));
  const clock = { t: 1_700_000_000_000 };
  const now = () => clock.t;
  const api = new FakeApi(now);
  const config = deliverySchema.parse({
    maxBatchDelayMs: 0,
    statusPollMs: 100,
    statusPollMaxMs: 1000,
    retryBaseMs: 1000,
    retryMaxMs: 8000,
    notFoundGraceMs: 10_000,
    ...over,
  });
  const make = () => new Deliverer({ store, api, config, logger: silentLogger(), now, random });
  return {
    clock,
    api,
    make,
    start() {
      deliverer = make();
      deliverer.start();
      return deliverer;
    },
    advance(ms: number) {
      clock.t += ms;
      deliverer?.wake();
    },
  };
}

describe('deliverer: retries, Retry-After and the circuit', () => {
  it('honours Retry-After, opens the circuit after three failures, half-opens when the wait is over, closes on success', async () => {
    const t = setup({ mode: 'direct' });
    const tooMany = () => Promise.reject(httpError('POST', '/api/trace/v3/scans', 429, '', 5000));
    t.api.upload.push(tooMany, tooMany, tooMany);
    store.intake.commitIntake([scan('A'), scan('B')], t.clock.t);
    const d = t.start();
    for (let n = 1; n <= 3; n++) {
      await waitFor(() => t.api.ops('upload').length === n);
      await waitFor(() => d.snapshot().consecutiveFailures === n);
      // Not before the service said: nothing happens while the clock stands still.
      await new Promise((resolve) => setTimeout(resolve, 30));
      expect(t.api.ops('upload')).toHaveLength(n);
      if (n < 3) t.advance(5000);
    }
    expect(d.snapshot()).toMatchObject({
      circuit: 'open',
      consecutiveFailures: 3,
      lastError: { message: expect.stringContaining('429') },
    });
    const [first, second, third] = t.api.ops('upload');
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(5000);
    expect(third!.at - second!.at).toBeGreaterThanOrEqual(5000);

    t.clock.t += 5000; // the wait is over, the next try not yet made
    expect(d.snapshot().circuit).toBe('half-open');
    t.advance(0);
    await waitFor(() => store.batches.batchesInState('uploaded').length === 1);
    expect(d.snapshot()).toMatchObject({
      circuit: 'closed',
      consecutiveFailures: 0,
      possibleDuplicates: 0,
    });
    t.advance(100);
    await waitFor(() => store.reports.scanCounts().delivered === 2);
  });

  it('backs off exponentially with full jitter between retries of a 5xx', async () => {
    const t = setup({ mode: 'direct', retryBaseMs: 1000, retryMaxMs: 8000 }, () => 0.999);
    const fail = () => Promise.reject(httpError('POST', '/api/trace/v3/scans', 503, '', undefined));
    t.api.upload.push(fail, fail, fail, fail, fail);
    // Its status requests fail too (the outage probe, due once a try is more than 5 s away, finds
    // the service still down and changes nothing).
    const down = () =>
      Promise.reject(httpError('GET', '/api/trace/v3/scans/0/status', 503, '', undefined));
    t.api.status.push(...Array.from({ length: 10 }, () => down));
    store.intake.commitIntake([scan('A')], t.clock.t);
    t.start();
    const expected = [999, 1998, 3996, 7992, 7992];
    for (let n = 1; n <= 5; n++) {
      await waitFor(
        () =>
          store.batches.batchesInState('ready')[0]?.attempts === n &&
          store.batches.batchesInState('ready')[0]?.lastError !== null,
      );
      const b = store.batches.batchesInState('ready')[0]!;
      expect(b.nextAttemptAt - t.clock.t).toBe(expected[n - 1]);
      t.advance(expected[n - 1]!);
    }
    await waitFor(() => store.batches.batchesInState('uploaded').length === 1);
  });

  it('holds a batch the service refuses for good (400) with the answer, and does not retry it', async () => {
    const t = setup({ mode: 'direct' });
    t.api.upload.push(() =>
      Promise.reject(
        httpError(
          'POST',
          '/api/trace/v3/scans',
          400,
          '{"title":"The scan batch is invalid"}',
          undefined,
        ),
      ),
    );
    store.intake.commitIntake([scan('A'), scan('B')], t.clock.t);
    t.start();
    await waitFor(() => store.batches.batchesInState('held').length === 1);
    t.advance(60_000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(t.api.ops('upload')).toHaveLength(1);
    expect(store.reports.scanCounts()).toEqual({ held: 2 });
    expect(queriesOf(store).recentProblems(5)[0]).toMatchObject({
      kind: 'failed',
      reason: expect.stringContaining('HTTP 400'),
    });
  });

  it('retries a 401 that outlived the token refresh, without holding the batch', async () => {
    const t = setup({ mode: 'direct' });
    t.api.upload.push(() =>
      Promise.reject(
        new GatewayError(ErrorCodes.UPSTREAM_AUTH, 'answered 401 with a freshly obtained token'),
      ),
    );
    store.intake.commitIntake([scan('A')], t.clock.t);
    const d = t.start();
    await waitFor(() => d.snapshot().lastError?.message.includes('401') === true);
    t.advance(1000);
    await waitFor(() => store.batches.batchesInState('uploaded').length === 1);
    expect(t.api.ops('upload')).toHaveLength(2);
    expect(store.reports.scanCounts().held).toBeUndefined();
  });
});

describe('deliverer: crash recovery decided from the stored state', () => {
  it('sends a direct batch left `uploading` again and counts it as a possible duplicate, across restarts', async () => {
    const t = setup({ mode: 'direct' });
    store.intake.commitIntake([scan('A'), scan('B'), scan('C')], t.clock.t);
    const b = formBatch(store, {
      mode: 'direct',
      maxScans: 10,
      maxBytes: 1e6,
      nowIso: new Date(t.clock.t).toISOString(),
    })!;
    store.batches.updateBatch(b.id, { state: 'uploading', attempts: 1 }); // the process died during the POST
    const d = t.start();
    await waitFor(() => store.batches.batchesInState('uploaded').length === 1);
    expect(t.api.ops('upload')).toHaveLength(1);
    expect(d.snapshot()).toMatchObject({ possibleDuplicates: 3, possibleDuplicateUploads: 1 });
    expect(store.batches.batch(b.id)?.possibleDuplicate).toBe(1);
    await d.stop();
    expect(t.make().snapshot()).toMatchObject({
      possibleDuplicates: 3,
      possibleDuplicateUploads: 1,
    });
  });

  it('does not count a resend after a refused connection, or after no token could be had (nothing was sent)', async () => {
    const t = setup({ mode: 'direct' });
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), {
      code: 'ECONNREFUSED',
    });
    t.api.upload.push(() => Promise.reject(networkError('POST', '/api/trace/v3/scans', refused)));
    const tokenDown = networkError(
      'POST',
      '/oauth2/token',
      Object.assign(new Error('getaddrinfo ENOTFOUND auth'), { code: 'ENOTFOUND' }),
    );
    t.api.upload.push(() => Promise.reject(tokenDown));
    const noToken = new GatewayError(
      ErrorCodes.UPSTREAM_NETWORK,
      'POST /oauth2/token failed: socket hang up',
      { details: { notSent: true } },
    );
    t.api.upload.push(() => Promise.reject(noToken));
    store.intake.commitIntake([scan('A'), scan('B')], t.clock.t);
    const d = t.start(); // no backoff here (random = 0): the three failures, then the upload
    await waitFor(() => store.batches.batchesInState('uploaded').length === 1);
    expect(t.api.ops('upload')).toHaveLength(4);
    expect(d.snapshot()).toMatchObject({ possibleDuplicates: 0, possibleDuplicateUploads: 0 });
  });

  it('never holds a batch for a token failure that carries a 2xx or 4xx status: it was not sent', async () => {
    const t = setup({ mode: 'direct' });
    const token = { notSent: true, stage: 'token' };
    // The token endpoint answered 200 with an HTML page, then 404 (a wrong authUrl): the upload never left.
    t.api.upload.push(() =>
      Promise.reject(
        new GatewayError(
          ErrorCodes.UPSTREAM_TOKEN,
          'token response cannot be used: the answer is not JSON',
          { details: { status: 200, ...token } },
        ),
      ),
    );
    const notFound = httpError('POST', '/oauth2/token', 404, '', undefined);
    Object.assign(notFound.details, token);
    t.api.upload.push(() => Promise.reject(notFound));
    store.intake.commitIntake([scan('A'), scan('B')], t.clock.t);
    const d = t.start();
    await waitFor(() => store.batches.batchesInState('uploaded').length === 1);
    // The last failure stays on the status, named as a token failure with its code.
    expect(d.snapshot().lastError).toMatchObject({ kind: 'token', code: ErrorCodes.UPSTREAM_HTTP });
    expect(t.api.ops('upload')).toHaveLength(3);
    expect(store.batches.batchesInState('held')).toEqual([]);
    expect(d.snapshot()).toMatchObject({ possibleDuplicates: 0, possibleDuplicateUploads: 0 });
  });

  it('counts a direct upload whose answer was lost (reset) as a possible duplicate', async () => {
    const t = setup({ mode: 'direct' });
    t.api.upload.push(() =>
      Promise.reject(
        networkError(
          'POST',
          '/api/trace/v3/scans',
          Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }),
        ),
      ),
    );
    store.intake.commitIntake([scan('A'), scan('B')], t.clock.t);
    const d = t.start();
    await waitFor(() => d.snapshot().possibleDuplicates === 2);
    t.advance(1000);
    await waitFor(() => store.batches.batchesInState('uploaded').length === 1);
    expect(store.reports.possibleDuplicates()).toMatchObject({ totalUploads: 1, totalScans: 2 });
  });

  function presignedBatch(
    t: ReturnType<typeof setup>,
    fields: { putStartedAt?: number | null; presignedExpiresAt?: number },
  ) {
    store.intake.commitIntake([scan('A'), scan('B')], t.clock.t);
    const b = formBatch(store, {
      mode: 'presigned',
      maxScans: 10,
      maxBytes: 1e6,
      nowIso: new Date(t.clock.t).toISOString(),
    })!;
    store.batches.updateBatch(b.id, {
      state: 'presigned',
      requestId: '77',
      presignedUrl: 'http://s3.test/77',
      presignedExpiresAt: fields.presignedExpiresAt ?? t.clock.t + 30 * 60_000,
      putStartedAt: fields.putStartedAt ?? null,
      attempts: 1,
    });
    return b;
  }

  it('does not PUT again when the status endpoint knows the requestId (crash after the PUT)', async () => {
    const t = setup({ mode: 'presigned' });
    const b = presignedBatch(t, { putStartedAt: t.clock.t - 50 });
    t.api.received.set('77', 2);
    const d = t.start();
    await waitFor(() => store.batches.batch(b.id)?.state === 'uploaded');
    expect(t.api.ops('put')).toHaveLength(0);
    expect(t.api.ops('presign')).toHaveLength(0);
    t.advance(100);
    await waitFor(() => store.batches.batch(b.id)?.state === 'done');
    expect(d.snapshot().possibleDuplicates).toBe(0);
  });

  it('keeps asking before any PUT when the status check itself failed (a 503 says nothing about the earlier PUT)', async () => {
    const t = setup({ mode: 'presigned' }, () => 0.5);
    const b = presignedBatch(t, { putStartedAt: t.clock.t - 50 });
    t.api.received.set('77', 2);
    t.api.status.push(() =>
      Promise.reject(httpError('GET', '/api/trace/v3/scans/77/status', 503, '', undefined)),
    );
    t.start();
    await waitFor(() => store.batches.batch(b.id)?.lastError?.includes('503') === true);
    expect(store.batches.batch(b.id)?.putStartedAt).not.toBeNull();
    t.advance(1000);
    await waitFor(() => store.batches.batch(b.id)?.state === 'uploaded');
    expect(t.api.ops('put')).toHaveLength(0);
    expect(t.api.ops('status').length).toBeGreaterThanOrEqual(2);
  });

  it('asks again before the next PUT after a PUT whose answer was lost, and does not send twice', async () => {
    const t = setup({ mode: 'presigned' }, () => 0.5);
    const b = presignedBatch(t, {});
    // The PUT arrives, its answer does not.
    t.api.put.push(() => {
      t.api.received.set('77', 2);
      return Promise.reject(
        networkError(
          'PUT',
          '<pre-signed url>',
          Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }),
        ),
      );
    });
    t.start();
    await waitFor(
      () =>
        store.batches.batch(b.id)?.lastError !== null &&
        store.batches.batch(b.id)?.state === 'presigned',
    );
    t.advance(1000);
    await waitFor(() => store.batches.batch(b.id)?.state === 'uploaded');
    expect(t.api.ops('put')).toHaveLength(1);
    t.advance(100);
    await waitFor(() => store.batches.batch(b.id)?.state === 'done');
  });

  it('PUTs without asking when no PUT was started (crash before the PUT), to the same address', async () => {
    const t = setup({ mode: 'presigned' });
    const b = presignedBatch(t, {});
    t.start();
    await waitFor(() => store.batches.batch(b.id)?.state === 'uploaded');
    expect(t.api.ops('status')).toHaveLength(0);
    expect(t.api.ops('put').map((c) => c.url)).toEqual(['http://s3.test/77']);
  });

  it('PUTs an unknown requestId again at once to the same valid address: no NotFound grace before a second PUT that cannot double', async () => {
    const t = setup({ mode: 'presigned', notFoundGraceMs: 10_000 });
    const b = presignedBatch(t, { putStartedAt: t.clock.t - 1000 });
    const d = t.start();
    // The clock stands still: nothing waits for the grace (§4.4, §8: the address takes one upload).
    await waitFor(() => t.api.ops('put').length === 1);
    expect(t.api.ops('put')[0]!.url).toBe('http://s3.test/77');
    expect(t.api.ops('status')).toHaveLength(1);
    await waitFor(() => store.batches.batch(b.id)?.state === 'uploaded');
    t.advance(100);
    await waitFor(() => store.batches.batch(b.id)?.state === 'done');
    expect(store.batches.batch(b.id)?.requestId).toBe('77');
    expect(t.api.ops('presign')).toHaveLength(0);
    expect(d.snapshot().possibleDuplicates).toBe(0);
  });

  it('retries a PUT whose answer was lost on the retry backoff, to the same address, however often it is cut', async () => {
    const t = setup({ mode: 'presigned', notFoundGraceMs: 60_000 }, () => 0.5);
    const b = presignedBatch(t, {});
    const cut = () =>
      Promise.reject(
        networkError(
          'PUT',
          '<pre-signed url>',
          Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }),
        ),
      );
    t.api.put.push(cut, cut);
    const d = t.start();
    await waitFor(
      () => t.api.ops('put').length === 1 && store.batches.batch(b.id)?.lastError !== null,
    );
    expect(store.batches.batch(b.id)).toMatchObject({
      state: 'presigned',
      nextAttemptAt: t.clock.t + 500,
    });
    t.advance(500); // one backoff step (retryBaseMs 1000, jitter 0.5), far short of the grace
    await waitFor(() => t.api.ops('put').length === 2);
    await waitFor(
      () =>
        store.batches.batch(b.id)?.state === 'presigned' &&
        store.batches.batch(b.id)!.nextAttemptAt > t.clock.t,
    );
    t.advance(1000); // the next step: 2000 · 0.5
    await waitFor(() => store.batches.batch(b.id)?.state === 'uploaded');
    expect(t.api.ops('put').map((c) => c.url)).toEqual([
      'http://s3.test/77',
      'http://s3.test/77',
      'http://s3.test/77',
    ]);
    expect(t.api.ops('status')).toHaveLength(2); // asked before each second PUT
    t.advance(100);
    await waitFor(() => store.batches.batch(b.id)?.state === 'done');
    expect(t.api.ops('presign')).toHaveLength(0);
    expect(d.snapshot().possibleDuplicates).toBe(0);
  });

  it('keeps the NotFound grace when the address cannot be used again (about to expire), then sends under a new one, counted', async () => {
    const t = setup({ mode: 'presigned', notFoundGraceMs: 10_000 });
    const b = presignedBatch(t, {
      putStartedAt: t.clock.t - 1000,
      presignedExpiresAt: t.clock.t + 30_000,
    });
    const d = t.start();
    await waitFor(() => store.batches.batch(b.id)?.state === 'uploaded');
    expect(t.api.ops('put')).toHaveLength(0);
    t.advance(5000); // still within the grace: polled, not sent
    await waitFor(() => t.api.ops('status').length >= 2);
    expect(store.batches.batch(b.id)?.state).toBe('uploaded');
    t.advance(5000);
    await waitFor(() => t.api.ops('put').length === 1);
    expect(t.api.ops('put')[0]!.url).not.toBe('http://s3.test/77');
    await waitFor(() => store.batches.batch(b.id)?.state === 'uploaded');
    expect(d.snapshot()).toMatchObject({ possibleDuplicates: 2, possibleDuplicateUploads: 1 });
  });

  it('counts a 413 to a second PUT as a possible duplicate: the split halves go under new requestIds, the first PUT may have arrived', async () => {
    const t = setup({ mode: 'presigned' });
    const b = presignedBatch(t, { putStartedAt: t.clock.t - 1000 });
    t.api.put.push(() => Promise.reject(httpError('PUT', '<pre-signed url>', 413, '', undefined)));
    const d = t.start();
    await waitFor(
      () => t.api.ops('put').length >= 1 && store.reports.possibleDuplicates().totalUploads === 1,
    );
    expect(d.snapshot().possibleDuplicatesTotal).toBe(2);
    expect(store.batches.batch(b.id)?.requestId).not.toBe('77');
  });

  it('keeps asking before the same address after a 429 to a second PUT: only a 4xx to a first PUT says nothing arrived', async () => {
    const t = setup({ mode: 'presigned' }, () => 0.5);
    const b = presignedBatch(t, { putStartedAt: t.clock.t - 1000 });
    t.api.put.push(() => Promise.reject(httpError('PUT', '<pre-signed url>', 429, '', 1000)));
    t.start();
    await waitFor(() => store.batches.batch(b.id)?.lastError?.includes('429') === true);
    expect(store.batches.batch(b.id)?.putStartedAt).not.toBeNull();
    t.advance(1000);
    await waitFor(() => t.api.ops('put').length === 2);
    expect(t.api.ops('status')).toHaveLength(2);
  });

  it('asks for a new address when the old one is refused (403) or about to expire', async () => {
    const t = setup({ mode: 'presigned' });
    const b = presignedBatch(t, {});
    t.api.put.push(() =>
      Promise.reject(
        new GatewayError(ErrorCodes.PRESIGNED_REFUSED, 'used already', {
          details: { status: 403 },
        }),
      ),
    );
    t.start();
    await waitFor(() => store.batches.batch(b.id)?.state === 'uploaded');
    expect(t.api.ops('put').map((c) => c.url)).toEqual([
      'http://s3.test/77',
      `http://s3.test/${store.batches.batch(b.id)!.requestId}`,
    ]);
    expect(store.batches.batch(b.id)?.requestId).not.toBe('77');

    const t2 = setup({ mode: 'presigned' });
    const b2 = presignedBatch(t2, { presignedExpiresAt: t2.clock.t + 30_000 });
    t2.start();
    await waitFor(() => store.batches.batch(b2.id)?.state === 'uploaded');
    expect(t2.api.ops('put').map((c) => c.url)).toEqual([
      `http://s3.test/${store.batches.batch(b2.id)!.requestId}`,
    ]);
  });
});

describe('deliverer: answers the contract leaves open (found against an independent upstream)', () => {
  const refused403 = () =>
    Promise.reject(
      new GatewayError(ErrorCodes.PRESIGNED_REFUSED, 'used already', { details: { status: 403 } }),
    );

  function presignedBatch(t: ReturnType<typeof setup>) {
    store.intake.commitIntake([scan('A'), scan('B')], t.clock.t);
    return formBatch(store, {
      mode: 'presigned',
      maxScans: 10,
      maxBytes: 1e6,
      nowIso: new Date(t.clock.t).toISOString(),
    })!;
  }

  it('waits with backoff when every pre-signed address is refused, instead of asking for one after another', async () => {
    const t = setup({ mode: 'presigned' }, () => 0.5);
    for (let i = 0; i < 10; i++) t.api.put.push(refused403);
    const b = presignedBatch(t);
    const d = t.start();
    await waitFor(() => store.batches.batch(b.id)?.lastError?.includes('used already') === true);
    await new Promise((r) => setTimeout(r, 300)); // real time passes, the test's clock does not
    expect(t.api.ops('presign')).toHaveLength(1);
    expect(store.batches.batch(b.id)?.nextAttemptAt).toBe(t.clock.t + 500);
    expect(d.snapshot().consecutiveFailures).toBe(1);
    t.advance(500);
    await waitFor(() => t.api.ops('presign').length === 2);
  });

  it('asks the status before sending again after a 5xx to the PUT (the object may be stored), and sends once', async () => {
    const t = setup({ mode: 'presigned' }, () => 0.5);
    t.api.put.push(() => {
      t.api.received.set('1000', 2); // stored, then the proxy in front answers 502
      return Promise.reject(
        httpError('PUT', '<pre-signed url>', 502, '<html>Bad Gateway</html>', undefined),
      );
    });
    const b = presignedBatch(t);
    const d = t.start();
    await waitFor(() => store.batches.batch(b.id)?.lastError?.includes('502') === true);
    expect(store.batches.batch(b.id)?.putStartedAt).not.toBeNull();
    t.advance(1000);
    await waitFor(() => store.batches.batch(b.id)?.state === 'uploaded');
    t.advance(100);
    await waitFor(() => store.batches.batch(b.id)?.state === 'done');
    expect(t.api.ops('put')).toHaveLength(1);
    expect(t.api.ops('presign')).toHaveLength(1);
    expect(d.snapshot().possibleDuplicates).toBe(0);
  });

  it('takes a refused second PUT to the same address as proof the first arrived; a resend under a new address is counted', async () => {
    const t = setup({ mode: 'presigned', notFoundGraceMs: 10_000 });
    // The first PUT is answered 200 but the service never shows the batch; the same address is then refused.
    t.api.put.push(() => Promise.resolve());
    t.api.put.push(refused403);
    const b = presignedBatch(t);
    const d = t.start();
    await waitFor(() => store.batches.batch(b.id)?.state === 'uploaded');
    t.advance(10_001); // NotFound past the grace: the same address once more
    await waitFor(() => t.api.ops('put').length === 2);
    expect(t.api.ops('put').map((c) => c.url)).toEqual([
      'http://s3.test/1000',
      'http://s3.test/1000',
    ]);
    await waitFor(
      () =>
        store.batches.batch(b.id)?.state === 'uploaded' &&
        store.batches.batch(b.id)?.presignedUrl === null,
    );
    expect(d.snapshot().possibleDuplicates).toBe(0);
    t.advance(5000); // within the new grace window: only polled
    await waitFor(() => t.api.ops('status').length >= 3);
    expect(t.api.ops('presign')).toHaveLength(1);
    t.advance(5001);
    await waitFor(
      () =>
        store.batches.batch(b.id)?.requestId === '1001' &&
        store.batches.batch(b.id)?.state === 'uploaded',
    );
    t.advance(100);
    await waitFor(() => store.batches.batch(b.id)?.state === 'done');
    expect(t.api.ops('presign')).toHaveLength(2);
    expect(store.batches.batch(b.id)?.requestId).toBe('1001');
    // Its status is known: no longer a possible duplicate, still in the lifetime count.
    expect(d.snapshot()).toMatchObject({
      possibleDuplicates: 0,
      possibleDuplicateUploads: 0,
      possibleDuplicatesTotal: 2,
    });
  });

  it('holds a direct batch whose 2xx answer cannot be read, instead of sending it again and again', async () => {
    const t = setup({ mode: 'direct' });
    t.api.upload.push(() =>
      Promise.reject(
        new GatewayError(
          ErrorCodes.UPSTREAM_RESPONSE,
          'uploadScans: response field requestId is missing',
          { details: { status: 200 } },
        ),
      ),
    );
    store.intake.commitIntake([scan('A'), scan('B')], t.clock.t);
    const d = t.start();
    await waitFor(() => store.reports.scanCounts().held === 2);
    t.advance(60_000);
    await new Promise((r) => setTimeout(r, 200));
    expect(t.api.ops('upload')).toHaveLength(1);
    expect(store.batches.batchesInState('held')[0]?.lastError).toContain('could not be read');
    expect(d.snapshot().possibleDuplicates).toBe(0);
  });

  it('counts failing status checks in a row for the health page, and forgets them once one is answered', async () => {
    const t = setup({ mode: 'direct' }, () => 0.5);
    const failing = () =>
      Promise.reject(
        httpError('GET', '/api/trace/v3/scans/1000/status', 503, '<html>busy</html>', undefined),
      );
    t.api.status.push(failing, failing, failing);
    store.intake.commitIntake([scan('A')], t.clock.t);
    const d = t.start();
    await waitFor(() => store.batches.batchesInState('uploaded').length === 1);
    t.advance(100);
    await waitFor(() => t.api.ops('status').length === 1);
    for (let i = 2; i <= 3; i++) {
      t.advance(1000);
      await waitFor(() => t.api.ops('status').length === i);
    }
    await waitFor(() => d.snapshot().statusChecks.consecutiveFailures === 3);
    expect(d.snapshot().statusChecks.lastError?.message).toContain('503');
    t.advance(1000);
    await waitFor(() => store.batches.batchesInState('done').length === 1);
    expect(d.snapshot().statusChecks.consecutiveFailures).toBe(0);
    expect(store.batches.batchesInState('done')[0]?.lastError).toBeNull();
  });
});

describe('deliverer: a buffer that cannot be written', () => {
  it('reports a full disk as a step error until a step succeeds again', async () => {
    const t = setup({ mode: 'direct' });
    store.intake.commitIntake(
      Array.from({ length: 3000 }, (_, i) => scan(`FULL-${i}`)),
      t.clock.t,
    );
    // The disk fills up: no page left, the free list used up by filler that is deleted later.
    const pages = sqlOf(store).pragma('page_count', { simple: true }) as number;
    sqlOf(store).pragma(`max_page_count = ${pages}`);
    const fill = sqlOf(store).prepare('INSERT INTO space_probe (pad) VALUES (zeroblob(512))');
    for (;;) {
      try {
        fill.run();
      } catch {
        break;
      }
    }
    // And the last page of the batches table: forming a batch now needs a new page. (Moving
    // scans to a batch may free index pages as it goes, and finishing one writes no scan rows,
    // so a full disk alone no longer stops every step.)
    const filler = sqlOf(store).prepare(
      `INSERT INTO batches (mode, state, scan_count, bytes, created_at) VALUES ('direct', 'held', 0, 0, '2026-01-01T00:00:00.000Z')`,
    );
    for (;;) {
      try {
        filler.run();
      } catch {
        break;
      }
    }
    const d = t.start();
    await waitFor(() => d.snapshot().stepError !== undefined);
    expect(d.snapshot().stepError).toMatchObject({
      diskFull: true,
      message: expect.stringMatching(/full/i),
    });
    expect(store.batches.batchesInState('uploaded')).toHaveLength(0);
    sqlOf(store).prepare('DELETE FROM space_probe').run();
    sqlOf(store).pragma(`max_page_count = ${pages * 10}`);
    await waitFor(() => store.batches.batchesInState('uploaded').length >= 1, {
      timeoutMs: 30_000,
    });
    await waitFor(() => d.snapshot().stepError === undefined);
  });
});

describe('deliverer: batching', () => {
  it('auto mode sends a backlog pre-signed in large batches and a trickle direct', async () => {
    const t = setup({ mode: 'auto', maxBatchScans: 100, presignedMaxScans: 1000 });
    store.intake.commitIntake(
      Array.from({ length: 2500 }, (_, i) => scan(`P-${i}`)),
      t.clock.t,
    );
    t.start();
    await waitFor(
      () =>
        store.reports.totals().pendingScans === 0 &&
        store.batches.batchesInState('ready', 'presigned').length === 0,
      { timeoutMs: 30_000 },
    );
    const batches = queriesOf(store).recentBatches(100).reverse();
    expect(batches.map((b) => [b.mode, b.scanCount])).toEqual([
      ['presigned', 1000],
      ['presigned', 1000],
      ['presigned', 500],
    ]);
    store.intake.commitIntake(
      Array.from({ length: 50 }, (_, i) => scan(`D-${i}`)),
      t.clock.t,
    );
    deliverer!.wake();
    await waitFor(() => store.reports.totals().pendingScans === 0, { timeoutMs: 30_000 });
    expect(queriesOf(store).recentBatches(1)[0]).toMatchObject({ mode: 'direct', scanCount: 50 });
  });

  it('drains a backlog in which one reference repeats hundreds of times (one of them per batch)', async () => {
    store = BufferStore.openAt(join(mkdtempSync(join(tmpdir(), 'sg-deliverer-')), 'buffer.db'));
    const api = new FakeApi(Date.now);
    const config = deliverySchema.parse({
      mode: 'direct',
      maxBatchScans: 500,
      maxBatchDelayMs: 0,
      statusPollMs: 1,
      statusPollMaxMs: 5,
    });
    store.intake.commitIntake(
      [
        ...Array.from({ length: 300 }, () => scan('SAME')),
        ...Array.from({ length: 1000 }, (_, i) => scan(`U-${i}`)),
      ],
      Date.now(),
    );
    deliverer = new Deliverer({ store, api, config, logger: silentLogger() });
    deliverer.start();
    await waitFor(() => store.reports.scanCounts().delivered === 1300, { timeoutMs: 30_000 });
    for (const call of api.ops('upload')) {
      const refs = (JSON.parse(call.body!) as { reference: string }[]).map((s) => s.reference);
      expect(new Set(refs).size).toBe(refs.length);
    }
    expect(api.ops('upload')).toHaveLength(300);
  });
});
