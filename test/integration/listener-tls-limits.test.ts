import { mkdtempSync } from 'node:fs';
import { connect as tcpConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { parseConfigText } from '../../src/config/load.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { makeCa, type TestCa } from '../helpers/tls-ca.js';

const api = {
  uploadScans: async () => ({ requestId: 'r-1' }),
  requestPresignedUpload: async () => ({ url: 'http://127.0.0.1:9/x', requestId: 'r-2' }),
  putPresigned: async () => undefined,
  getScanStatus: async (requestId: string) => ({ state: 'Success' as const, requestId }),
};

/** Resolves with how long `socket` stayed open, in ms; rejects when it is still open after `limitMs`. */
function closedWithin(socket: Socket, limitMs: number): Promise<number> {
  const opened = Date.now();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`still open after ${limitMs} ms`)), limitMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(Date.now() - opened);
    });
  });
}

/**
 * `http.limits` on the https listener: fastify hands its node limits to a plain server only, so
 * these are the ones that would be lost. With `tlsHandshakeTimeoutMs: 1500` a socket that never
 * starts its TLS handshake is closed after about that (not node's 120 s handshake timeout), and
 * with `headersTimeoutMs: 400` one that sends half a request head over TLS is answered 408 and
 * closed, as over plain HTTP. The handshake's bound is long beside a handshake on a loaded
 * machine, which the second test makes before its half head.
 */
describe('http.limits over TLS', () => {
  let app: App;
  let ca: TestCa;
  let port: number;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-tls-limits-'));
    ca = makeCa(dir, 'limits');
    const leaf = ca.issue('gw', { serial: 0x77, kind: 'server', days: 30 });
    const file = join(dir, 'config.yaml');
    const yaml = `site: { id: limits, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${join(dir, 'gw.db')} }
http: { listen: "127.0.0.1:0", tls: { certFile: ${leaf.certFile}, keyFile: ${leaf.keyFile} }, limits: { headersTimeoutMs: 400, requestTimeoutMs: 400, tlsHandshakeTimeoutMs: 1500 } }
dcps:
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A }
inputs: []
`;
    app = buildApp(
      { file, config: parseConfigText(yaml, file), clientSecret: 'x' },
      { logger: memoryLogger('info').logger, api },
    );
    await app.start();
    port = Number(new URL(app.httpUrl!).port);
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await app?.stop();
  });

  it('closes a socket that never starts its handshake', async () => {
    const s = tcpConnect(port, '127.0.0.1');
    s.on('error', () => undefined);
    sockets.push(s);
    const ms = await closedWithin(s, 5000);
    console.log(`no handshake: closed after ${ms} ms (tlsHandshakeTimeoutMs 1500)`);
  });

  it('answers 408 and closes a TLS connection that sends half a request head', async () => {
    const s: TLSSocket = await new Promise((resolve, reject) => {
      const t = connect({ host: '127.0.0.1', port, ca: ca.pem, servername: 'localhost' }, () =>
        resolve(t),
      );
      t.once('error', reject);
    });
    sockets.push(s);
    expect(s.authorized).toBe(true);
    let received = '';
    s.on('data', (d: Buffer) => (received += d.toString('latin1')));
    s.on('error', () => undefined);
    s.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Slow: `);
    const ms = await closedWithin(s, 5000);
    expect(received).toMatch(/^HTTP\/1\.1 408 /);
    console.log(`half a head: 408 and closed after ${ms} ms (headersTimeoutMs 400)`);
  });
});
