import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCodes, GatewayError } from '../../src/errors.js';
import { UpstreamClient, type UpstreamClientOptions } from '../../src/upstream/client.js';

// The bounds of the upstream edge against real listening servers, each scripted to misbehave as a
// hostile or broken network would: dripping, flooding, redirecting, answering tokens oddly.

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

interface Scripted {
  url: string;
  /** Every request the server got: method, path and the Authorization header (a test credential). */
  requests: { method: string; path: string; authorization?: string | undefined }[];
  server: Server;
}

const servers: Server[] = [];
const clients: UpstreamClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

async function serve(handler: Handler): Promise<Scripted> {
  const requests: Scripted['requests'] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests.push({
        method: req.method ?? '',
        path: req.url ?? '',
        authorization: req.headers.authorization,
      });
      handler(req, res, Buffer.concat(chunks).toString('utf8'));
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests, server };
}

const TOKEN_OK = JSON.stringify({ access_token: 'tok-1', token_type: 'Bearer', expires_in: 3600 });

function client(
  baseUrl: string,
  authUrl = baseUrl,
  extra: Partial<UpstreamClientOptions> = {},
): UpstreamClient {
  const c = new UpstreamClient({ baseUrl, authUrl, clientId: 'c', clientSecret: 's', ...extra });
  clients.push(c);
  return c;
}

async function rejection(p: Promise<unknown>): Promise<GatewayError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof GatewayError))
    throw new Error(`expected a GatewayError, got ${String(err)}`);
  return err;
}

describe('whole-exchange deadline', () => {
  it('ends a products list that drips one byte per second at requestTimeoutMs, though no single gap reaches a timeout', async () => {
    const drips: NodeJS.Timeout[] = [];
    const svc = await serve((req, res) => {
      if (req.url === '/oauth2/token') return res.end(TOKEN_OK);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('[');
      const t = setInterval(() => res.write(' '), 1000);
      drips.push(t);
      res.on('close', () => clearInterval(t));
    });
    const c = client(svc.url, svc.url, { requestTimeoutMs: 2500 });
    const started = Date.now();
    const err = await rejection(c.listProducts());
    const took = Date.now() - started;
    drips.forEach(clearInterval);
    expect(err).toMatchObject({
      code: ErrorCodes.UPSTREAM_NETWORK,
      retryable: true,
      details: { cause: 'DEADLINE', deadlineMs: 2500 },
    });
    // The deadline, not the drip, ended it (the cause says so; the drip alone would never end),
    // and not before the configured time. No upper bound in ms: a loaded machine only adds to it.
    expect(took).toBeGreaterThanOrEqual(2400);
  });
});

describe('answer byte caps', () => {
  /** Streams `total` bytes of JSON-ish filler without Content-Length, honouring back-pressure; counts what was written. */
  function flood(total: number) {
    const state = { written: 0, closedEarly: false };
    const handler: Handler = (req, res) => {
      if (req.url === '/oauth2/token') return res.end(TOKEN_OK);
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      res.on('close', () => {
        if (state.written < total) state.closedEarly = true;
      });
      const pump = () => {
        while (state.written < total && !res.destroyed) {
          state.written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        if (!res.destroyed) res.end();
      };
      pump();
    };
    return { state, handler };
  }

  it('stops reading a 400 MB answer to an upload at the 1 MiB cap and closes the connection', async () => {
    const { state, handler } = flood(400 * 1024 * 1024);
    const svc = await serve(handler);
    const c = client(svc.url);
    const err = await rejection(c.uploadScans('[]'));
    expect(err).toMatchObject({
      code: ErrorCodes.UPSTREAM_ANSWER_TOO_LARGE,
      details: { status: 200, limit: 1024 * 1024 },
    });
    await expect.poll(() => state.closedEarly, { timeout: 30_000 }).toBe(true);
    // The client aborted after the cap: only what socket buffers hold beyond it was ever written.
    expect(state.written).toBeLessThan(64 * 1024 * 1024);
  });

  it('gives the product list its own, larger cap (maxProductListBytes)', async () => {
    const { state, handler } = flood(400 * 1024 * 1024);
    const svc = await serve(handler);
    const c = client(svc.url, svc.url, { maxProductListBytes: 4 * 1024 * 1024 });
    const err = await rejection(c.listProducts());
    expect(err).toMatchObject({
      code: ErrorCodes.UPSTREAM_ANSWER_TOO_LARGE,
      details: { limit: 4 * 1024 * 1024 },
    });
    await expect.poll(() => state.closedEarly, { timeout: 30_000 }).toBe(true);
    expect(state.written).toBeLessThan(64 * 1024 * 1024);
  });

  it('refuses at once an answer whose Content-Length is over the cap, and cuts an error answer instead of failing on it', async () => {
    const svc = await serve((req, res) => {
      if (req.url === '/oauth2/token') return res.end(TOKEN_OK);
      if (req.url === '/api/trace/v3/scans/1/status') {
        res.writeHead(200, {
          'content-type': 'application/json',
          'content-length': String(400 * 1024 * 1024),
        });
        return res.write('{');
      }
      res.writeHead(503, { 'content-type': 'text/html' });
      res.end('<html>'.padEnd(3 * 1024 * 1024, 'x'));
    });
    const c = client(svc.url);
    expect(await rejection(c.getScanStatus('1'))).toMatchObject({
      code: ErrorCodes.UPSTREAM_ANSWER_TOO_LARGE,
    });
    const err = await rejection(c.uploadScans('[]'));
    expect(err).toMatchObject({
      code: ErrorCodes.UPSTREAM_HTTP,
      retryable: true,
      details: { status: 503 },
    });
    expect(String(err.details.body).length).toBe(2048);
  });
});

describe('redirects are never followed', () => {
  it('does not send the token (nor the secret) to the address a 3xx names', async () => {
    const elsewhere = await serve((_req, res) => res.end('{"requestId":"stolen"}'));
    const svc = await serve((req, res) => {
      if (req.url === '/oauth2/token') return res.end(TOKEN_OK);
      res.writeHead(307, { location: `${elsewhere.url}${req.url}?sig=secret` }).end();
    });
    const c = client(svc.url);
    const err = await rejection(c.uploadScans('[]'));
    expect(err).toMatchObject({
      code: ErrorCodes.UPSTREAM_REDIRECT,
      details: { status: 307, location: `${elsewhere.url}/api/trace/v3/scans` },
    });
    expect(err.message).not.toContain('sig=secret');
    expect(svc.requests.map((r) => r.path)).toEqual(['/oauth2/token', '/api/trace/v3/scans']);
    expect(svc.requests[1]?.authorization).toBe('Bearer tok-1');
    expect(elsewhere.requests).toEqual([]);
  });

  it('does not follow a redirect of the token endpoint either: the call is not sent', async () => {
    const elsewhere = await serve((_req, res) => res.end(TOKEN_OK));
    const auth = await serve((_req, res) =>
      res.writeHead(302, { location: `${elsewhere.url}/oauth2/token` }).end(),
    );
    const svc = await serve((_req, res) => res.end('{"requestId":"1"}'));
    const err = await rejection(client(svc.url, auth.url).uploadScans('[]'));
    expect(err).toMatchObject({
      code: ErrorCodes.UPSTREAM_REDIRECT,
      details: { status: 302, notSent: true, stage: 'token' },
    });
    expect(elsewhere.requests).toEqual([]);
    expect(svc.requests).toEqual([]);
  });
});

describe('token answers', () => {
  it('reads the camel-case spelling (accessToken, expiresIn, tokenType)', async () => {
    const svc = await serve((req, res) => {
      if (req.url === '/oauth2/token')
        return res.end(
          JSON.stringify({ accessToken: 'camel-tok', expiresIn: 120, tokenType: 'bearer' }),
        );
      res.end('{"requestId":"5"}');
    });
    const c = client(svc.url, svc.url, { now: () => 1_000_000 });
    expect(await c.uploadScans('[]')).toEqual({ requestId: '5' });
    expect(svc.requests[1]?.authorization).toBe('Bearer camel-tok');
    expect(c.tokenInfo().expiresAt?.getTime()).toBe(1_000_000 + 120_000);
  });

  it('reports an unreadable 200 token answer as UPSTREAM_TOKEN, not sent, without the body', async () => {
    const answers = [
      '<html>login</html>',
      JSON.stringify({ token: 'x' }),
      JSON.stringify({ access_token: 'mac-tok', token_type: 'mac' }),
    ];
    const svc = await serve((req, res) => {
      if (req.url === '/oauth2/token') return res.end(answers.shift());
      res.end('{"requestId":"1"}');
    });
    const c = client(svc.url);
    for (const why of ['not JSON', 'no access_token', 'expected Bearer']) {
      const err = await rejection(c.uploadScans('[]'));
      expect(err).toMatchObject({
        code: ErrorCodes.UPSTREAM_TOKEN,
        details: { status: 200, notSent: true, stage: 'token' },
      });
      expect(err.message).toContain(why);
      expect(err.message).not.toContain('mac-tok');
    }
    expect(svc.requests.filter((r) => r.path !== '/oauth2/token')).toEqual([]);
  });
});

describe('https off loopback', () => {
  it('refuses plain http to another host unless allowInsecureHttp is set', () => {
    const make =
      (url: string, allowInsecureHttp = false) =>
      () =>
        new UpstreamClient({
          baseUrl: 'https://svc.example',
          authUrl: url,
          clientId: 'c',
          clientSecret: 's',
          allowInsecureHttp,
        });
    expect(make('http://auth.example')).toThrow(
      expect.objectContaining({
        code: ErrorCodes.CONFIG,
        message: expect.stringContaining('upstream.authUrl must use https'),
      }),
    );
    for (const ok of [
      'http://127.0.0.1:1',
      'http://127.8.9.10',
      'http://[::1]:80',
      'http://localhost:9',
    ])
      expect(make(ok)).not.toThrow();
    expect(make('http://auth.example', true)).not.toThrow();
  });
});
