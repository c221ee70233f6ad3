import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { buildApp } from '../src/app.js';
import { parseConfigText } from '../src/config/load.js';
import { silentLogger } from '../src/log.js';
import { judge, type BenchResult } from './lib/report.js';
import { median, sleep } from './lib/system.js';
import { acceptingUpstream } from './lib/accepting-upstream.js';

export interface HandshakeFloodBenchOptions {
  /** Seconds of probes alone (the ceiling), then the same during the flood. */
  seconds: number;
  /** Flooding addresses (127.0.0.2, 127.0.0.3, …). */
  addresses: number;
  /** Sockets each flooding address keeps open, each reopened as soon as it is closed. */
  socketsPerAddress: number;
}

export const HANDSHAKE_FLOOD_DEFAULTS: HandshakeFloodBenchOptions = {
  seconds: 10,
  addresses: 6,
  socketsPerAddress: 60,
};

/** The target: /healthz answers within this at p99 during the flood, in ms. */
export const FLOOD_PROBE_TARGET_MS = 100;

/** Between two probes of one prober, ms. */
const PROBE_EVERY_MS = 50;

const api = acceptingUpstream;

/**
 * The probers and the flood, each in a thread of its own (a client on the gateway's event loop
 * could not time an answer while the gateway holds it). A prober sends GET /healthz on a fixed
 * clock (open loop), each on a new connection: the time includes the TLS handshake, which is what
 * the flood contends for. The flood's sockets never send a ClientHello (half of them the first
 * bytes of one) and are reopened as soon as the gateway closes them; they stand for other
 * machines, so they yield the shared cores to the gateway.
 */
const CLIENT_SCRIPT = `
const https = require('node:https');
const net = require('node:net');
const { parentPort, workerData: w } = require('node:worker_threads');
let stop = false;
parentPort.once('message', () => (stop = true));
if (w.role === 'probe') {
  const ms = [];
  const failed = [];
  const pending = new Set();
  const call = () => new Promise((resolve) => {
    const started = performance.now();
    const req = https.request({ host: '127.0.0.1', port: w.port, path: '/healthz', localAddress: w.from, ca: w.ca, servername: 'localhost', agent: false, timeout: 30000 }, (res) => {
      res.resume();
      res.on('end', () => { res.statusCode === 200 || res.statusCode === 503 ? ms.push(performance.now() - started) : failed.push(String(res.statusCode)); resolve(); });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => { failed.push(e.code || e.message); resolve(); });
    req.end();
  });
  const timer = setInterval(() => {
    if (stop) {
      clearInterval(timer);
      Promise.all(pending).then(() => parentPort.postMessage({ ms, failed }));
      return;
    }
    const p = call();
    pending.add(p);
    p.finally(() => pending.delete(p));
  }, w.everyMs);
} else {
  try { require('node:os').setPriority(0, 19); } catch {}
  const half = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01]);
  let opened = 0;
  let open = 0;
  const sockets = new Set();
  const one = (from, i) => {
    if (stop) return;
    opened++;
    open++;
    const s = net.connect({ port: w.port, host: '127.0.0.1', localAddress: from });
    sockets.add(s);
    s.on('error', () => {});
    if (i % 2 === 1) s.once('connect', () => s.write(half));
    s.on('close', () => { open--; sockets.delete(s); setTimeout(() => one(from, i), 5); });
  };
  for (const from of w.addresses) for (let i = 0; i < w.sockets; i++) one(from, i);
  const wait = setInterval(() => {
    if (!stop) return;
    clearInterval(wait);
    for (const s of sockets) s.destroy();
    parentPort.postMessage({ opened });
  }, 50);
}
`;

function startClient<T>(data: Record<string, unknown>): { stop: () => Promise<T> } {
  const worker = new Worker(CLIENT_SCRIPT, { eval: true, workerData: data });
  const result = new Promise<T>((resolve, reject) => {
    worker.once('message', (m: T) => resolve(m));
    worker.once('error', reject);
  });
  return {
    stop: async () => {
      worker.postMessage('stop');
      try {
        return await result;
      } finally {
        await worker.terminate();
      }
    },
  };
}

const p99 = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0
    ? NaN
    : sorted[Math.min(sorted.length - 1, Math.ceil(0.99 * sorted.length) - 1)]!;
};

/** A self-signed P-256 certificate for localhost and 127.0.0.1, made with the openssl command. */
function makeCertificate(dir: string): { certFile: string; keyFile: string; pem: string } {
  const certFile = join(dir, 'gw.pem');
  const keyFile = join(dir, 'gw.key');
  const r = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-days',
      '2',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
      '-keyout',
      keyFile,
      '-out',
      certFile,
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0)
    throw new Error(`openssl could not make the certificate: ${r.error?.message ?? r.stderr}`);
  return { certFile, keyFile, pem: readFileSync(certFile, 'utf8') };
}

interface ProbeResult {
  ms: number[];
  failed: string[];
}

/**
 * Benchmark `handshake-flood`: the real app over TLS (`http.tls`, default `http.limits`), probed
 * with GET /healthz every 50 ms on new connections from 127.0.0.1 (trusted) and from 127.0.0.8 (a
 * newcomer nobody listed), first alone (the ceiling), then while `addresses` other addresses keep
 * `socketsPerAddress` sockets each in an unfinished handshake, reopening each as it is closed.
 */
export async function benchHandshakeFlood(
  opts: HandshakeFloodBenchOptions = HANDSHAKE_FLOOD_DEFAULTS,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-flood-'));
  const cert = makeCertificate(dir);
  const file = join(dir, 'config.yaml');
  const yaml = `site: { id: bench, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${join(dir, 'gw.db')} }
http: { listen: "127.0.0.1:0", tls: { certFile: ${cert.certFile}, keyFile: ${cert.keyFile} } }
dcps:
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A }
inputs: []
`;
  const app = buildApp(
    { file, config: parseConfigText(yaml, file), clientSecret: 'x' },
    { logger: silentLogger(), api },
  );
  await app.start();
  try {
    const port = Number(new URL(app.httpUrl!).port);
    const probe = (from: string) =>
      startClient<ProbeResult>({
        role: 'probe',
        from,
        port,
        ca: cert.pem,
        everyMs: PROBE_EVERY_MS,
      });
    const alone = [probe('127.0.0.1'), probe('127.0.0.8')];
    await sleep(opts.seconds * 1000);
    const [aloneLoop, aloneNew] = await Promise.all(alone.map((p) => p.stop()));

    const addresses = Array.from({ length: opts.addresses }, (_, i) => `127.0.0.${i + 2}`);
    const flood = startClient<{ opened: number }>({
      role: 'flood',
      port,
      addresses,
      sockets: opts.socketsPerAddress,
    });
    // The flood's first sockets are open before the probes start.
    await sleep(1000);
    const loaded = [probe('127.0.0.1'), probe('127.0.0.8')];
    await sleep(opts.seconds * 1000);
    const [loop, newcomer] = await Promise.all(loaded.map((p) => p.stop()));
    const { opened } = await flood.stop();

    const note = (under: ProbeResult, before: ProbeResult) =>
      `${under.ms.length} probes during the flood (median ${median(under.ms).toFixed(1)} ms, max ${Math.max(...under.ms).toFixed(0)} ms, ${under.failed.length} failed${under.failed.length > 0 ? `: ${[...new Set(under.failed)].slice(0, 3).join(', ')}` : ''}), ${before.ms.length} alone (median ${median(before.ms).toFixed(1)} ms)`;
    return {
      id: 'handshake-flood',
      title: 'Probes during a slow-handshake flood from several addresses',
      figures: [
        judge({
          name: `/healthz p99 from 127.0.0.1 while ${opts.addresses} addresses hold unfinished TLS handshakes`,
          value: p99(loop!.ms),
          unit: 'ms',
          ceiling: { value: p99(aloneLoop!.ms), what: 'the same probes with no flood (same run)' },
          targets: [{ kind: 'max', of: 'value', value: FLOOD_PROBE_TARGET_MS }],
          note: note(loop!, aloneLoop!),
        }),
        judge({
          name: `/healthz p99 from an unlisted newcomer (127.0.0.8) during the same flood`,
          value: p99(newcomer!.ms),
          unit: 'ms',
          ceiling: { value: p99(aloneNew!.ms), what: 'the same probes with no flood (same run)' },
          targets: [{ kind: 'max', of: 'value', value: FLOOD_PROBE_TARGET_MS }],
          note: note(newcomer!, aloneNew!),
        }),
      ],
      notes: [
        `flood: ${opts.addresses} addresses × ${opts.socketsPerAddress} sockets that never finish a handshake (half send the first bytes of a ClientHello), reopened 5 ms after each close: ${opened} sockets opened in ${opts.seconds + 1} s; probes every ${PROBE_EVERY_MS} ms on a new connection each (the handshake included); default http.limits (maxConnections 256, maxPendingHandshakes 32, tlsHandshakeTimeoutMs 3000, trustedReserve 16)`,
      ],
    };
  } finally {
    await app.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
