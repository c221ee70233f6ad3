import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { parseConfigText } from '../../src/config/load.js';
import type { RouteEntry } from '../../src/listener/route-guard.js';
import { silentLogger } from '../../src/log.js';
import { makeCa, type IssuedCert, type TestCa } from '../helpers/tls-ca.js';

const INGEST = 'encoded-paths-ingest-token-0123';
const READ = 'encoded-paths-read-token-01234';
const ADMIN = 'encoded-paths-admin-token-0123';

const api = {
  uploadScans: async () => ({ requestId: 'r-1' }),
  requestPresignedUpload: async () => ({ url: 'http://127.0.0.1:9/x', requestId: 'r-2' }),
  putPresigned: async () => undefined,
  getScanStatus: async (requestId: string) => ({ state: 'Success' as const, requestId }),
};

/** A concrete path of a route pattern: each parameter and the wildcard given a sample value. */
function concrete(url: string): string {
  return url
    .replace(/:action\b/, 'retry')
    .replace(/:dcpKey\b/, 'EOL-3')
    .replace(/:[A-Za-z]+/g, 'x')
    .replace(/\*$/, 'W0');
}

const hex = (c: string, upper = false) => {
  const h = c.charCodeAt(0).toString(16).padStart(2, '0');
  return `%${upper ? h.toUpperCase() : h}`;
};

/**
 * The encodings a client can send for `path` with `curl --path-as-is`: one letter of each segment
 * percent-encoded (lower and upper case hex), every letter encoded, a slash as `%2F`, the first
 * letter of the last segment double-encoded, a trailing slash, a doubled slash, and changes of case.
 */
function variants(path: string): string[] {
  const segments = path.split('/').slice(1);
  const out = new Set<string>();
  segments.forEach((seg, i) => {
    const at = seg.search(/[A-Za-z]/);
    if (at < 0) return;
    for (const upper of [false, true]) {
      const s = [...segments];
      s[i] = seg.slice(0, at) + hex(seg[at]!, upper) + seg.slice(at + 1);
      out.add(`/${s.join('/')}`);
    }
  });
  out.add(path.replace(/[A-Za-z]/g, (c) => hex(c)));
  for (let i = 1; i < segments.length; i++)
    out.add(`/${segments.slice(0, i).join('/')}%2F${segments.slice(i).join('/')}`);
  const last = segments.at(-1) ?? '';
  const first = last.search(/[A-Za-z]/);
  if (first >= 0) {
    const prefix = `/${segments.slice(0, -1).join('/')}${segments.length > 1 ? '/' : ''}`;
    out.add(
      `${prefix}${last.slice(0, first)}%25${hex(last[first]!).slice(1)}${last.slice(first + 1)}`,
    );
    out.add(`${prefix}${last.toUpperCase()}`);
  }
  out.add(`${path}/`);
  out.add(`/${path}`);
  out.add(path.toUpperCase());
  out.delete(path);
  return [...out];
}

interface Answer {
  status: number;
  body: string;
}

/**
 * The gateway's local listener over HTTPS with client certificates for ingest, read, admin and
 * ingest tokens: every route of the server's own table, with every encoding of its path, gets the
 * answer its plain path gets, or 404 when the router matches no route for it; never less checking.
 */
describe('one decoded path for every decision', () => {
  let dir: string;
  let app: App;
  let serverCa: TestCa;
  let client: IssuedCert;
  let foreign: IssuedCert;
  let expired: IssuedCert;
  let selfSigned: IssuedCert;
  let routes: readonly RouteEntry[];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sg-encoded-paths-'));
    serverCa = makeCa(dir, 'server');
    const clientCa = makeCa(dir, 'clients');
    const foreignCa = makeCa(dir, 'foreign');
    const leaf = serverCa.issue('gw', { serial: 0x51, kind: 'server', days: 3 });
    client = clientCa.issue('mes', { serial: 0x71, kind: 'client' });
    expired = clientCa.issue('mes-expired', { serial: 0x72, kind: 'client', days: -1 });
    foreign = foreignCa.issue('stranger', { serial: 0x73, kind: 'client' });
    const self = makeCa(dir, 'self');
    selfSigned = { ...client, certFile: self.certFile, keyFile: self.keyFile };
    const file = join(dir, 'config.yaml');
    const yaml = `site: { id: encoded, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${join(dir, 'gw.db')} }
delivery: { mode: direct, maxBatchDelayMs: 50 }
http:
  listen: 127.0.0.1:0
  tls: { certFile: ${leaf.certFile}, keyFile: ${leaf.keyFile}, clientCaFile: ${clientCa.certFile} }
dcps:
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A, duplicateWindowMs: 0 }
inputs:
  - { id: mes, type: http, dcp: EOL-3 }
`;
    app = buildApp(
      { file, config: parseConfigText(yaml, file), clientSecret: 'x' },
      {
        logger: silentLogger(),
        api,
        readToken: READ,
        adminToken: ADMIN,
        env: { SCAN_GATEWAY_INGEST_TOKEN: INGEST },
      },
    );
    await app.start();
    routes = app.httpRoutes;
  }, 60_000);
  afterAll(async () => {
    await app?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** One request on a connection of its own, the path sent as given (no normalising). */
  function call(
    method: string,
    path: string,
    opts: { token?: string; as?: IssuedCert; body?: string } = {},
  ): Promise<Answer> {
    const url = new URL(app.httpUrl!);
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: url.hostname,
          port: Number(url.port),
          method,
          path,
          ca: serverCa.pem,
          servername: 'localhost',
          agent: false,
          headers: {
            ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
            ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
          },
          ...(opts.as
            ? { cert: readFileSync(opts.as.certFile), key: readFileSync(opts.as.keyFile) }
            : {}),
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.once('error', reject);
      req.end(opts.body);
    });
  }

  const refusedCount = async (reason: string) => {
    const text = (await call('GET', '/metrics', { token: READ })).body;
    const m = new RegExp(`scan_gateway_http_refused_total\\{reason="${reason}"\\} (\\d+)`).exec(
      text,
    );
    return Number(m?.[1] ?? 0);
  };

  it('collects the route table from the server, each route with its guard', () => {
    const key = (r: RouteEntry) => `${r.method} ${r.url} ${r.guard}`;
    const table = routes.map(key);
    for (const expected of [
      'POST /api/v1/reads ingest',
      'GET /healthz open',
      'GET /readyz open',
      'GET /api/v1/ha/leader open',
      'GET /api/v1/status read',
      'GET /metrics read',
      'GET /api/v1/items/* read',
      'GET /station/:dcpKey read',
      'POST /api/v1/admin/:action admin',
    ])
      expect(table).toContain(expected);
    expect(new Set(routes.map((r) => r.guard))).toEqual(
      new Set(['open', 'read', 'admin', 'ingest']),
    );
  });

  it(
    'answers every encoded path of every route as its plain path, or 404 when no route matches',
    { timeout: 240_000 },
    async () => {
      // Who asks: without credentials for every route; for ingest also with its token but no
      // client certificate, and with certificates the server must refuse.
      const askers = (r: RouteEntry) =>
        r.guard === 'ingest'
          ? [
              { name: 'token, no certificate', token: INGEST },
              { name: 'token, foreign CA', token: INGEST, as: foreign },
              { name: 'token, expired', token: INGEST, as: expired },
              { name: 'token, self-signed', token: INGEST, as: selfSigned },
              { name: 'certificate, no token', as: client },
            ]
          : [{ name: 'no credentials' }];
      const seen: string[] = [];
      let reachedEncoded = 0;
      for (const route of routes) {
        const plainPath = concrete(route.url);
        const body = route.method === 'POST' ? '{"code":"ENCODED-1"}' : undefined;
        for (const asker of askers(route)) {
          const opts = { ...asker, ...(body !== undefined ? { body } : {}) };
          const plain = await call(route.method, plainPath, opts);
          // The plain path is refused wherever a guard stands.
          if (route.guard !== 'open') expect([401, 403]).toContain(plain.status);
          for (const path of variants(plainPath)) {
            const got = await call(route.method, path, opts);
            seen.push(`${route.method} ${path} (${asker.name}): ${got.status}`);
            if (got.status === 404 && plain.status !== 404) {
              // Only when the router matched nothing: never a route's own 404 past its guard.
              if (route.method !== 'HEAD') expect(got.body).toMatch(/Route .* not found/);
              continue;
            }
            expect(
              { path, asker: asker.name, status: got.status },
              `${route.method} ${path} as ${asker.name}`,
            ).toEqual({ path, asker: asker.name, status: plain.status });
            if (/%(?!2F|25)[0-9A-Fa-f]{2}/.test(path)) reachedEncoded++;
          }
        }
      }
      // The single-letter encodings do reach the routes: the walk tests the routes' checks, not 404s.
      expect(reachedEncoded).toBeGreaterThan(routes.length);
      console.log(
        `encoded paths: ${seen.length} requests over ${routes.length} routes, ${reachedEncoded} encoded paths reached their route`,
      );
    },
  );

  it('refuses the encoded ingest paths of the issue and counts them as ingest refusals', async () => {
    const read = async () => ({
      ingest: await refusedCount('ingest_token'),
      cert: await refusedCount('ingest_client_cert'),
      readToken: await refusedCount('read_token'),
    });
    const before = await read();
    const body = '{"code":"ENCODED-2"}';
    for (const path of ['/api/v1/reads', '/api/v1/%72eads', '/api/%761/reads']) {
      // No client certificate: 401, however the path is spelt.
      expect((await call('POST', path, { token: INGEST, body })).status).toBe(401);
      for (const as of [foreign, expired, selfSigned])
        expect((await call('POST', path, { token: INGEST, as, body })).status).toBe(403);
      // The right certificate, no token: 401 from the ingest route, counted as such.
      expect((await call('POST', path, { as: client, body })).status).toBe(401);
    }
    const after = await read();
    expect(after.cert - before.cert).toBe(12);
    expect(after.ingest - before.ingest).toBe(3);
    expect(after.readToken).toBe(before.readToken);
    // The right certificate and token: the same answer on the encoded path as on the plain one.
    expect((await call('POST', '/api/v1/reads', { token: INGEST, as: client, body })).status).toBe(
      202,
    );
    expect(
      (await call('POST', '/api/v1/%72eads', { token: INGEST, as: client, body })).status,
    ).toBe(202);
  });
});
