import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/errors.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { rejection } from '../helpers/rejection.js';

// TLS verification (always on, extra CA file added) and the HTTP proxy, against a real HTTPS
// server and a real CONNECT proxy. The certificates are a throw-away test CA and a server
// certificate for 127.0.0.1/localhost, valid 2000-2100, made once with `openssl ca` (EC P-256) and
// embedded so the test needs no openssl at run time. They protect nothing.

const TEST_CA = `-----BEGIN CERTIFICATE-----
MIIBcjCCARegAwIBAgIBATAKBggqhkjOPQQDAjAfMR0wGwYDVQQDDBRzY2FuLWdh
dGV3YXkgdGVzdCBDQTAgFw0wMDAxMDEwMDAwMDBaGA8yMTAwMDEwMTAwMDAwMFow
HzEdMBsGA1UEAwwUc2Nhbi1nYXRld2F5IHRlc3QgQ0EwWTATBgcqhkjOPQIBBggq
hkjOPQMBBwNCAAQ9JGfaTA76LpxSGhbDww10j/RbeQ9R6YI4vLquZ1iTya31TTBm
Q+TXPHtXG+7MO5a5bncKwsS6AS18Wr5kCSW2o0IwQDAPBgNVHRMBAf8EBTADAQH/
MA4GA1UdDwEB/wQEAwIBBjAdBgNVHQ4EFgQUlBE8ccqM7nDu0T+xm4UV3VufVPUw
CgYIKoZIzj0EAwIDSQAwRgIhAMBd12T+j6VqHFPBbwUyTCiZa5lkrFXMXi7jH7om
JYnTAiEAgg4bAG6QBoiG/dtL6u+xykhxAh9bqEmZFUyi8AGG8CA=
-----END CERTIFICATE-----`;
const SERVER_CERT = `-----BEGIN CERTIFICATE-----
MIIBszCCAVqgAwIBAgIBAjAKBggqhkjOPQQDAjAfMR0wGwYDVQQDDBRzY2FuLWdh
dGV3YXkgdGVzdCBDQTAgFw0wMDAxMDEwMDAwMDBaGA8yMTAwMDEwMTAwMDAwMFow
FDESMBAGA1UEAwwJbG9jYWxob3N0MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE
2q9y1YcDm4OeuYRmw4p5rwMhz942fnTQgUoNvJi6n86iEFyVESzw55tp/SMG4JUO
5pzNglAGjDzVXQxUTQcTTqOBjzCBjDAJBgNVHRMEAjAAMBoGA1UdEQQTMBGHBH8A
AAGCCWxvY2FsaG9zdDAOBgNVHQ8BAf8EBAMCB4AwEwYDVR0lBAwwCgYIKwYBBQUH
AwEwHwYDVR0jBBgwFoAUlBE8ccqM7nDu0T+xm4UV3VufVPUwHQYDVR0OBBYEFGW9
6iuufI+3TIZ+eX6+Sk0cAX0eMAoGCCqGSM49BAMCA0cAMEQCIAcU/C4j2UKeWLrc
0zbwXntK7Rbz8fI5mRFAC9tjEKBoAiAGEXNS7xISA1/TQmlv28Fvm9NqhQQxAOub
ooWFAGlh2w==
-----END CERTIFICATE-----`;
const SERVER_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgmPRCpeMqzAQtQ2r0
1veJKuKPqUQv8ecdA4jbpeGaBYahRANCAATar3LVhwObg565hGbDinmvAyHP3jZ+
dNCBSg28mLqfzqIQXJURLPDnm2n9IwbglQ7mnM2CUAaMPNVdDFRNBxNO
-----END PRIVATE KEY-----`;

let dir: string;
let https: Server;
let proxy: Server;
let httpsUrl: string;
let proxyUrl: string;
const proxyAuth: (string | undefined)[] = [];
const connects: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'upstream-tls-'));
  writeFileSync(join(dir, 'ca.pem'), `${TEST_CA}\n`);
  writeFileSync(join(dir, 'not-pem.txt'), 'hello\n');

  https = createHttpsServer({ key: SERVER_KEY, cert: SERVER_CERT }, (req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url === '/oauth2/token')
      res.end(JSON.stringify({ access_token: 'opaque', token_type: 'Bearer', expires_in: 3600 }));
    else res.end(JSON.stringify([{ key: 'TLS-1', name: 'Over TLS' }]));
  });
  await new Promise<void>((r) => https.listen(0, '127.0.0.1', r));
  httpsUrl = `https://127.0.0.1:${(https.address() as AddressInfo).port}`;

  proxy = createHttpServer();
  proxy.on('connect', (req, socket, head) => {
    connects.push(String(req.url));
    proxyAuth.push(req.headers['proxy-authorization']);
    const [host, port] = String(req.url).split(':');
    const upstream = connect(Number(port), host ?? '127.0.0.1', () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on('error', () => socket.destroy());
    socket.on('error', () => upstream.destroy());
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});

afterAll(async () => {
  https.closeAllConnections();
  proxy.closeAllConnections();
  await new Promise((r) => https.close(r));
  await new Promise((r) => proxy.close(r));
  rmSync(dir, { recursive: true, force: true });
});

describe('TLS and proxy', () => {
  it('refuses a certificate from an unknown CA (verification is always on)', async () => {
    const client = new UpstreamClient({
      baseUrl: httpsUrl,
      authUrl: httpsUrl,
      clientId: 'c',
      clientSecret: 's',
    });
    const err = await rejection(client.listProducts());
    expect(err.code).toBe(ErrorCodes.UPSTREAM_NETWORK);
    expect(err.details.tls).toBe(true);
    await client.close();
  });

  it('trusts the CA of caFile in addition to the default ones', async () => {
    const client = new UpstreamClient({
      baseUrl: httpsUrl,
      authUrl: httpsUrl,
      clientId: 'c',
      clientSecret: 's',
      caFile: join(dir, 'ca.pem'),
    });
    expect(await client.listProducts()).toEqual([{ key: 'TLS-1', name: 'Over TLS' }]);
    await client.close();
  });

  it('goes through an HTTP proxy with CONNECT', async () => {
    connects.length = 0;
    const client = new UpstreamClient({
      baseUrl: httpsUrl,
      authUrl: httpsUrl,
      clientId: 'c',
      clientSecret: 's',
      caFile: join(dir, 'ca.pem'),
      proxyUrl,
    });
    expect(await client.listProducts()).toEqual([{ key: 'TLS-1', name: 'Over TLS' }]);
    expect(connects.length).toBeGreaterThan(0);
    expect(connects[0]).toBe(httpsUrl.replace('https://', ''));
    await client.close();
  });

  it('sends proxy credentials given apart from the URL as Basic, and refuses user:password@ in proxyUrl', async () => {
    proxyAuth.length = 0;
    const client = new UpstreamClient({
      baseUrl: httpsUrl,
      authUrl: httpsUrl,
      clientId: 'c',
      clientSecret: 's',
      caFile: join(dir, 'ca.pem'),
      proxyUrl,
      proxyCredentials: 'gw:pass word',
    });
    expect(await client.listProducts()).toEqual([{ key: 'TLS-1', name: 'Over TLS' }]);
    expect(proxyAuth[0]).toBe(`Basic ${Buffer.from('gw:pass word').toString('base64')}`);
    await client.close();
    const withUserInfo = proxyUrl.replace('http://', 'http://gw:secret@');
    expect(
      () =>
        new UpstreamClient({
          baseUrl: httpsUrl,
          authUrl: httpsUrl,
          clientId: 'c',
          clientSecret: 's',
          proxyUrl: withUserInfo,
        }),
    ).toThrow(
      expect.objectContaining({
        code: ErrorCodes.CONFIG,
        message: expect.stringContaining('upstream.proxyUrl'),
      }),
    );
  });

  it('refuses an unreadable or non-PEM caFile with CONFIG', () => {
    const make = (caFile: string) => () =>
      new UpstreamClient({
        baseUrl: httpsUrl,
        authUrl: httpsUrl,
        clientId: 'c',
        clientSecret: 's',
        caFile,
      });
    expect(make(join(dir, 'missing.pem'))).toThrow(
      expect.objectContaining({ code: ErrorCodes.CONFIG }),
    );
    expect(make(join(dir, 'not-pem.txt'))).toThrow(
      expect.objectContaining({ code: ErrorCodes.CONFIG }),
    );
  });
});
