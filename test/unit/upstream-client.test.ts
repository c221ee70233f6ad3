import { Writable } from 'node:stream';
import { MockAgent } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import { UpstreamClient, type UpstreamClientOptions } from '../../src/upstream/client.js';
import { rejection } from '../helpers/rejection.js';

// Client edge cases the sandbox does not produce, through undici's MockAgent (the client's
// Dispatcher seam). The behaviour against a real server is in test/integration/upstream-*.

const ORIGIN = 'https://svc.test';
const SECRET = 'very-secret-value-42';
const NOW = Date.parse('2025-06-01T12:00:00Z');

function jwt(claims: Record<string, unknown>): string {
  const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'HS256', typ: 'JWT' })}.${part(claims)}.c2lnbmF0dXJl`;
}

let agent: MockAgent;
function setup(extra: Partial<UpstreamClientOptions> = {}) {
  agent = new MockAgent();
  agent.disableNetConnect();
  const pool = agent.get(ORIGIN);
  const client = new UpstreamClient({
    baseUrl: ORIGIN,
    authUrl: ORIGIN,
    clientId: 'gw',
    clientSecret: SECRET,
    dispatcher: agent,
    now: () => NOW,
    ...extra,
  });
  return { pool, client };
}
afterEach(async () => agent.close());

const TOKEN = jwt({ sub: 'gw', exp: NOW / 1000 + 120 });

describe('UpstreamClient with a mocked transport', () => {
  it('sends the client credentials form and reads a text/plain product list', async () => {
    const { pool, client } = setup();
    let form = '';
    pool.intercept({ path: '/oauth2/token', method: 'POST' }).reply((opts) => {
      form = String(opts.body);
      return {
        statusCode: 200,
        data: { access_token: TOKEN, token_type: 'Bearer', expires_in: 3600 },
      };
    });
    pool
      .intercept({
        path: '/api/product/v3/products',
        method: 'GET',
        headers: { authorization: `Bearer ${TOKEN}` },
      })
      .reply(200, '[{"key":"A","name":"Pack A"}]', {
        headers: { 'content-type': 'text/plain; charset=utf-8' },
      });
    expect(await client.listProducts()).toEqual([{ key: 'A', name: 'Pack A' }]);
    expect(Object.fromEntries(new URLSearchParams(form))).toEqual({
      client_id: 'gw',
      client_secret: SECRET,
      grant_type: 'client_credentials',
    });
    expect(client.tokenInfo()).toEqual({ expiresAt: new Date(NOW + 3600_000), refreshes: 1 });
  });

  it('takes the expiry from the JWT exp claim without expires_in, else one hour', async () => {
    const { pool, client } = setup();
    pool.intercept({ path: '/oauth2/token', method: 'POST' }).reply(200, { access_token: TOKEN });
    pool.intercept({ path: '/api/product/v3/products', method: 'GET' }).reply(200, []);
    await client.listProducts();
    expect(client.tokenInfo().expiresAt?.getTime()).toBe(NOW + 120_000);

    const second = setup();
    second.pool
      .intercept({ path: '/oauth2/token', method: 'POST' })
      .reply(200, { access_token: 'opaque-token' });
    second.pool.intercept({ path: '/api/product/v3/products', method: 'GET' }).reply(200, []);
    await second.client.listProducts();
    expect(second.client.tokenInfo().expiresAt?.getTime()).toBe(NOW + 3600_000);
  });

  it('shares one token request between concurrent callers', async () => {
    const { pool, client } = setup();
    pool
      .intercept({ path: '/oauth2/token', method: 'POST' })
      .reply(200, { access_token: TOKEN, expires_in: 3600 })
      .delay(50);
    pool.intercept({ path: '/api/product/v3/products', method: 'GET' }).reply(200, []).times(5);
    await Promise.all(Array.from({ length: 5 }, () => client.listProducts()));
    expect(client.tokenInfo().refreshes).toBe(1);
    agent.assertNoPendingInterceptors();
  });

  it('names the field of an unexpected answer (UPSTREAM_RESPONSE), and refuses non-JSON', async () => {
    const { pool, client } = setup();
    pool
      .intercept({ path: '/oauth2/token', method: 'POST' })
      .reply(200, { access_token: TOKEN, expires_in: 60 });
    pool
      .intercept({ path: '/api/product/v3/products', method: 'GET' })
      .reply(200, [{ key: 1, name: 'x' }]);
    pool.intercept({ path: '/api/trace/v3/scans', method: 'POST' }).reply(202, '<html>oops</html>');
    pool
      .intercept({ path: '/api/trace/v3/scans/preSignedUrl', method: 'POST' })
      .reply(200, { url: 'relative/path', requestId: '5' });
    const shape = await rejection(client.listProducts());
    expect(shape.code).toBe(ErrorCodes.UPSTREAM_RESPONSE);
    expect(shape.message).toContain('response[0].key');
    const html = await rejection(client.uploadScans('[]'));
    expect(html).toMatchObject({
      code: ErrorCodes.UPSTREAM_RESPONSE,
      message: expect.stringContaining('not JSON'),
    });
    const url = await rejection(client.requestPresignedUpload());
    expect(url).toMatchObject({
      code: ErrorCodes.UPSTREAM_RESPONSE,
      message: expect.stringContaining('url'),
    });
  });

  it('reports 413 as UPSTREAM_HTTP 413 (not retryable) and a Retry-After date relative to its clock', async () => {
    const { pool, client } = setup();
    pool
      .intercept({ path: '/oauth2/token', method: 'POST' })
      .reply(200, { access_token: TOKEN, expires_in: 60 });
    pool
      .intercept({ path: '/api/trace/v3/scans', method: 'POST' })
      .reply(413, { title: 'Content Too Large', status: 413 });
    pool
      .intercept({ path: '/api/trace/v3/scans', method: 'POST' })
      .reply(503, 'busy', { headers: { 'retry-after': new Date(NOW + 45_000).toUTCString() } });
    expect(await rejection(client.uploadScans('[]'))).toMatchObject({
      code: ErrorCodes.UPSTREAM_HTTP,
      retryable: false,
      details: { status: 413, problem: { status: 413 } },
    });
    expect(await rejection(client.uploadScans('[]'))).toMatchObject({
      retryable: true,
      details: { status: 503, retryAfterMs: 45_000, body: 'busy' },
    });
  });

  it('reads NotFound whether the service answers it with 200 or 404', async () => {
    const { pool, client } = setup();
    pool
      .intercept({ path: '/oauth2/token', method: 'POST' })
      .reply(200, { access_token: TOKEN, expires_in: 60 });
    pool
      .intercept({ path: '/api/trace/v3/scans/77/status', method: 'GET' })
      .reply(404, { state: 'NotFound', requestId: 77, description: 'unknown', processed: 0 });
    pool
      .intercept({ path: '/api/trace/v3/scans/78/status', method: 'GET' })
      .reply(404, 'no such route');
    expect(await client.getScanStatus('77')).toEqual({
      state: 'NotFound',
      requestId: '77',
      description: 'unknown',
      processed: 0,
    });
    expect(await rejection(client.getScanStatus('78'))).toMatchObject({
      code: ErrorCodes.UPSTREAM_HTTP,
      details: { status: 404 },
    });
  });

  it('treats a refused token request as UPSTREAM_AUTH, a failing one as retryable UPSTREAM_HTTP, an unusable one as UPSTREAM_TOKEN; each not sent', async () => {
    const { pool, client } = setup();
    pool
      .intercept({ path: '/oauth2/token', method: 'POST' })
      .reply(400, { error: 'invalid_client' });
    pool.intercept({ path: '/oauth2/token', method: 'POST' }).reply(502, 'bad gateway');
    pool
      .intercept({ path: '/oauth2/token', method: 'POST' })
      .reply(200, { access_token: TOKEN, token_type: 'mac' });
    const token = { notSent: true, stage: 'token' };
    expect(await rejection(client.listProducts())).toMatchObject({
      code: ErrorCodes.UPSTREAM_AUTH,
      retryable: false,
      details: { error: 'invalid_client', ...token },
    });
    expect(await rejection(client.listProducts())).toMatchObject({
      code: ErrorCodes.UPSTREAM_HTTP,
      retryable: true,
      details: { status: 502, ...token },
    });
    expect(await rejection(client.listProducts())).toMatchObject({
      code: ErrorCodes.UPSTREAM_TOKEN,
      message: expect.stringContaining('expected Bearer'),
      details: token,
    });
  });

  it('PUTs to a pre-signed address without Authorization', async () => {
    const { client } = setup();
    const s3 = agent.get('https://bucket.s3.test');
    let headers: Record<string, unknown> = {};
    s3.intercept({ path: '/up?X-Amz-Signature=abc', method: 'PUT' }).reply((opts) => {
      headers = opts.headers as Record<string, unknown>;
      return { statusCode: 200, data: '' };
    });
    s3.intercept({ path: '/up?X-Amz-Signature=abc', method: 'PUT' }).reply(
      403,
      '<Error><Code>AccessDenied</Code></Error>',
    );
    await client.putPresigned('https://bucket.s3.test/up?X-Amz-Signature=abc', '[]');
    expect(Object.keys(headers).map((h) => h.toLowerCase())).not.toContain('authorization');
    expect(headers['content-type']).toBe('application/json');
    expect(
      await rejection(client.putPresigned('https://bucket.s3.test/up?X-Amz-Signature=abc', '[]')),
    ).toMatchObject({
      code: ErrorCodes.PRESIGNED_REFUSED,
    });
    expect(client.tokenInfo().refreshes).toBe(0);
  });

  it('never logs the secret or the token, even at trace level through a 401 refresh', async () => {
    let output = '';
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        output += chunk.toString();
        done();
      },
    });
    const { pool, client } = setup({ logger: createLogger({ level: 'trace', destination: sink }) });
    const second = jwt({ sub: 'gw', exp: NOW / 1000 + 300, n: 2 });
    pool
      .intercept({ path: '/oauth2/token', method: 'POST' })
      .reply(200, { access_token: TOKEN, expires_in: 60 });
    pool
      .intercept({ path: '/api/product/v3/products', method: 'GET' })
      .reply(401, { title: 'Unauthorized', status: 401 });
    pool
      .intercept({ path: '/oauth2/token', method: 'POST' })
      .reply(200, { access_token: second, expires_in: 60 });
    pool
      .intercept({
        path: '/api/product/v3/products',
        method: 'GET',
        headers: { authorization: `Bearer ${second}` },
      })
      .reply(200, []);
    expect(await client.listProducts()).toEqual([]);
    expect(client.tokenInfo().refreshes).toBe(2);
    expect(output).toContain('access token refused');
    for (const secret of [SECRET, TOKEN, second, TOKEN.split('.')[1] ?? 'x'])
      expect(output).not.toContain(secret);
  });
});

describe('UpstreamClient reads what a real service may send beyond the documented form', () => {
  function withToken() {
    const { pool, client } = setup();
    pool
      .intercept({ path: '/oauth2/token', method: 'POST' })
      .reply(200, { access_token: TOKEN, expires_in: 3600 });
    return { pool, client };
  }

  it('accepts a numeric requestId in upload and pre-signed answers, as a string', async () => {
    const { pool, client } = withToken();
    pool.intercept({ path: '/api/trace/v3/scans', method: 'POST' }).reply(200, { requestId: 4711 });
    pool
      .intercept({ path: '/api/trace/v3/scans/preSignedUrl', method: 'POST' })
      .reply(200, { url: 'https://bucket.test/x?sig=1', requestId: 4712 });
    expect(await client.uploadScans('[]')).toEqual({ requestId: '4711' });
    expect(await client.requestPresignedUpload()).toEqual({
      url: 'https://bucket.test/x?sig=1',
      requestId: '4712',
    });
  });

  it('accepts a string requestId and a status without description or processed', async () => {
    const { pool, client } = withToken();
    pool
      .intercept({ path: '/api/trace/v3/scans/abc-1/status', method: 'GET' })
      .reply(200, { state: 'InProgress', requestId: 'abc-1' });
    expect(await client.getScanStatus('abc-1')).toEqual({
      state: 'InProgress',
      requestId: 'abc-1',
      description: '',
      processed: 0,
    });
  });

  it('reads a 404 with a ProblemDetails body as NotFound', async () => {
    const { pool, client } = withToken();
    pool
      .intercept({ path: '/api/trace/v3/scans/99/status', method: 'GET' })
      .reply(
        404,
        { type: 'about:blank', title: 'Not Found', status: 404 },
        { headers: { 'content-type': 'application/problem+json' } },
      );
    expect((await client.getScanStatus('99')).state).toBe('NotFound');
  });

  it('still refuses a status answer without a known state', async () => {
    const { pool, client } = withToken();
    pool
      .intercept({ path: '/api/trace/v3/scans/7/status', method: 'GET' })
      .reply(200, { state: 'Done', requestId: 7 });
    const err = await rejection(client.getScanStatus('7'));
    expect(err.code).toBe(ErrorCodes.UPSTREAM_RESPONSE);
    expect(err.message).toContain('state');
  });
});
