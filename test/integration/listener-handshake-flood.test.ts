import { mkdtempSync } from 'node:fs';
import { request } from 'node:https';
import { connect as tcpConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { parseConfigText } from '../../src/config/load.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { makeCa, type TestCa } from '../helpers/tls-ca.js';
import { waitFor } from '../helpers/wait.js';

const api = {
  uploadScans: async () => ({ requestId: 'r-1' }),
  requestPresignedUpload: async () => ({ url: 'http://127.0.0.1:9/x', requestId: 'r-2' }),
  putPresigned: async () => undefined,
  getScanStatus: async (requestId: string) => ({ state: 'Success' as const, requestId }),
};

/** The first bytes of a TLS record header announcing a ClientHello of 512 bytes that never comes. */
const HALF_HELLO = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01]);

interface Started {
  app: App;
  port: number;
  log: ReturnType<typeof memoryLogger>;
}

async function startGateway(ca: TestCa, dir: string, http: string): Promise<Started> {
  const leaf = ca.issue(`gw-${Math.random().toString(36).slice(2, 8)}`, {
    serial: 0x91,
    kind: 'server',
    days: 30,
  });
  const file = join(dir, `config-${Date.now()}.yaml`);
  const yaml = `site: { id: flood, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${join(dir, `gw-${Date.now()}.db`)} }
http: { listen: "127.0.0.1:0", tls: { certFile: ${leaf.certFile}, keyFile: ${leaf.keyFile} }, ${http} }
dcps:
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A }
inputs: []
`;
  const log = memoryLogger('info');
  const app = buildApp(
    { file, config: parseConfigText(yaml, file), clientSecret: 'x' },
    { logger: log.logger, api },
  );
  await app.start();
  return { app, port: Number(new URL(app.httpUrl!).port), log };
}

/** GET /healthz over TLS from `from`; resolves with the status code, rejects on any failure or after 15 s. */
function healthz(port: number, ca: TestCa, from: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/healthz',
        localAddress: from,
        ca: ca.pem,
        servername: 'localhost',
        agent: false,
        timeout: 15_000,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer to ${from} within 15 s`)));
    req.on('error', reject);
    req.end();
  });
}

/** A raw TCP socket from `from` that never finishes a handshake; `half` sends the start of one. */
function silent(port: number, from: string, half = false): Socket {
  const s = tcpConnect({ port, host: '127.0.0.1', localAddress: from });
  s.on('error', () => undefined);
  if (half) s.once('connect', () => s.write(HALF_HELLO));
  return s;
}

/** A TLS connection from `from` whose handshake finished; rejects when it does not finish. */
function finished(port: number, ca: TestCa, from: string, ciphers?: string): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const t = tlsConnect(
      {
        socket: tcpConnect({ port, host: '127.0.0.1', localAddress: from }),
        ca: ca.pem,
        servername: 'localhost',
        ...(ciphers ? { ciphers, maxVersion: 'TLSv1.2' as const } : {}),
      },
      () => resolve(t),
    );
    t.once('error', reject);
    t.once('close', () => reject(new Error('closed before the handshake finished')));
  });
}

/**
 * The https listener under slow-handshake floods: sockets from several 127.0.0.x addresses that
 * never finish (or never start) a TLS handshake, reopened as soon as they are closed. The loopback
 * reader (127.0.0.1, trusted) and a newcomer from another address are answered throughout: the
 * unfinished handshakes of untrusted addresses share a budget of maxPendingHandshakes, where the
 * heaviest address's oldest one makes room, so they never reach the connection cap.
 */
describe('slow TLS handshakes from several addresses', () => {
  let ca: TestCa;
  let dir: string;
  let gw: Started;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sg-handshake-flood-'));
    ca = makeCa(dir, 'flood');
    gw = await startGateway(ca, dir, 'limits: { tlsHandshakeTimeoutMs: 1000 }');
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await gw?.app.stop();
  });

  it('closes a handshake past tlsHandshakeTimeoutMs and logs it with the address', async () => {
    const s = silent(gw.port, '127.0.0.10');
    sockets.push(s);
    await waitFor(() => s.closed, { timeoutMs: 10_000, what: 'the silent socket closed' });
    const line = await waitFor(
      () => gw.log.parsed().find((l) => l.msg.startsWith('TLS handshake timed out')),
      { what: 'the handshake timeout line' },
    );
    expect(line).toMatchObject({ remote: '127.0.0.10', refused: 1 });
  });

  it('refuses TLS 1.2 CBC-SHA1 suites and serves an AES-GCM one', async () => {
    await expect(finished(gw.port, ca, '127.0.0.1', 'ECDHE-ECDSA-AES128-SHA')).rejects.toThrow();
    await expect(finished(gw.port, ca, '127.0.0.1', 'ECDHE-RSA-AES128-SHA')).rejects.toThrow();
    const ok = await finished(gw.port, ca, '127.0.0.1', 'ECDHE-ECDSA-AES128-GCM-SHA256');
    sockets.push(ok);
    expect(ok.getCipher().name).toBe('ECDHE-ECDSA-AES128-GCM-SHA256');
    expect(ok.getProtocol()).toBe('TLSv1.2');
    ok.destroy();
  });

  it('answers /healthz on loopback and from a newcomer while six addresses flood', async () => {
    let flooding = true;
    let opened = 0;
    const attackers = [2, 3, 4, 5, 6, 7].map((n) => `127.0.0.${n}`);
    const open = (from: string, i: number) => {
      if (!flooding) return;
      opened += 1;
      const s = silent(gw.port, from, i % 2 === 1);
      sockets.push(s);
      s.on('close', () => setTimeout(() => open(from, i), 5));
    };
    for (const from of attackers) for (let i = 0; i < 60; i++) open(from, i);
    try {
      // Wait until the flood is on: every socket opened, and as many again reopened.
      await waitFor(() => opened >= 720, { timeoutMs: 30_000, what: 'the flood reopening' });
      for (let i = 0; i < 12; i++) {
        expect(await healthz(gw.port, ca, '127.0.0.1')).toBeGreaterThanOrEqual(200);
        expect(await healthz(gw.port, ca, '127.0.0.8')).toBeGreaterThanOrEqual(200);
      }
    } finally {
      flooding = false;
    }
    const budget = gw.log.parsed().filter((l) => l.msg.startsWith('TLS handshake closed'));
    expect(budget.length).toBeGreaterThan(0);
    for (const l of budget) expect(attackers).toContain(l.remote);
  }, 120_000);
});

/**
 * `http.trustedClients` and the reserve: with maxConnections 8, untrusted addresses hold at most 6
 * (a reserve of 2), and 127.0.0.9, listed, is served past that; its unfinished handshakes do not
 * count against maxPendingHandshakes. 127.0.0.9 stands for a trusted host elsewhere: only
 * 127.0.0.1 and ::1 of loopback are trusted without being listed.
 */
describe('http.trustedClients', () => {
  let ca: TestCa;
  let dir: string;
  let gw: Started;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sg-trusted-'));
    ca = makeCa(dir, 'trusted');
    gw = await startGateway(
      ca,
      dir,
      'trustedClients: [127.0.0.9, "10.20.7.0/24"], limits: { maxConnections: 8, trustedReserve: 2, maxPendingHandshakes: 4, tlsHandshakeTimeoutMs: 30000, headersTimeoutMs: 30000, requestTimeoutMs: 30000 }',
    );
  });
  afterEach(() => {
    for (const s of sockets.splice(0)) s.destroy();
  });
  afterAll(async () => {
    await gw?.app.stop();
  });

  it('keeps the reserve for trusted addresses and exempts their handshakes from the budget', async () => {
    // Six unfinished handshakes from an untrusted address: the two oldest make room for the last two.
    const untrusted: Socket[] = [];
    for (let i = 0; i < 6; i++) {
      const s = silent(gw.port, '127.0.0.2');
      untrusted.push(s);
      sockets.push(s);
      await new Promise((resolve) => s.once('connect', resolve));
    }
    await waitFor(() => untrusted[0]!.closed && untrusted[1]!.closed, {
      what: 'the two oldest unfinished handshakes closed',
    });
    // Three from the trusted address count against no budget: the next untrusted one again
    // closes an untrusted one, never a trusted one.
    const trusted = [0, 1, 2].map(() => silent(gw.port, '127.0.0.9'));
    sockets.push(...trusted);
    await Promise.all(trusted.map((s) => new Promise((resolve) => s.once('connect', resolve))));
    const next = silent(gw.port, '127.0.0.2');
    sockets.push(next);
    await waitFor(() => untrusted[2]!.closed, { what: 'the third untrusted handshake closed' });
    expect(trusted.some((s) => s.closed)).toBe(false);
    expect(untrusted.slice(3).some((s) => s.closed)).toBe(false);
    for (const s of [...trusted, ...untrusted, next]) s.destroy();

    // Six finished connections of untrusted addresses = maxConnections - reserve; a seventh is closed.
    for (let i = 0; i < 6; i++) sockets.push(await finished(gw.port, ca, '127.0.0.3'));
    await expect(finished(gw.port, ca, '127.0.0.4')).rejects.toThrow();
    // The reserve serves the listed address and loopback.
    expect(await healthz(gw.port, ca, '127.0.0.9')).toBeGreaterThanOrEqual(200);
    expect(await healthz(gw.port, ca, '127.0.0.1')).toBeGreaterThanOrEqual(200);
    const refused = gw.log
      .parsed()
      .find((l) => l.msg.startsWith('connection refused: untrusted addresses'));
    expect(refused).toMatchObject({ remote: '127.0.0.4' });
  });
});
