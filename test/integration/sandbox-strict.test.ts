import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCodes, GatewayError } from '../../src/errors.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import {
  loadSandboxConfig,
  startSandbox,
  type RunningSandbox,
  FAILURE_REASONS,
} from '@scan-gateway/sandbox';
import { UpstreamClient } from '../../src/upstream/client.js';
import { waitFor } from '../helpers/wait.js';

// The sandbox's stricter rules over real HTTP on a listening sandbox: what an
// object store answers to a pre-signed PUT with Authorization or another content type, 415 on
// scan uploads, per-scan failures for an unknown product and for both keys, faults of the token
// endpoint, and a restart that keeps the service's state.

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const SCAN = {
  reference: 'S-1',
  timeStamp: '2025-01-02T03:04:05',
  dcpKey: 'GI-01',
  productModelKey: 'PACK-A',
  parents: [],
  attributes: [],
};
const CREDENTIALS = {
  client_id: 'demo-client',
  client_secret: SECRET,
  grant_type: 'client_credentials',
};

let sandbox: RunningSandbox;
let token: string;

interface Answer {
  status: number;
  type: string;
  text: string;
  json: () => Record<string, unknown>;
}

async function call(
  method: string,
  url: string,
  options: { body?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const res = await request(url.startsWith('http') ? url : `${sandbox.url}${url}`, {
    method: method as 'GET',
    headers: options.headers ?? {},
    ...(options.body !== undefined ? { body: options.body } : {}),
  });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    type: String(res.headers['content-type']),
    text,
    json: () => JSON.parse(text) as Record<string, unknown>,
  };
}

const bearer = () => ({ authorization: `Bearer ${token}` });
const tokenRequest = () =>
  call('POST', '/oauth2/token', {
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(CREDENTIALS).toString(),
  });
const postScans = (scans: unknown[], contentType?: string) =>
  call('POST', '/api/trace/v3/scans', {
    headers: { ...bearer(), ...(contentType !== undefined ? { 'content-type': contentType } : {}) },
    body: JSON.stringify(scans),
  });
const address = async () =>
  (await call('POST', '/api/trace/v3/scans/preSignedUrl', { headers: bearer() })).json() as {
    url: string;
    requestId: string;
  };
const status = async (id: string) =>
  (await call('GET', `/api/trace/v3/scans/${id}/status`, { headers: bearer() })).json();
const terminal = (id: string) =>
  waitFor(async () => {
    const s = await status(id);
    return ['Success', 'Failed', 'HasFailures'].includes(String(s.state)) ? s : undefined;
  });

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0, processingDelayMs: 0 });
  token = (await tokenRequest()).json().access_token as string;
});
afterAll(async () => sandbox.close());

describe('pre-signed PUT, answered as an object store', () => {
  it('refuses a PUT carrying Authorization with S3 400 InvalidArgument, does not echo the token, and does not use the address up', async () => {
    const a = await address();
    const refused = await call('PUT', a.url, {
      headers: { ...bearer(), 'content-type': 'application/json' },
      body: JSON.stringify([SCAN]),
    });
    expect(refused.status).toBe(400);
    expect(refused.type).toContain('application/xml');
    expect(refused.text).toContain(
      '<Error><Code>InvalidArgument</Code><Message>Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified</Message><ArgumentName>Authorization</ArgumentName>',
    );
    expect(refused.text).not.toContain(token);
    expect(await status(a.requestId)).toMatchObject({ state: 'NotFound' });
    // Any scheme counts, not only Bearer: S3 refuses a second mechanism of whatever kind.
    expect(
      (
        await call('PUT', a.url, {
          headers: { authorization: 'Basic eDp5', 'content-type': 'application/json' },
          body: '[]',
        })
      ).status,
    ).toBe(400);

    expect(
      (
        await call('PUT', a.url, {
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify([SCAN]),
        })
      ).status,
    ).toBe(200);
    expect(await terminal(a.requestId)).toMatchObject({ state: 'Success', processed: 1 });
  });

  it('refuses a content type other than the signed application/json with S3 403 SignatureDoesNotMatch, without using the address up', async () => {
    const a = await address();
    for (const headers of [
      { 'content-type': 'application/octet-stream' },
      { 'content-type': 'text/plain' },
      { 'content-type': 'application/json; charset=utf-8' },
      {},
    ] as Array<Record<string, string>>) {
      const res = await call('PUT', a.url, { headers, body: JSON.stringify([SCAN]) });
      expect(res.status, JSON.stringify(headers)).toBe(403);
      expect(res.text).toMatch(
        /<Error><Code>SignatureDoesNotMatch<\/Code><Message>The request signature we calculated does not match/,
      );
    }
    expect(
      (
        await call('PUT', a.url, {
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify([SCAN]),
        })
      ).status,
    ).toBe(200);
    expect(await terminal(a.requestId)).toMatchObject({ state: 'Success' });
  });

  it('keeps the object when the answer is lost: the batch is processed and the address is used', async () => {
    const a = await address();
    sandbox.setFaults({ lostAnswerRate: 1 });
    try {
      await expect(
        call('PUT', a.url, {
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify([SCAN]),
        }),
      ).rejects.toThrow();
    } finally {
      sandbox.setFaults({ lostAnswerRate: 0 });
    }
    expect(await terminal(a.requestId)).toMatchObject({ state: 'Success', processed: 1 });
    const again = await call('PUT', a.url, {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([SCAN]),
    });
    expect([again.status, again.text.includes('used already')]).toEqual([403, true]);
  });
});

describe('content type of a direct upload', () => {
  it('takes application/json with or without charset', async () => {
    expect((await postScans([SCAN], 'application/json')).status).toBe(202);
    expect((await postScans([SCAN], 'application/json; charset=utf-8')).status).toBe(202);
  });

  it('answers 415 problem details to any other type, also ones the product endpoints take', async () => {
    for (const type of [
      'text/json',
      'application/vnd.example+json',
      'text/plain',
      'application/octet-stream',
      undefined,
    ]) {
      const res = await postScans([SCAN], type);
      expect(res.status, String(type)).toBe(415);
      expect(res.type).toContain('application/problem+json');
      expect(res.json()).toMatchObject({
        status: 415,
        title: 'Unsupported Media Type',
        instance: '/api/trace/v3/scans',
      });
    }
    expect((await call('GET', '/_sandbox/scans?limit=0')).json().count).toBeGreaterThan(0);
  });
});

describe('per-scan failures', () => {
  it('fails a scan with a product the customer does not have, and one carrying both supplierKey and clientKey', async () => {
    const scans = [
      { ...SCAN, reference: 'OK-1' },
      { ...SCAN, reference: 'NO-PRODUCT', productModelKey: 'PACK-UNKNOWN' },
      { ...SCAN, reference: 'BOTH-KEYS', supplierKey: 'SUP-1', clientKey: 'CL-1' },
      { ...SCAN, reference: 'GOODS-IN', supplierKey: 'SUP-1' },
      { ...SCAN, reference: 'GOODS-OUT', dcpKey: 'GO-01', clientKey: 'CL-1' },
    ];
    const id = (await postScans(scans, 'application/json')).json().requestId as string;
    expect(await terminal(id)).toEqual({
      state: 'HasFailures',
      requestId: Number(id),
      description: '2 of 5 scans failed to process',
      processed: 5,
      failed: 2,
      failures: [
        { reference: 'NO-PRODUCT', reason: FAILURE_REASONS.unknownProduct },
        { reference: 'BOTH-KEYS', reason: FAILURE_REASONS.bothKeys },
      ],
    });
  });

  it('knows a product from the moment it was created, and applies the rules to pre-signed uploads too', async () => {
    const scan = { ...SCAN, reference: 'NEW-1', productModelKey: 'PACK-NEW' };
    const before = (await postScans([scan], 'application/json')).json().requestId as string;
    expect(await terminal(before)).toMatchObject({
      state: 'Failed',
      failures: [{ reference: 'NEW-1', reason: FAILURE_REASONS.unknownProduct }],
    });
    const created = await call('POST', '/api/product/v3/products/create', {
      headers: { ...bearer(), 'content-type': 'application/json' },
      body: JSON.stringify({ key: 'PACK-NEW', name: 'New pack', ofType: 'BatteryPack' }),
    });
    expect(created.status).toBe(200);
    const after = (await postScans([scan], 'application/json')).json().requestId as string;
    expect(await terminal(after)).toMatchObject({ state: 'Success' });

    const a = await address();
    await call('PUT', a.url, {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([
        scan,
        { ...scan, reference: 'NEW-2', supplierKey: 'S', clientKey: 'C' },
      ]),
    });
    expect(await terminal(a.requestId)).toMatchObject({
      state: 'HasFailures',
      failures: [{ reference: 'NEW-2', reason: FAILURE_REASONS.bothKeys }],
    });
  });
});

describe('faults of the token endpoint', () => {
  const faults = (patch: Record<string, unknown>) =>
    call('PUT', '/_sandbox/faults', {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(patch),
    });

  it('is down (connection dropped) with tokenResetRate 1, while the API keeps answering a held token', async () => {
    expect((await faults({ tokenResetRate: 1 })).json()).toMatchObject({ tokenResetRate: 1 });
    try {
      await expect(tokenRequest()).rejects.toThrow();
      expect((await call('GET', '/api/product/v3/products', { headers: bearer() })).status).toBe(
        200,
      );
      const log = (await call('GET', '/_sandbox/requests')).json() as {
        requests: Array<{ path: string; status: number }>;
      };
      expect(log.requests.filter((r) => r.path === '/oauth2/token').at(-1)).toMatchObject({
        status: 0,
      });
    } finally {
      expect((await faults({ tokenResetRate: null })).json()).not.toHaveProperty('tokenResetRate');
    }
    expect((await tokenRequest()).status).toBe(200);
  });

  it('answers 503 and 500 in turn with OAuth-style JSON under tokenErrorRate', async () => {
    await faults({ tokenErrorRate: 1 });
    try {
      const answers = [await tokenRequest(), await tokenRequest()];
      expect(answers.map((a) => a.status).sort()).toEqual([500, 503]);
      expect(answers[0]?.json()).toEqual({
        error: 'server_error',
        error_description: 'Injected fault.',
      });
    } finally {
      await faults({ tokenErrorRate: null });
    }
  });

  it('answers 200 with a body that is no token answer under tokenUnreadableRate', async () => {
    await faults({ tokenUnreadableRate: 1 });
    try {
      const res = await tokenRequest();
      expect(res.status).toBe(200);
      expect(res.type).toContain('application/json');
      expect(() => res.json()).toThrow();
    } finally {
      await faults({ tokenUnreadableRate: null });
    }
  });

  it('is slow under tokenLatencyMs: a client whose deadline is shorter gives up', async () => {
    await faults({ tokenLatencyMs: 1500 });
    try {
      const res = request(`${sandbox.url}/oauth2/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(CREDENTIALS).toString(),
        signal: AbortSignal.timeout(300),
      });
      await expect(res).rejects.toThrow();
      // The API is not slowed by the token fault.
      expect(
        (await call('GET', '/api/product/v3/products', { headers: bearer(), body: undefined }))
          .status,
      ).toBe(200);
    } finally {
      await faults({ tokenLatencyMs: null });
    }
  });

  it("reach the gateway's client: the call is reported as not sent", async () => {
    const client = new UpstreamClient({
      baseUrl: sandbox.url,
      authUrl: sandbox.url,
      clientId: 'demo-client',
      clientSecret: SECRET,
      requestTimeoutMs: 2000,
    });
    sandbox.setFaults({ tokenResetRate: 1 });
    try {
      const err = await client.listProducts().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(GatewayError);
      expect((err as GatewayError).code).toBe(ErrorCodes.UPSTREAM_NETWORK);
      expect((err as GatewayError).details).toMatchObject({ notSent: true });
    } finally {
      sandbox.setFaults({ tokenResetRate: 0 });
      await client.close();
    }
    const again = new UpstreamClient({
      baseUrl: sandbox.url,
      authUrl: sandbox.url,
      clientId: 'demo-client',
      clientSecret: SECRET,
    });
    try {
      expect(await again.listProducts()).toContainEqual({ key: 'PACK-A', name: 'Battery pack A' });
    } finally {
      await again.close();
    }
  });

  it('are read from the sandbox configuration file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sandbox-strict-'));
    const file = join(dir, 'sandbox.yaml');
    writeFileSync(
      file,
      'faults: { tokenResetRate: 1, tokenErrorRate: 0.5, tokenLatencyMs: 200, tokenUnreadableRate: 0.1 }\n',
    );
    expect(loadSandboxConfig(file, { baseDir: dir }).faults).toEqual({
      tokenResetRate: 1,
      tokenErrorRate: 0.5,
      tokenLatencyMs: 200,
      tokenUnreadableRate: 0.1,
    });
    writeFileSync(file, 'faults: { tokenResetRate: 2 }\n');
    expect(() => loadSandboxConfig(file, { baseDir: dir })).toThrow(/tokenResetRate/);
  });
});

describe('a restart', () => {
  it('refuses connections while down, then comes back on the same address with batches, products, addresses and tokens kept', async () => {
    const s = await startSandbox({ port: 0, processingDelayMs: 400 });
    try {
      const get = (path: string, headers: Record<string, string>) =>
        request(`${s.url}${path}`, { headers }).then(async (r) => ({
          status: r.statusCode,
          json: (await r.body.json()) as Record<string, unknown>,
        }));
      const form = new URLSearchParams(CREDENTIALS).toString();
      const own = (
        (await (
          await request(`${s.url}/oauth2/token`, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: form,
          })
        ).body.json()) as { access_token: string }
      ).access_token;
      const auth = { authorization: `Bearer ${own}` };
      const upload = await request(`${s.url}/api/trace/v3/scans`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify([SCAN]),
      });
      const id = ((await upload.body.json()) as { requestId: string }).requestId;
      await request(`${s.url}/api/product/v3/products/create`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ key: 'KEPT-1', name: 'Kept', ofType: 'BatteryPack' }),
      }).then((r) => r.body.dump());
      const presigned = (await (
        await request(`${s.url}/api/trace/v3/scans/preSignedUrl`, { method: 'POST', headers: auth })
      ).body.json()) as { url: string; requestId: string };
      const app = s.app;

      // Down for 2 s: the poll below must see the port closed, and on a loaded machine one poll
      // may take longer than a shorter gap.
      const restarting = s.restart({ downMs: 2000 });
      await waitFor(
        async () =>
          request(`${s.url}/api/product/v3/products`, { headers: auth }).then(
            () => false,
            (err: { code?: string }) => err.code === 'ECONNREFUSED',
          ),
        {
          timeoutMs: 30_000,
          intervalMs: 20,
        },
      );
      await restarting;
      expect(s.app).not.toBe(app);

      // The batch was taken before the restart and finishes processing after it.
      expect(
        await waitFor(async () =>
          (await get(`/api/trace/v3/scans/${id}/status`, auth)).json.state === 'Success'
            ? true
            : undefined,
        ),
      ).toBe(true);
      expect((await get('/api/product/v3/products', auth)).json).toContainEqual({
        key: 'KEPT-1',
        name: 'Kept',
      });
      const put = await request(presigned.url, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify([SCAN]),
      });
      expect(put.statusCode).toBe(200);
      await put.body.dump();
      const next = await request(`${s.url}/api/trace/v3/scans`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify([SCAN]),
      });
      expect(BigInt(((await next.body.json()) as { requestId: string }).requestId)).toBeGreaterThan(
        BigInt(presigned.requestId),
      );
      expect(
        (
          (await (await request(`${s.url}/_sandbox/scans?limit=0`)).body.json()) as {
            count: number;
          }
        ).count,
      ).toBe(3);
    } finally {
      await s.close();
    }
  });
});
