import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tcpConnect, type Socket } from 'node:net';
import { connect, type PeerCertificate, type TLSSocket } from 'node:tls';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { CHROMIUM_ARGS, chromiumPath } from '../helpers/chromium.js';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { makeCa, type IssuedCert, type TestCa } from '../helpers/tls-ca.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const INGEST_TOKEN = 'ingest-token-0123456789abcdef';
const READ_TOKEN = 'read-token-0123456789abcdef';

interface Answer {
  status: number;
  body: string;
  /** Serial of the certificate the server presented. */
  serial: string;
}

/**
 * The compiled daemon serving its local listener over HTTPS (`http.tls`) with certificates of a
 * throw-away CA made by openssl: the page, the status and the metrics with the read token (HTTP
 * Basic) over TLS; ingest that requires a client certificate of the clients' CA besides its token;
 * a renewed certificate served without a restart, once found by the file watch and once by SIGHUP;
 * and the station screen live in headless Chromium, which trusts only the served keys (by SPKI).
 */
describe('local listener over TLS', () => {
  let dir: string;
  let live: string;
  let serverCa: TestCa;
  let clientCa: TestCa;
  let foreignCa: TestCa;
  let first: IssuedCert;
  let renewed: IssuedCert;
  let bySighup: IssuedCert;
  let client: IssuedCert;
  let foreignClient: IssuedCert;
  let sandbox: RunningSandbox;
  let gateway: GatewayProcess | undefined;
  let context: BrowserContext | undefined;

  beforeAll(async () => {
    const executablePath = chromiumPath();
    dir = mkdtempSync(join(tmpdir(), 'sg-listener-tls-'));
    live = join(dir, 'tls');
    mkdirSync(live);
    serverCa = makeCa(dir, 'server');
    clientCa = makeCa(dir, 'clients');
    foreignCa = makeCa(dir, 'foreign');
    first = serverCa.issue('gateway-1', { serial: 0x5001, kind: 'server' });
    renewed = serverCa.issue('gateway-2', { serial: 0x5002, kind: 'server' });
    bySighup = serverCa.issue('gateway-3', { serial: 0x5003, kind: 'server' });
    client = clientCa.issue('mes-client', { serial: 0x7001, kind: 'client' });
    foreignClient = foreignCa.issue('stranger', { serial: 0x7002, kind: 'client' });
    copyFileSync(first.certFile, join(live, 'cert.pem'));
    copyFileSync(first.keyFile, join(live, 'key.pem'));

    sandbox = await startSandbox({ port: 0, processingDelayMs: 20 });
    const config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      `site: { id: tls-site, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 50, statusPollMs: 100, statusPollMaxMs: 300, retryBaseMs: 100, retryMaxMs: 500 }
http:
  listen: 127.0.0.1:0
  tls: { certFile: ${join(live, 'cert.pem')}, keyFile: ${join(live, 'key.pem')}, clientCaFile: ${clientCa.certFile} }
  limits: { maxConnectionsPerClient: 8, connectionGraceMs: 100 }
log: { level: info }
dcps:
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A }
inputs:
  - { id: mes, type: http, dcp: EOL-3 }
`,
    );
    gateway = await startGateway(
      config,
      {
        SCAN_GATEWAY_CLIENT_SECRET: SECRET,
        SCAN_GATEWAY_INGEST_TOKEN: INGEST_TOKEN,
        SCAN_GATEWAY_READ_TOKEN: READ_TOKEN,
      },
      dir,
    );
    context = await chromium.launchPersistentContext(
      mkdtempSync(join(tmpdir(), 'sg-chromium-tls-')),
      {
        executablePath,
        // Only the gateway's own keys are let through (no CA is installed, no error is ignored wholesale).
        args: [
          ...CHROMIUM_ARGS,
          `--ignore-certificate-errors-spki-list=${[first, renewed, bySighup].map((c) => c.spkiSha256).join(',')}`,
        ],
        headless: true,
        httpCredentials: { username: 'screen', password: READ_TOKEN },
        viewport: { width: 1024, height: 600 },
      },
    );
  }, 90_000);

  afterAll(async () => {
    await context?.close();
    await gateway?.stop();
    await sandbox?.close();
  });

  /** One HTTPS call that trusts only the throw-away server CA; with `as`, presenting that client certificate. */
  function call(
    path: string,
    opts: {
      method?: string;
      headers?: Record<string, string>;
      body?: string;
      as?: IssuedCert;
    } = {},
  ): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = request(
        `${gateway!.httpUrl}${path}`,
        {
          method: opts.method ?? 'GET',
          headers: opts.headers,
          ca: serverCa.pem,
          agent: false,
          ...(opts.as
            ? { cert: readFileSync(opts.as.certFile), key: readFileSync(opts.as.keyFile) }
            : {}),
        },
        (res) => {
          const serial = (res.socket as TLSSocket).getPeerCertificate().serialNumber.toUpperCase();
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body, serial }));
        },
      );
      req.once('error', reject);
      req.end(opts.body);
    });
  }

  const basic = { authorization: `Basic ${Buffer.from(`x:${READ_TOKEN}`).toString('base64')}` };
  const post = (reads: unknown, as?: IssuedCert) =>
    call('/api/v1/reads', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${INGEST_TOKEN}` },
      body: JSON.stringify(reads),
      ...(as ? { as } : {}),
    });

  /** The serial a fresh TLS connection is served, verified against the server CA. */
  function servedSerial(): Promise<string> {
    const { hostname, port } = new URL(gateway!.httpUrl);
    return new Promise((resolve, reject) => {
      const socket = connect(
        { host: hostname, port: Number(port), ca: serverCa.pem, servername: 'localhost' },
        () => {
          const peer: PeerCertificate = socket.getPeerCertificate();
          socket.end();
          resolve(peer.serialNumber.toUpperCase());
        },
      );
      socket.once('error', reject);
    });
  }

  /** Puts a pair in place the way a renewal should: both files written beside, then renamed over. */
  function install(pair: IssuedCert): void {
    copyFileSync(pair.keyFile, join(live, 'key.pem.new'));
    copyFileSync(pair.certFile, join(live, 'cert.pem.new'));
    renameSync(join(live, 'key.pem.new'), join(live, 'key.pem'));
    renameSync(join(live, 'cert.pem.new'), join(live, 'cert.pem'));
  }

  it('serves the page, the status and the metrics over HTTPS with the read token', async () => {
    expect(gateway!.httpUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect((await call('/')).status).toBe(401);
    const page = await call('/', { headers: basic });
    expect(page.status).toBe(200);
    expect(page.serial).toBe('5001');
    expect(page.body).toMatch(/Certificate ends/);
    const status = JSON.parse((await call('/api/v1/status', { headers: basic })).body) as {
      listener: {
        tls: { certificate: { serialNumber: string }; clientCertificates: boolean };
        tokensInClear: string[];
      };
    };
    expect(status.listener.tls.certificate.serialNumber).toBe('5001');
    expect(status.listener.tls.clientCertificates).toBe(true);
    expect(status.listener.tokensInClear).toEqual([]);
    const metrics = (await call('/metrics', { headers: basic })).body;
    expect(metrics).toContain(
      `scan_gateway_http_tls_cert_expiry_seconds ${first.notAfterMs / 1000}`,
    );
  });

  it('requires a client certificate of the clients CA for ingest: none 401, a foreign one 403, the right one stores the read', async () => {
    const none = await post({ code: 'PK-000901' });
    expect(none.status).toBe(401);
    expect(JSON.parse(none.body)).toMatchObject({
      message:
        'ingest requires a client certificate signed by the CA of http.tls.clientCaFile; the client presented none',
    });
    const foreign = await post({ code: 'PK-000902' }, foreignClient);
    expect(foreign.status).toBe(403);
    expect(JSON.parse(foreign.body).message).toMatch(
      /^the client certificate \(CN=stranger, serial 7002\) is not accepted for ingest: /,
    );
    // The certificate does not replace the token.
    const noToken = await call('/api/v1/reads', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ code: 'PK-000903' }),
      as: client,
    });
    expect(noToken.status).toBe(401);

    const taken = await post({ code: 'PK-000904' }, client);
    expect(taken.status, taken.body).toBe(202);
    expect(JSON.parse(taken.body)).toMatchObject({ accepted: 1, scans: 1 });
    const item = await call('/api/v1/items/PK-000904', { headers: basic });
    expect(item.status).toBe(200);
    expect(JSON.parse(item.body)).toMatchObject({ found: true });
    for (const refused of ['PK-000901', 'PK-000902', 'PK-000903'])
      expect((await call(`/api/v1/items/${refused}`, { headers: basic })).status).toBe(404);
    // Refusals are counted by why.
    const metrics = (await call('/metrics', { headers: basic })).body;
    expect(metrics).toContain('scan_gateway_http_refused_total{reason="ingest_client_cert"} 2');
    expect(metrics).toContain('scan_gateway_http_refused_total{reason="ingest_token"} 1');
  });

  it(
    'serves a renewed certificate without a restart: found by the file watch, then by SIGHUP',
    { timeout: 120_000 },
    async () => {
      const pid = gateway!.child.pid;
      // Half a renewal (a key that is not the certificate's) is refused and the served one stays.
      copyFileSync(renewed.keyFile, join(live, 'key.pem.new'));
      renameSync(join(live, 'key.pem.new'), join(live, 'key.pem'));
      await expect
        .poll(
          () =>
            gateway!
              .output()
              .includes('TLS certificate reload refused; the served certificate stays'),
          { timeout: 30_000 },
        )
        .toBe(true);
      expect(await servedSerial()).toBe('5001');
      const refused = JSON.parse((await call('/api/v1/status', { headers: basic })).body) as {
        healthProblems: { code: string }[];
      };
      expect(refused.healthProblems.map((p) => p.code)).toContain('SCANGW_E_LISTENER_TLS');

      install(renewed);
      await expect.poll(() => servedSerial(), { timeout: 30_000, interval: 200 }).toBe('5002');
      expect(gateway!.child.pid).toBe(pid);
      const metrics = (await call('/metrics', { headers: basic })).body;
      expect(metrics).toContain(
        `scan_gateway_http_tls_cert_expiry_seconds ${renewed.notAfterMs / 1000}`,
      );
      expect(metrics).toContain('scan_gateway_http_tls_reloads_total{outcome="applied"} 1');
      expect(metrics).toContain('scan_gateway_http_tls_reloads_total{outcome="refused"} 1');

      // SIGHUP: the served names become links into a folder that is not watched (as certbot's live/
      // links into archive/), so only the signal can apply what changes there.
      const target = join(dir, 'archive');
      mkdirSync(target);
      for (const [from, name] of [
        [renewed.certFile, 'cert.pem'],
        [renewed.keyFile, 'key.pem'],
      ] as const) {
        copyFileSync(from, join(target, name));
        symlinkSync(join(target, name), join(live, `${name}.link`));
        renameSync(join(live, `${name}.link`), join(live, name));
      }
      // Five times the watch's debounce (1 s): no event tells when a reload found the same pair,
      // so the first wait is a time, made long for a loaded machine; the second only lets the
      // watch (wrongly) act, and a slow machine makes it weaker, not red.
      const pastDebounce = () => new Promise((resolve) => setTimeout(resolve, 5000));
      // The watch sees the links' swap and finds the same pair.
      await pastDebounce();
      copyFileSync(bySighup.keyFile, join(target, 'key.pem.new'));
      copyFileSync(bySighup.certFile, join(target, 'cert.pem.new'));
      renameSync(join(target, 'key.pem.new'), join(target, 'key.pem'));
      renameSync(join(target, 'cert.pem.new'), join(target, 'cert.pem'));
      // The new pair behind the links is not seen by the watch.
      await pastDebounce();
      expect(await servedSerial()).toBe('5002');
      gateway!.child.kill('SIGHUP');
      await expect.poll(() => servedSerial(), { timeout: 30_000, interval: 100 }).toBe('5003');
      expect(gateway!.output()).toMatch(
        /"reason":"configuration reload"[^\n]*"serial":"5003"[^\n]*"msg":"TLS certificate reloaded: new connections get it"/,
      );
      expect(gateway!.child.pid).toBe(pid);
      // Ingest still takes the client certificate with the new server certificate.
      expect((await post({ code: 'PK-000905' }, client)).status).toBe(202);
    },
  );

  it('keeps the share of connections per address over TLS: idle sockets are shed, a stream in flight is not', async () => {
    const { hostname, port } = new URL(gateway!.httpUrl);
    // A station stream: a request in flight for as long as it is open, on a TLS socket.
    const stream = await new Promise<{ socket: TLSSocket; close: () => void }>(
      (resolve, reject) => {
        const req = request(
          `${gateway!.httpUrl}/station/EOL-3/events`,
          { headers: basic, ca: serverCa.pem, agent: false },
          (res) => {
            expect(res.statusCode).toBe(200);
            resolve({ socket: res.socket as TLSSocket, close: () => req.destroy() });
          },
        );
        req.once('error', reject);
        req.end();
      },
    );
    // Twenty sockets from the same address that never start a handshake.
    const idle: Socket[] = [];
    for (let i = 0; i < 20; i++) {
      const s = tcpConnect(Number(port), hostname);
      s.on('error', () => undefined);
      idle.push(s);
    }
    await expect
      .poll(() => idle.filter((s) => s.destroyed || s.readableEnded).length, {
        timeout: 30_000,
        interval: 50,
      })
      .toBeGreaterThanOrEqual(20 - 8 + 1);
    expect(stream.socket.destroyed).toBe(false);
    expect((await call('/healthz')).status).toBe(200);
    const metrics = (await call('/metrics', { headers: basic })).body;
    expect(metrics).toMatch(/scan_gateway_http_refused_total\{reason="client_connections"\} [1-9]/);
    for (const s of idle) s.destroy();
    stream.close();
  });

  it(
    'Chromium loads the station screen over HTTPS and its live stream connects',
    { timeout: 60_000 },
    async () => {
      const page = await context!.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(String(e)));
      const response = await page.goto(`${gateway!.httpUrl}/station/EOL-3`);
      expect(response?.status()).toBe(200);
      expect((await response?.securityDetails())?.subjectName).toBe('gateway-3');
      await expect
        .poll(() => page.locator('#conn').textContent(), { timeout: 30_000 })
        .toBe('live');
      // A read posted now shows on the screen through the stream.
      expect((await post({ code: 'PK-000906' }, client)).status).toBe(202);
      await expect
        .poll(() => page.locator('#last .ref').textContent(), { timeout: 30_000 })
        .toBe('PK-000906');
      expect(errors).toEqual([]);

      // The SPKI list is what lets it through: without it, the throw-away CA is refused, and the
      // gateway says why the handshake failed.
      const handshakes = async () =>
        Number(
          /scan_gateway_http_refused_total\{reason="tls_handshake"\} (\d+)/.exec(
            (await call('/metrics', { headers: basic })).body,
          )?.[1] ?? 0,
        );
      const before = await handshakes();
      const strict = await chromium.launchPersistentContext(
        mkdtempSync(join(tmpdir(), 'sg-chromium-strict-')),
        { executablePath: chromiumPath(), args: CHROMIUM_ARGS, headless: true },
      );
      try {
        await expect((await strict.newPage()).goto(`${gateway!.httpUrl}/healthz`)).rejects.toThrow(
          /ERR_CERT_AUTHORITY_INVALID/,
        );
      } finally {
        await strict.close();
      }
      await expect.poll(handshakes, { timeout: 30_000 }).toBeGreaterThan(before);
      expect(gateway!.output()).toMatch(
        /"remote":"127\.0\.0\.1","why":"[^"]+"[^\n]*"msg":"TLS handshake failed"/,
      );
    },
  );
});
