import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/errors.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { UpstreamClient, type UpstreamClientOptions } from '../../src/upstream/client.js';
import { rejection } from '../helpers/rejection.js';

// The contract suite, part 2: tokens (reuse, expiry, 401 handling) and every injected fault,
// UpstreamClient against the sandbox over real HTTP.

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

async function requestLog(
  sandbox: RunningSandbox,
): Promise<{ method: string; path: string; status: number }[]> {
  const res = await fetch(`${sandbox.url}/_sandbox/requests`);
  return ((await res.json()) as { requests: { method: string; path: string; status: number }[] })
    .requests;
}

async function tokenRequests(sandbox: RunningSandbox): Promise<number> {
  return (await requestLog(sandbox)).filter((r) => r.path === '/oauth2/token' && r.status === 200)
    .length;
}

const clients: UpstreamClient[] = [];
function clientFor(
  sandbox: RunningSandbox,
  extra: Partial<UpstreamClientOptions> = {},
): UpstreamClient {
  const client = new UpstreamClient({
    baseUrl: sandbox.url,
    authUrl: sandbox.url,
    clientId: 'demo-client',
    clientSecret: SECRET,
    ...extra,
  });
  clients.push(client);
  return client;
}
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
});

/** Past the end of a token of the short-lived sandbox (3 s), in ms. */
const TOKEN_GONE_MS = 3200;

describe('tokens', () => {
  let sandbox: RunningSandbox;
  let shortLived: RunningSandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0 });
    // Three seconds: a token must still be good for the call right after it was fetched, however
    // loaded the machine; the sleeps past its end (TOKEN_GONE_MS) only grow on a slow one.
    shortLived = await startSandbox({ port: 0, tokenTtlSec: 3 });
  });
  afterAll(async () => {
    await sandbox.close();
    await shortLived.close();
  });

  it('requests one token for many concurrent and sequential calls', async () => {
    await fetch(`${sandbox.url}/_sandbox/requests`, { method: 'DELETE' });
    const client = clientFor(sandbox);
    await Promise.all(Array.from({ length: 8 }, () => client.listProducts()));
    for (let i = 0; i < 4; i++) await client.getScanStatus('1');
    expect(await tokenRequests(sandbox)).toBe(1);
    expect(client.tokenInfo().refreshes).toBe(1);
    expect(client.tokenInfo().expiresAt?.getTime()).toBeGreaterThan(Date.now() + 3500_000);
  });

  it('refreshes a token that expired, without a 401', async () => {
    await fetch(`${shortLived.url}/_sandbox/requests`, { method: 'DELETE' });
    const client = clientFor(shortLived);
    await client.listProducts();
    await sleep(TOKEN_GONE_MS);
    await client.listProducts();
    expect(await tokenRequests(shortLived)).toBe(2);
    expect((await requestLog(shortLived)).some((r) => r.status === 401)).toBe(false);
  });

  it('refreshes once when the service answers 401 to a token the client still trusts', async () => {
    await fetch(`${shortLived.url}/_sandbox/requests`, { method: 'DELETE' });
    const frozen = Date.now();
    const client = clientFor(shortLived, { now: () => frozen });
    await client.listProducts();
    await sleep(TOKEN_GONE_MS); // expired for the sandbox, not for the client's frozen clock
    expect(await client.listProducts()).toEqual(expect.any(Array));
    const log = (await requestLog(shortLived)).map((r) => `${r.method} ${r.path} ${r.status}`);
    expect(log).toEqual([
      'POST /oauth2/token 200',
      'GET /api/product/v3/products 200',
      'GET /api/product/v3/products 401',
      'POST /oauth2/token 200',
      'GET /api/product/v3/products 200',
    ]);
  });

  it('gives UPSTREAM_AUTH when a 401 persists after one refresh', async () => {
    // Tokens of another sandbox carry a signature this one refuses.
    const client = new UpstreamClient({
      baseUrl: sandbox.url,
      authUrl: shortLived.url,
      clientId: 'demo-client',
      clientSecret: SECRET,
    });
    clients.push(client);
    await fetch(`${shortLived.url}/_sandbox/requests`, { method: 'DELETE' });
    const err = await rejection(client.listProducts());
    expect(err.code).toBe(ErrorCodes.UPSTREAM_AUTH);
    expect(err.retryable).toBe(false);
    expect(await tokenRequests(shortLived)).toBe(2);
  });

  it('gives UPSTREAM_AUTH without the secret when the token endpoint refuses the credentials', async () => {
    const wrong = 'not-the-secret-123';
    const client = clientFor(sandbox, { clientSecret: wrong });
    const err = await rejection(client.listProducts());
    expect(err.code).toBe(ErrorCodes.UPSTREAM_AUTH);
    expect(err.details).toMatchObject({ status: 401, error: 'invalid_client' });
    expect(JSON.stringify({ message: err.message, details: err.details })).not.toContain(wrong);
  });

  it('answers 401 problem details to missing, malformed, foreign and expired tokens', async () => {
    const url = `${shortLived.url}/api/product/v3/products`;
    const token = async (base: string) => {
      const res = await request(`${base}/oauth2/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `client_id=demo-client&client_secret=${encodeURIComponent(SECRET)}&grant_type=client_credentials`,
      });
      return ((await res.body.json()) as { access_token: string }).access_token;
    };
    const expired = await token(shortLived.url);
    const foreign = await token(sandbox.url);
    await sleep(TOKEN_GONE_MS);
    const cases: Array<[string, Record<string, string>, string]> = [
      ['missing', {}, 'missing'],
      ['malformed', { authorization: 'Bearer not.a-jwt' }, 'malformed'],
      ['not bearer', { authorization: 'Basic ZGVtbzpkZW1v' }, 'not a bearer token'],
      ['foreign signature', { authorization: `Bearer ${foreign}` }, 'signature'],
      ['expired', { authorization: `Bearer ${expired}` }, 'expired'],
    ];
    for (const [name, headers, detail] of cases) {
      const res = await request(url, { headers });
      expect(res.statusCode, name).toBe(401);
      expect(res.headers['content-type'], name).toContain('application/json');
      expect(String(res.headers['www-authenticate']), name).toMatch(/^Bearer/);
      const body = (await res.body.json()) as { status: number; detail: string };
      expect(body.status, name).toBe(401);
      expect(body.detail, name).toContain(detail);
    }
  });
});

describe('injected faults', () => {
  let sandbox: RunningSandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 0 });
  });
  afterAll(async () => sandbox.close());
  afterEach(() =>
    sandbox.setFaults({ errorRate: 0, rateLimitRate: 0, resetRate: 0, latencyMs: 0 }),
  );

  it('500 and 503 are retryable UPSTREAM_HTTP with problem details; the token endpoint is spared', async () => {
    const client = clientFor(sandbox);
    sandbox.setFaults({ errorRate: 1 });
    const first = await rejection(client.listProducts());
    const second = await rejection(client.getScanStatus('5'));
    expect([first.details.status, second.details.status].sort()).toEqual([500, 503]);
    for (const err of [first, second]) {
      expect(err.code).toBe(ErrorCodes.UPSTREAM_HTTP);
      expect(err.retryable).toBe(true);
      expect(err.details.problem).toMatchObject({ detail: 'Injected fault.' });
    }
    expect(client.tokenInfo().refreshes).toBe(1);
  });

  it('429 carries Retry-After as retryAfterMs', async () => {
    const client = clientFor(sandbox);
    sandbox.setFaults({ rateLimitRate: 1, retryAfterSec: 7 });
    const err = await rejection(client.uploadScans('[]'));
    expect(err).toMatchObject({
      code: ErrorCodes.UPSTREAM_HTTP,
      retryable: true,
      details: { status: 429, retryAfterMs: 7000 },
    });
  });

  it('a connection reset is a retryable UPSTREAM_NETWORK', async () => {
    const client = clientFor(sandbox);
    await client.listProducts();
    sandbox.setFaults({ resetRate: 1 });
    const err = await rejection(client.requestPresignedUpload());
    expect(err.code).toBe(ErrorCodes.UPSTREAM_NETWORK);
    expect(err.retryable).toBe(true);
    sandbox.setFaults({ resetRate: 0 });
    expect(await client.listProducts()).toEqual(expect.any(Array));
  });

  it('latency beyond the request timeout is UPSTREAM_NETWORK; within it the call succeeds', async () => {
    // The whole-exchange deadline (an AbortSignal timer) ends it before undici's coarse (about 1 s)
    // headers timeout would.
    const client = clientFor(sandbox, { requestTimeoutMs: 200 });
    await client.listProducts();
    sandbox.setFaults({ latencyMs: 3000 });
    // No elapsed time asserted: an answer after the latency would be a success, and the cause says
    // the deadline of 200 ms ended it, not undici's headers timeout.
    const err = await rejection(client.listProducts());
    expect(err.code).toBe(ErrorCodes.UPSTREAM_NETWORK);
    expect(err.details).toMatchObject({ cause: 'DEADLINE', deadlineMs: 200 });
    sandbox.setFaults({ latencyMs: 30 });
    expect(await client.listProducts()).toEqual(expect.any(Array));
  });

  it('a failed pre-signed PUT does not use up the address', async () => {
    const client = clientFor(sandbox);
    const address = await client.requestPresignedUpload();
    sandbox.setFaults({ errorRate: 1 });
    const err = await rejection(client.putPresigned(address.url, '[]'));
    expect(err).toMatchObject({ code: ErrorCodes.UPSTREAM_HTTP, retryable: true });
    sandbox.setFaults({ errorRate: 0 });
    await client.putPresigned(address.url, '[]');
  });

  it('faults are read and changed through /_sandbox/faults', async () => {
    const put = await fetch(`${sandbox.url}/_sandbox/faults`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ rateLimitRate: 1, retryAfterSec: 3 }),
    });
    expect(await put.json()).toMatchObject({ rateLimitRate: 1, retryAfterSec: 3, errorRate: 0 });
    const client = clientFor(sandbox);
    expect((await rejection(client.listProducts())).details.retryAfterMs).toBe(3000);
    expect(await (await fetch(`${sandbox.url}/_sandbox/faults`)).json()).toMatchObject({
      rateLimitRate: 1,
    });
  });
});
