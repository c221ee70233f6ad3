import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { SerialPort } from 'serialport';
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { createPtyPair, type PtyPair } from '../helpers/pty.js';

/** One read of the scanner: when it was sent, and when its ACK came back (none: the scanner would signal it). */
interface Sent {
  text: string;
  sentAt: number;
  ackedAt?: number;
}

/**
 * A restart of the gateway with a serial scanner in host-ACK mode sending 20 reads a second: the
 * scanner sends a read, waits up to `ACK_WAIT_MS` for the gateway's ACK byte (written after the
 * read's commit), and goes on. The gap (the last ACK before the stop to the first after the start)
 * is printed, not asserted: it depends on the machine. What is asserted: every read that got an
 * ACK is in the buffer.
 */
const ACK_WAIT_MS = 500;
const INTERVAL_MS = 50;

describe('a restart with a serial scanner sending 20 reads a second', () => {
  let gateway: GatewayProcess | undefined;
  let pty: PtyPair | undefined;
  let port: SerialPort | undefined;
  let dir: string | undefined;

  afterEach(async () => {
    await gateway?.stop();
    if (port?.isOpen) await new Promise((resolve) => port!.close(resolve));
    await pty?.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
    gateway = pty = port = dir = undefined;
  });

  let upstream: Server | undefined;
  afterEach(async () => {
    const server = upstream;
    upstream = undefined;
    server?.closeAllConnections();
    if (server) await new Promise((resolve) => server.close(resolve));
  });

  it.each([
    ['the service unreachable', 0],
    ['an upload in flight at the stop (the service answers after 3 s)', 3000],
  ])(
    'loses no read that got an ACK, and prints the gap: %s',
    async (_what, answerAfterMs) => {
      const upstreamUrl =
        answerAfterMs === 0 ? 'http://127.0.0.1:9' : await slowUpstream(answerAfterMs);
      dir = mkdtempSync(join(tmpdir(), 'sg-restart-gap-'));
      pty = await createPtyPair(dir);
      const config = join(dir, 'config.yaml');
      const bufferPath = join(dir, 'buffer.db');
      writeFileSync(
        config,
        `site: { id: gap, timezone: Europe/Berlin }
upstream: { baseUrl: ${upstreamUrl}, authUrl: ${upstreamUrl}, clientId: gap }
buffer: { path: ${bufferPath} }
delivery: { maxBatchDelayMs: 100 }
http: { listen: 127.0.0.1:0 }
log: { level: info, format: json }
productCheck: { enabled: false }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042, duplicateWindowMs: 0 }
inputs:
  - { id: scanner, type: serial, path: ${pty.devicePath}, dcp: GI-01, ackBytes: "\\x06" }
`,
      );
      const env = { SCAN_GATEWAY_CLIENT_SECRET: 'restart-gap-secret' };
      gateway = await startGateway(config, env, dir);

      // The scanner's end: ACK bytes arrive here.
      const scanner = new SerialPort({
        path: pty.peerPath,
        baudRate: 9600,
        autoOpen: false,
        hupcl: false,
      });
      port = scanner;
      await new Promise<void>((resolve, reject) =>
        scanner.open((err) => (err ? reject(err) : resolve())),
      );
      let acks = 0;
      scanner.on('data', (d: Buffer) => {
        for (const byte of d) if (byte === 0x06) acks++;
      });

      const sent: Sent[] = [];
      let restarted = false;
      let afterRestart = 0;
      const scan = async () => {
        for (let n = 1; !restarted || afterRestart < 40; n++) {
          const before = acks;
          const read: Sent = { text: `GAP-${n}`, sentAt: Date.now() };
          sent.push(read);
          await pty!.write(Buffer.from(`${read.text}\r`));
          while (acks === before && Date.now() - read.sentAt < ACK_WAIT_MS)
            await new Promise((resolve) => setTimeout(resolve, 2));
          if (acks > before) {
            read.ackedAt = Date.now();
            if (restarted) afterRestart++;
          }
          // A late ACK (beyond the wait) is not taken for the next read's.
          const late = acks;
          const next = read.sentAt + INTERVAL_MS;
          if (Date.now() < next)
            await new Promise((resolve) => setTimeout(resolve, next - Date.now()));
          if (acks !== late) read.ackedAt ??= Date.now();
        }
      };
      const scanning = scan();
      while (sent.filter((s) => s.ackedAt).length < 40)
        await new Promise((resolve) => setTimeout(resolve, 10));

      // systemctl restart: SIGTERM, wait for the exit, start again.
      const stopAt = Date.now();
      await gateway.stop();
      const exitedAt = Date.now();
      gateway = await startGateway(config, env, dir);
      const startedAt = Date.now();
      restarted = true;
      await scanning;
      await gateway.stop();
      gateway = undefined;

      const db = new Database(bufferPath, { readonly: true });
      const stored = new Set(
        (db.prepare(`SELECT CAST(raw AS TEXT) AS raw FROM reads`).all() as { raw: string }[]).map(
          (r) => r.raw,
        ),
      );
      db.close();
      const acked = sent.filter((s) => s.ackedAt !== undefined);
      expect(acked.filter((s) => !stored.has(s.text)).map((s) => s.text)).toEqual([]);

      // Reads go on being taken while the stop waits for an upload in flight: the gap is around the exit.
      const lastBefore = acked.filter((s) => s.ackedAt! <= exitedAt).at(-1)!;
      const firstAfter = acked.find((s) => s.ackedAt! > exitedAt)!;
      const duringStop = acked.filter((s) => s.ackedAt! > stopAt && s.ackedAt! <= exitedAt).length;
      const unacked = sent.filter((s) => s.ackedAt === undefined);
      const lostSilently = unacked.filter((s) => !stored.has(s.text)).length;
      console.log(
        `restart gap (${_what}): ${firstAfter.ackedAt! - lastBefore.ackedAt!} ms from the last ACK before the exit to the first after the start, ${duringStop} reads taken during the stop ` +
          `(stop ${exitedAt - stopAt} ms, start until "started" ${startedAt - exitedAt} ms); ` +
          `${sent.length} reads sent, ${acked.length} acknowledged, ${unacked.length} without an ACK ` +
          `(${unacked.length - lostSilently} of them stored anyway, ${lostSilently} not stored: the scanner signals those)`,
      );
    },
    180_000,
  );

  /** A service that takes every upload and answers it after `ms`: an upload is in flight at any moment. */
  async function slowUpstream(ms: number): Promise<string> {
    let requests = 0;
    upstream = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const json = (value: unknown) => {
          res.writeHead(req.url === '/api/trace/v3/scans' ? 202 : 200, {
            'content-type': 'application/json',
          });
          res.end(JSON.stringify(value));
        };
        if (req.url === '/oauth2/token')
          return json({ access_token: 'gap-token', token_type: 'Bearer', expires_in: 3600 });
        if (req.url === '/api/trace/v3/scans') {
          const requestId = `gap-${++requests}`;
          setTimeout(() => json({ requestId }), ms);
          return;
        }
        const status = /\/scans\/([^/]+)\/status$/.exec(req.url ?? '');
        json(status ? { state: 'Success', requestId: status[1] } : []);
      });
    });
    await new Promise<void>((resolve) => upstream!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  }
});
