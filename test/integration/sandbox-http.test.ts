import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeProtectedHeader, decodeJwt } from 'jose';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { MAX_DIRECT_BODY_BYTES } from '@scan-gateway/contract';
import { waitFor } from '../helpers/wait.js';

// The sandbox's wire behaviour over real HTTP, where the client would hide it: content types,
// problem details, validation messages, the pre-signed XML errors, the admin endpoints.

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const SCAN = {
  reference: 'R-1',
  timeStamp: '2025-01-02T03:04:05',
  dcpKey: 'GI-01',
  productModelKey: 'PACK-A',
  parents: [],
  attributes: [],
};

let sandbox: RunningSandbox;
let token: string;

/** A sandbox other than the file's, and the token it issued (none: calls without one). */
interface Other {
  url: string;
  token?: string;
}

async function call(
  method: string,
  path: string,
  options: {
    body?: string;
    headers?: Record<string, string>;
    auth?: boolean;
    on?: Other;
  } = {},
) {
  const bearer = options.on ? options.on.token : token;
  const headers: Record<string, string> = {
    ...(options.auth === false || !bearer ? {} : { authorization: `Bearer ${bearer}` }),
    ...options.headers,
  };
  const res = await request(`${(options.on ?? sandbox).url}${path}`, {
    method: method as 'GET',
    headers,
    ...(options.body !== undefined ? { body: options.body } : {}),
  });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    type: String(res.headers['content-type']),
    headers: res.headers,
    text,
    json: () => JSON.parse(text) as Record<string, unknown>,
  };
}

function tokenForm(fields: Record<string, string>, on?: Other) {
  return call('POST', '/oauth2/token', {
    auth: false,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
    ...(on ? { on } : {}),
  });
}

const demoToken = async (on?: Other) =>
  (
    await tokenForm(
      { client_id: 'demo-client', client_secret: SECRET, grant_type: 'client_credentials' },
      on,
    )
  ).json().access_token as string;

beforeAll(async () => {
  // Pre-signed addresses valid as long as by default: a PUT here never races their expiry, on
  // however slow a machine. The expiry is tested on a sandbox of its own.
  sandbox = await startSandbox({ port: 0, processingDelayMs: 0 });
  token = await demoToken();
});
afterAll(async () => sandbox.close());

describe('token endpoint', () => {
  it('issues an HS256 JWT for the client, valid one hour', () => {
    expect(decodeProtectedHeader(token)).toMatchObject({ alg: 'HS256', typ: 'JWT' });
    const claims = decodeJwt(token);
    expect(claims.sub).toBe('demo-client');
    const lifetime = (claims.exp ?? 0) - (claims.iat ?? 0); // iat whole seconds, exp to the ms
    expect(lifetime).toBeGreaterThanOrEqual(3600);
    expect(lifetime).toBeLessThan(3601);
  });

  it('answers OAuth errors: invalid_client 401, unsupported_grant_type and invalid_request 400', async () => {
    const wrong = await tokenForm({
      client_id: 'demo-client',
      client_secret: 'nope',
      grant_type: 'client_credentials',
    });
    expect([wrong.status, wrong.json().error]).toEqual([401, 'invalid_client']);
    const unknown = await tokenForm({
      client_id: 'someone',
      client_secret: SECRET,
      grant_type: 'client_credentials',
    });
    expect([unknown.status, unknown.json().error]).toEqual([401, 'invalid_client']);
    const grant = await tokenForm({
      client_id: 'demo-client',
      client_secret: SECRET,
      grant_type: 'password',
    });
    expect([grant.status, grant.json().error]).toEqual([400, 'unsupported_grant_type']);
    const missing = await tokenForm({ grant_type: 'client_credentials' });
    expect([missing.status, missing.json().error]).toEqual([400, 'invalid_request']);
  });

  it('takes the lifetime of new tokens from the faults until the override is cleared with null', async () => {
    const fields = {
      client_id: 'demo-client',
      client_secret: SECRET,
      grant_type: 'client_credentials',
    };
    sandbox.setFaults({ tokenTtlSec: 5 });
    expect((await tokenForm(fields)).json().expires_in).toBe(5);
    const cleared = await call('PUT', '/_sandbox/faults', {
      auth: false,
      headers: { 'content-type': 'application/json' },
      body: '{"tokenTtlSec":null}',
    });
    expect(cleared.json()).not.toHaveProperty('tokenTtlSec');
    expect((await tokenForm(fields)).json().expires_in).toBe(3600);
  });

  it('also takes the credentials as HTTP Basic', async () => {
    const basic = Buffer.from(`demo-client:${SECRET}`).toString('base64');
    const res = await call('POST', '/oauth2/token', {
      auth: false,
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${basic}`,
      },
      body: 'grant_type=client_credentials',
    });
    expect(res.json()).toMatchObject({ token_type: 'Bearer', expires_in: 3600 });
  });
});

describe('products', () => {
  it('answers the list in the content type asked for', async () => {
    for (const [accept, type] of [
      ['text/plain', 'text/plain'],
      ['text/json', 'text/json'],
      ['application/json', 'application/json'],
      ['*/*', 'application/json'],
    ] as const) {
      const res = await call('GET', '/api/product/v3/products', { headers: { accept } });
      expect(res.type, accept).toContain(type);
      expect(JSON.parse(res.text)).toContainEqual({ key: 'PACK-A', name: 'Battery pack A' });
    }
  });

  it('takes create bodies as text/json and application/*+json; names missing fields', async () => {
    const ok = await call('POST', '/api/product/v3/products/create', {
      headers: { 'content-type': 'text/json' },
      body: JSON.stringify({ key: 'TJ-1', name: 'n', ofType: 'BatteryPack' }),
    });
    expect(ok.status).toBe(200);
    const vendor = await call('POST', '/api/product/v3/products/create', {
      headers: { 'content-type': 'application/vnd.example+json' },
      body: JSON.stringify({ key: 'TJ-2', name: 'n', ofType: 'BatteryPack' }),
    });
    expect(vendor.json()).toMatchObject({ key: 'TJ-2', version: 0 });
    const missing = await call('POST', '/api/product/v3/products/create', {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ key: 'TJ-3', ofType: 'BatteryPack' }),
    });
    expect(missing.status).toBe(400);
    expect(missing.type).toContain('application/problem+json');
    expect(missing.json()).toMatchObject({ status: 400, errors: { name: [expect.any(String)] } });
  });
});

describe('scan upload', () => {
  const post = (body: string) =>
    call('POST', '/api/trace/v3/scans', { headers: { 'content-type': 'application/json' }, body });

  it('answers 202 with a string requestId', async () => {
    const res = await post(JSON.stringify([SCAN]));
    expect(res.status).toBe(202);
    expect(res.json().requestId).toEqual(expect.stringMatching(/^\d+$/));
  });

  it('names index and field of an invalid scan, and refuses non-arrays, empty arrays and broken JSON', async () => {
    const bad = await post(
      JSON.stringify([
        SCAN,
        { ...SCAN, timeStamp: '2025-01-02 03:04' },
        { ...SCAN, dcpKey: undefined },
      ]),
    );
    expect(bad.status).toBe(400);
    const body = bad.json() as { detail: string; errors: Record<string, string[]> };
    expect(body.detail).toContain('[1].timeStamp');
    expect(Object.keys(body.errors)).toEqual(['[1].timeStamp', '[2].dcpKey']);
    for (const text of ['{"a":1}', '[]', '[{"reference":']) {
      const res = await post(text);
      expect(res.status, text).toBe(400);
      expect(res.json().status, text).toBe(400);
    }
  });

  it('draws the 413 line at 5.8 MiB exactly', async () => {
    const one = JSON.stringify([SCAN]);
    const exact = one.slice(0, -1) + ' '.repeat(MAX_DIRECT_BODY_BYTES - one.length) + ']';
    expect((await post(exact)).status).toBe(202);
    const over = await post(`${exact} `);
    expect(over.status).toBe(413);
    expect(over.json()).toMatchObject({ status: 413, limitBytes: MAX_DIRECT_BODY_BYTES });
  });

  it('answers 400 to a status request for a non-numeric id', async () => {
    const res = await call('GET', '/api/trace/v3/scans/abc/status');
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ errors: { requestId: ['must be a number'] } });
  });
});

describe('pre-signed upload', () => {
  async function address(on?: Other) {
    return (await call('POST', '/api/trace/v3/scans/preSignedUrl', on ? { on } : {})).json() as {
      url: string;
      requestId: string;
    };
  }
  const put = (
    url: string,
    body: string,
    headers: Record<string, string> = { 'content-type': 'application/json' },
  ) =>
    request(url, { method: 'PUT', body, headers }).then(async (r) => ({
      status: r.statusCode,
      type: String(r.headers['content-type']),
      text: await r.body.text(),
    }));

  it('answers S3-style 403 XML for a second PUT, an expired address and an unknown one', async () => {
    const a = await address();
    expect((await put(a.url, JSON.stringify([SCAN]))).status).toBe(200);
    const again = await put(a.url, JSON.stringify([SCAN]));
    expect(again.status).toBe(403);
    expect(again.type).toContain('application/xml');
    expect(again.text).toMatch(
      /<Error><Code>AccessDenied<\/Code><Message>Pre-signed address has been used already<\/Message>/,
    );

    // Valid 1 ms, and used 20 ms after it was issued at the earliest.
    const brief = await startSandbox({ port: 0, processingDelayMs: 0, presignedTtlMs: 1 });
    try {
      const b = await address({ url: brief.url, token: await demoToken(brief) });
      await new Promise((r) => setTimeout(r, 20));
      expect((await put(b.url, '[]')).text).toContain('<Message>Request has expired</Message>');
    } finally {
      await brief.close();
    }
    expect((await put(`${sandbox.url}/_presigned/nothing`, '[]')).text).toContain(
      '<Code>AccessDenied</Code>',
    );
  });

  it('fails content that is not an array of scans when processing it, not on PUT', async () => {
    const status = async (id: string) =>
      (await call('GET', `/api/trace/v3/scans/${id}/status`)).json();
    const a = await address();
    expect((await put(a.url, 'not json')).status).toBe(200);
    expect(
      await waitFor(async () =>
        (await status(a.requestId)).state === 'Failed' ? status(a.requestId) : undefined,
      ),
    ).toMatchObject({
      processed: 0,
      failed: 0,
      failures: [],
    });
    const b = await address();
    await put(b.url, JSON.stringify([SCAN, { reference: 'R-X' }]));
    expect(
      await waitFor(async () =>
        (await status(b.requestId)).state === 'HasFailures' ? status(b.requestId) : undefined,
      ),
    ).toMatchObject({
      requestId: Number(b.requestId),
      failures: [{ reference: 'R-X', reason: 'Scan could not be read' }],
    });
  });
});

describe('admin endpoints', () => {
  it('lists accepted scans in order with via and time, and clears them', async () => {
    await call('DELETE', '/_sandbox/scans', { auth: false });
    const id = (
      await call('POST', '/api/trace/v3/scans', {
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify([
          { ...SCAN, reference: 'A' },
          { ...SCAN, reference: 'B', extra: 'kept' },
        ]),
      })
    ).json().requestId;
    const log = (await call('GET', '/_sandbox/scans', { auth: false })).json() as {
      count: number;
      scans: Record<string, unknown>[];
    };
    expect(log.count).toBe(2);
    expect(
      log.scans.map((s) => [s.requestId, s.via, (s.scan as { reference: string }).reference]),
    ).toEqual([
      [id, 'direct', 'A'],
      [id, 'direct', 'B'],
    ]);
    expect(log.scans[1]?.scan).toMatchObject({ extra: 'kept' });
    expect(new Date(String(log.scans[0]?.receivedAt)).toISOString()).toBe(log.scans[0]?.receivedAt);
    await call('DELETE', '/_sandbox/scans', { auth: false });
    expect((await call('GET', '/_sandbox/scans', { auth: false })).json()).toMatchObject({
      count: 0,
      scans: [],
    });
  });

  it('keeps a request log without header values', async () => {
    await call('GET', '/api/product/v3/products');
    const text = (await call('GET', '/_sandbox/requests', { auth: false })).text;
    expect(JSON.parse(text).requests).toContainEqual(
      expect.objectContaining({ method: 'GET', path: '/api/product/v3/products', status: 200 }),
    );
    expect(text).not.toContain(token);
    expect(text).not.toContain('_sandbox');
  });

  it('refuses invalid fault settings with 400', async () => {
    const res = await call('PUT', '/_sandbox/faults', {
      auth: false,
      headers: { 'content-type': 'application/json' },
      body: '{"errorRate":2}',
    });
    expect(res.status).toBe(400);
    expect(res.json().detail).toContain('errorRate');
    const unknown = await call('PUT', '/_sandbox/faults', {
      auth: false,
      headers: { 'content-type': 'application/json' },
      body: '{"chaos":1}',
    });
    expect(unknown.status).toBe(400);
  });

  it('answers unknown routes with 404 problem details', async () => {
    const res = await call('GET', '/api/nothing');
    expect(res.status).toBe(404);
    expect(res.json()).toMatchObject({ status: 404, title: 'Not Found' });
  });
});
