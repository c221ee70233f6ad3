import { mkdtempSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { deliverySchema, type DeliveryConfig } from '../../src/config/schema.js';
import { Deliverer, type DeliveryStatus } from '../../src/delivery/deliverer.js';
import { ErrorCodes } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { waitFor } from '../helpers/wait.js';

// Delivery through the real client against a real, scripted service: token answers that cannot be
// read, a token endpoint that is down and comes back, a status endpoint that does not answer.

type TokenMode = 'html' | 'camel' | 'snake';

/** A scripted service on 127.0.0.1: token endpoint, direct upload, status. */
async function startService() {
  const svc = {
    tokenMode: 'snake' as TokenMode,
    tokenRequests: 0,
    /** Scans the service took, by reference: how often each arrived. */
    received: new Map<string, number>(),
    uploads: 0,
    batches: new Map<string, number>(),
    /** While true, status requests get no answer until released. */
    holdStatus: false,
    held: [] as { res: ServerResponse; requestId: string }[],
    maxHeld: 0,
    statusAnswered: 0,
    url: '',
    server: undefined as unknown as Server,
    answer(res: ServerResponse, requestId: string) {
      svc.statusAnswered++;
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          state: 'Success',
          requestId: Number(requestId),
          description: 'ok',
          processed: svc.batches.get(requestId) ?? 0,
        }),
      );
    },
    release() {
      svc.holdStatus = false;
      for (const h of svc.held.splice(0)) svc.answer(h.res, h.requestId);
    },
  };
  svc.server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = req.url ?? '';
      if (url === '/oauth2/token') {
        svc.tokenRequests++;
        if (svc.tokenMode === 'html')
          return res.writeHead(200, { 'content-type': 'text/html' }).end('<html>Sign in</html>');
        const body =
          svc.tokenMode === 'camel'
            ? { accessToken: 'tok', expiresIn: 3600 }
            : { access_token: 'tok', token_type: 'Bearer', expires_in: 3600 };
        return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      }
      if (req.headers.authorization !== 'Bearer tok') return res.writeHead(401).end();
      if (req.method === 'POST' && url === '/api/trace/v3/scans') {
        const scans = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { reference: string }[];
        for (const s of scans)
          svc.received.set(s.reference, (svc.received.get(s.reference) ?? 0) + 1);
        const requestId = String(++svc.uploads);
        svc.batches.set(requestId, scans.length);
        return res
          .writeHead(202, { 'content-type': 'application/json' })
          .end(JSON.stringify({ requestId }));
      }
      const status = /^\/api\/trace\/v3\/scans\/(\d+)\/status$/.exec(url);
      if (status) {
        if (svc.holdStatus) {
          svc.held.push({ res, requestId: status[1]! });
          svc.maxHeld = Math.max(svc.maxHeld, svc.held.length);
          return;
        }
        return svc.answer(res, status[1]!);
      }
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => svc.server.listen(0, '127.0.0.1', resolve));
  svc.url = `http://127.0.0.1:${(svc.server.address() as AddressInfo).port}`;
  return svc;
}

function scan(reference: string): IntakeRecord {
  const body = {
    reference,
    timeStamp: '2026-11-18T07:00:00',
    dcpKey: 'GI-01',
    productModelKey: 'PACK-A',
    parents: [],
    attributes: [],
  };
  return {
    inputId: 'test',
    receivedAt: new Date(),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: { reference, dcpKey: 'GI-01', instant: new Date(), body: JSON.stringify(body) },
  };
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function setup(baseUrl: string, authUrl: string, over: Partial<DeliveryConfig> = {}) {
  const store = BufferStore.openAt(
    join(mkdtempSync(join(tmpdir(), 'sg-token-status-')), 'buffer.db'),
  );
  const client = new UpstreamClient({ baseUrl, authUrl, clientId: 'c', clientSecret: 's' });
  const config = deliverySchema.parse({
    mode: 'direct',
    maxBatchDelayMs: 0,
    maxBatchScans: 10,
    statusPollMs: 20,
    statusPollMaxMs: 100,
    retryBaseMs: 20,
    retryMaxMs: 100,
    ...over,
  });
  const deliverer = new Deliverer({ store, api: client, config, logger: silentLogger() });
  cleanups.push(
    () => store.close(),
    () => client.close(),
    () => deliverer.stop(),
  );
  return { store, deliverer };
}

/** Records every distinct `lastError` the deliverer shows while the test runs. */
function watchErrors(deliverer: Deliverer): NonNullable<DeliveryStatus['lastError']>[] {
  const seen: NonNullable<DeliveryStatus['lastError']>[] = [];
  const timer = setInterval(() => {
    const e = deliverer.snapshot().lastError;
    if (e && seen.at(-1)?.at !== e.at) seen.push(e);
  }, 5);
  cleanups.push(() => clearInterval(timer));
  return seen;
}

function expectAllDeliveredOnce(store: BufferStore, received: Map<string, number>, count: number) {
  expect(store.reports.scanCounts()).toEqual({ delivered: count });
  expect(store.batches.batchesInState('held')).toEqual([]);
  expect(store.reports.possibleDuplicates()).toMatchObject({
    scans: 0,
    uploads: 0,
    totalScans: 0,
    totalUploads: 0,
  });
  expect(received.size).toBe(count);
  expect([...received.values()].every((n) => n === 1)).toBe(true);
}

describe('token failures never pass for an upload', () => {
  it('keeps batches pending while the token answer cannot be read, and delivers all once a camel-case answer comes', async () => {
    const svc = await startService();
    cleanups.push(() => new Promise<void>((resolve) => svc.server.close(() => resolve())));
    svc.tokenMode = 'html';
    const { store, deliverer } = setup(svc.url, svc.url);
    store.intake.commitIntake(
      Array.from({ length: 30 }, (_, i) => scan(`T-${i}`)),
      Date.now(),
    );
    const errors = watchErrors(deliverer);
    deliverer.start();
    await waitFor(() => svc.tokenRequests >= 3, { what: 'three token requests' });
    await waitFor(() => errors.length > 0);
    expect(errors[0]).toMatchObject({ kind: 'token', code: ErrorCodes.UPSTREAM_TOKEN });
    // Nothing was sent, nothing held: the batch waits with backoff.
    expect(svc.uploads).toBe(0);
    expect(store.batches.batchesInState('held')).toEqual([]);
    expect(deliverer.snapshot().consecutiveFailures).toBeGreaterThanOrEqual(2);
    svc.tokenMode = 'camel';
    await waitFor(() => store.reports.scanCounts().delivered === 30, {
      timeoutMs: 30_000,
      what: 'all 30 delivered',
    });
    expectAllDeliveredOnce(store, svc.received, 30);
  });

  it('delivers everything, nothing held, when the token endpoint is down and comes back', async () => {
    const svc = await startService();
    cleanups.push(() => new Promise<void>((resolve) => svc.server.close(() => resolve())));
    // The auth server on its own port, closed at first: connection refused.
    const auth = await startService();
    const authPort = (auth.server.address() as AddressInfo).port;
    auth.server.closeAllConnections();
    await new Promise<void>((resolve) => auth.server.close(() => resolve()));
    const { store, deliverer } = setup(svc.url, auth.url);
    store.intake.commitIntake(
      Array.from({ length: 25 }, (_, i) => scan(`D-${i}`)),
      Date.now(),
    );
    const errors = watchErrors(deliverer);
    deliverer.start();
    await waitFor(() => deliverer.snapshot().consecutiveFailures >= 3, {
      what: 'three failed attempts',
    });
    // The watcher samples every 5 ms on its own timer: a stalled loop can run this wait's timer
    // (and what follows it) before the watcher's, so the error it records is awaited too.
    await waitFor(() => errors.length > 0, { what: 'the error shown' });
    expect(errors[0]).toMatchObject({ kind: 'token', code: ErrorCodes.UPSTREAM_NETWORK });
    expect(errors[0]?.message).toContain('ECONNREFUSED');
    expect(svc.uploads).toBe(0);
    await new Promise<void>((resolve) => auth.server.listen(authPort, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => auth.server.close(() => resolve())));
    await waitFor(() => store.reports.scanCounts().delivered === 25, {
      timeoutMs: 30_000,
      what: 'all 25 delivered',
    });
    expect(auth.tokenRequests).toBeGreaterThanOrEqual(1);
    expectAllDeliveredOnce(store, svc.received, 25);
  });
});

describe('status polls apart from uploads', () => {
  it('keeps uploading while status polls get no answer, with at most 8 polls in flight', async () => {
    const svc = await startService();
    cleanups.push(() => {
      svc.release();
      return new Promise<void>((resolve) => svc.server.close(() => resolve()));
    });
    svc.holdStatus = true;
    const { store, deliverer } = setup(svc.url, svc.url, { maxBatchScans: 5 });
    store.intake.commitIntake(
      Array.from({ length: 60 }, (_, i) => scan(`S-${i}`)),
      Date.now(),
    );
    deliverer.start();
    // Every batch goes out with no poll answered. Whether a first poll was already asked when the
    // twelfth upload arrived depends on the machine's speed; that polls are asked and held while
    // uploads went on is the wait for eight below.
    await waitFor(() => svc.uploads === 12, { timeoutMs: 30_000, what: 'all 12 batches uploaded' });
    expect(svc.statusAnswered).toBe(0);
    await waitFor(() => svc.held.length === 8, { what: 'eight polls in flight' });
    expect(deliverer.statusLoad()).toMatchObject({ polling: 8 });
    expect(svc.maxHeld).toBe(8);
    // The service counts an upload when it reads it; the gateway records the batch as uploaded
    // when the answer reaches it, which a loaded machine may not have done yet.
    await waitFor(() => store.batches.batchesInState('uploaded').length === 12, {
      what: 'all 12 batches recorded as uploaded',
    });
    svc.release();
    await waitFor(() => store.reports.scanCounts().delivered === 60, {
      timeoutMs: 30_000,
      what: 'all 60 delivered',
    });
    expect(svc.maxHeld).toBe(8);
    expectAllDeliveredOnce(store, svc.received, 60);
  });
});
