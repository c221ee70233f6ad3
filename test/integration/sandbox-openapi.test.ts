import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { waitFor } from '../helpers/wait.js';

// Every answer the sandbox gives must be one the committed OpenAPI document describes: documented
// status, documented content type, body valid against the document's schema (ajv).

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const SCAN = {
  reference: 'R-1',
  timeStamp: '2025-01-02T03:04:05',
  dcpKey: 'GI-01',
  productModelKey: 'PACK-A',
  parents: [],
  attributes: [],
};

type Json = Record<string, unknown>;
const doc = parse(readFileSync(join(PACKAGE_ROOT, 'docs/upstream-openapi.yaml'), 'utf8')) as Json;
const ajv = new Ajv({ strict: false, allErrors: true });
ajv.addSchema({ ...doc, $id: 'doc' });

const pointer = (...parts: string[]) =>
  parts.map((p) => `/${p.replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');

function at(path: string): unknown {
  return path
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce<unknown>((node, key) => (node as Json | undefined)?.[key], doc);
}

let sandbox: RunningSandbox;
let token: string;
let checked = 0;

/** Sends a request and checks its answer against the document's operation `method template`. */
async function exchange(
  method: string,
  template: string,
  path: string,
  init: { body?: string; headers?: Record<string, string> } = {},
) {
  const res = await request(`${sandbox.url}${path}`, { method: method as 'GET', ...init });
  const text = await res.body.text();
  const status = String(res.statusCode);
  const opPath = pointer('paths', template, method.toLowerCase(), 'responses');
  const responses = at(opPath) as Json;
  const key = [status, `${status[0]}XX`, 'default'].find((k) => k in responses);
  expect(key, `${method} ${template} ${status} is documented`).toBeDefined();
  let responsePath = `${opPath}${pointer(String(key))}`;
  const ref = (at(responsePath) as Json).$ref;
  if (typeof ref === 'string') responsePath = ref.slice(1);
  const content = (at(responsePath) as Json).content as Json | undefined;
  if (content === undefined) return { status: res.statusCode, text };
  const type = String(res.headers['content-type']).split(';')[0]?.trim() ?? '';
  expect(Object.keys(content), `${method} ${template} ${status} content type`).toContain(type);
  const validator = ajv.getSchema(`doc#${responsePath}${pointer('content', type, 'schema')}`);
  const body = JSON.parse(text) as unknown;
  const valid = validator?.(body);
  expect(
    valid ? [] : validator?.errors,
    `${method} ${template} ${status} body: ${text.slice(0, 300)}`,
  ).toEqual([]);
  checked += 1;
  return { status: res.statusCode, text, body: body as Json };
}

const json = (body: unknown, extra: Record<string, string> = {}) => ({
  body: JSON.stringify(body),
  headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, ...extra },
});
const auth = (extra: Record<string, string> = {}) => ({
  headers: { authorization: `Bearer ${token}`, ...extra },
});

beforeAll(async () => {
  // Each of Received and InProgress lasts 1 s: long beside a poll every 20 ms on a loaded machine.
  sandbox = await startSandbox({ port: 0, processingDelayMs: 2000 });
  const form = { 'content-type': 'application/x-www-form-urlencoded' };
  const tokenBody = new URLSearchParams({
    client_id: 'demo-client',
    client_secret: SECRET,
    grant_type: 'client_credentials',
  }).toString();
  const answer = await exchange('POST', '/oauth2/token', '/oauth2/token', {
    headers: form,
    body: tokenBody,
  });
  token = (answer.body as { access_token: string }).access_token;
});
afterAll(async () => sandbox.close());

describe('sandbox answers match docs/upstream-openapi.yaml', () => {
  it('token endpoint errors', async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    expect(
      (
        await exchange('POST', '/oauth2/token', '/oauth2/token', {
          headers: form,
          body: 'grant_type=client_credentials&client_id=x&client_secret=y',
        })
      ).status,
    ).toBe(401);
    expect(
      (
        await exchange('POST', '/oauth2/token', '/oauth2/token', {
          headers: form,
          body: 'grant_type=password',
        })
      ).status,
    ).toBe(400);
  });

  it('products: list in every content type, create, 400, 409, 401', async () => {
    for (const accept of ['application/json', 'text/json', 'text/plain']) {
      expect(
        (
          await exchange(
            'GET',
            '/api/product/v3/products',
            '/api/product/v3/products',
            auth({ accept }),
          )
        ).status,
      ).toBe(200);
    }
    const create = '/api/product/v3/products/create';
    expect(
      (
        await exchange(
          'POST',
          create,
          create,
          json({ key: 'OA-1', name: 'n', ofType: 'BatteryPack' }),
        )
      ).status,
    ).toBe(200);
    expect(
      (
        await exchange(
          'POST',
          create,
          create,
          json({ key: 'OA-1', name: 'n', ofType: 'BatteryPack' }),
        )
      ).status,
    ).toBe(409);
    expect(
      (await exchange('POST', create, create, json({ key: 'OA-2', ofType: 'BatteryPack' }))).status,
    ).toBe(400);
    expect(
      (await exchange('GET', '/api/product/v3/products', '/api/product/v3/products')).status,
    ).toBe(401);
  });

  it('scans: 202, 400, 413, pre-signed URL, every status state, 400 on a bad id', async () => {
    const scans = '/api/trace/v3/scans';
    const statusOf = (id: string) =>
      exchange(
        'GET',
        '/api/trace/v3/scans/{requestId}/status',
        `/api/trace/v3/scans/${id}/status`,
        auth(),
      );
    const ok = await exchange('POST', scans, scans, json([SCAN]));
    const bad = await exchange('POST', scans, scans, json([SCAN, { ...SCAN, dcpKey: 'NOPE' }]));

    const states = new Set<string>();
    for (const id of [String(ok.body?.requestId), String(bad.body?.requestId)]) {
      await waitFor(
        async () => {
          const s = (await statusOf(id)).body as { state: string };
          states.add(s.state);
          return s.state !== 'Received' && s.state !== 'InProgress';
        },
        { intervalMs: 20 },
      );
    }
    states.add(((await statusOf('1')).body as { state: string }).state);
    expect([...states].sort()).toEqual([
      'HasFailures',
      'InProgress',
      'NotFound',
      'Received',
      'Success',
    ]);
    expect(
      (
        await exchange(
          'GET',
          '/api/trace/v3/scans/{requestId}/status',
          '/api/trace/v3/scans/x1/status',
          auth(),
        )
      ).status,
    ).toBe(400);
    expect((await exchange('POST', scans, scans, json([{ ...SCAN, timeStamp: 'x' }]))).status).toBe(
      400,
    );
    expect(
      (await exchange('POST', scans, scans, { ...json([]), body: `[${' '.repeat(6_081_740)}]` }))
        .status,
    ).toBe(413);
    expect(
      (await exchange('POST', scans, scans, json([SCAN], { 'content-type': 'text/json' }))).status,
    ).toBe(415);
    expect(
      (
        await exchange(
          'POST',
          '/api/trace/v3/scans/preSignedUrl',
          '/api/trace/v3/scans/preSignedUrl',
          auth(),
        )
      ).status,
    ).toBe(200);
  });

  it('injected 429, 500 and 503, also from the token endpoint', async () => {
    sandbox.setFaults({ rateLimitRate: 1 });
    expect(
      (await exchange('GET', '/api/product/v3/products', '/api/product/v3/products', auth()))
        .status,
    ).toBe(429);
    sandbox.setFaults({ rateLimitRate: 0, errorRate: 1 });
    const codes = [];
    for (let i = 0; i < 2; i++)
      codes.push(
        (await exchange('POST', '/api/trace/v3/scans', '/api/trace/v3/scans', json([SCAN]))).status,
      );
    expect(codes.sort()).toEqual([500, 503]);
    sandbox.setFaults({ errorRate: 0, tokenErrorRate: 1 });
    const form = {
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials',
    };
    const tokenCodes = [];
    for (let i = 0; i < 2; i++)
      tokenCodes.push((await exchange('POST', '/oauth2/token', '/oauth2/token', form)).status);
    expect(tokenCodes.sort()).toEqual([500, 503]);
    sandbox.setFaults({ tokenErrorRate: 0 });
  });

  it('checked a body in every case', () => {
    expect(checked).toBeGreaterThanOrEqual(20);
  });
});
