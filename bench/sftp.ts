import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { BufferStore, type IntakeRecord } from '../src/buffer/store.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import { startSshd } from '../test/helpers/sshd.js';
import { track } from './lib/child.js';
import { judge, type BenchResult } from './lib/report.js';
import { freePort, nowMs, processMemory, sleep } from './lib/system.js';

/**
 * Benchmark 8, SFTP delivery of large batches: the compiled daemon in `delivery.mode:
 * sftp` with `sftpMaxBytes` = `batchMiB` sends `batches` batches of that size to a real OpenSSH
 * server (sshd on a loopback port, started here as the tests start it), from a buffer filled
 * beforehand with scans of about 2 KiB. Reports the gateway's peak RSS (VmHWM) with the target
 * < 200 MiB for 100 MiB batches (the body is streamed from SQLite, never built whole), against the
 * same gateway before its first batch, and the transfer rate.
 */

export interface SftpBenchOptions {
  /** Size of one batch, MiB. */
  batchMiB: number;
  /** Full batches to send. */
  batches: number;
}

export const SFTP_DEFAULTS: SftpBenchOptions = { batchMiB: 100, batches: 2 };

/** A scan of about `bytes` bytes of JSON (the size comes from one attribute). */
function bigScan(i: number, bytes: number): IntakeRecord {
  const reference = `SFTP-${String(i).padStart(8, '0')}`;
  const body = JSON.stringify({
    reference,
    timeStamp: '2026-11-18T07:00:00',
    dcpKey: 'GI-01',
    productModelKey: 'PACK-A',
    supplierKey: 'SUP-0042',
    parents: [],
    attributes: [{ key: 'note', value: 'x'.repeat(Math.max(0, bytes - 190)) }],
  });
  return {
    inputId: 'bench',
    receivedAt: new Date(),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: { reference, dcpKey: 'GI-01', instant: new Date(), body },
  };
}

export async function benchSftp(
  opts: SftpBenchOptions,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-sftp-'));
  const dbFile = join(dir, 'buffer.db');
  const scanBytes = 2048;
  const batchBytes = opts.batchMiB * 2 ** 20;
  // Enough for `batches` full batches; the rest (less than one batch) goes too, after the delay.
  const scans = Math.ceil((opts.batches * batchBytes) / (scanBytes + 1)) + 10;
  const store = BufferStore.openAt(dbFile);
  try {
    for (let i = 0; i < scans; i += 5000) {
      store.intake.commitIntake(
        Array.from({ length: Math.min(5000, scans - i) }, (_, j) => bigScan(i + j, scanBytes)),
        Date.now(),
      );
    }
  } finally {
    store.close();
  }
  const sshd = await startSshd();
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    `site: { id: bench, timezone: Europe/Berlin }
upstream:
  baseUrl: http://127.0.0.1:9
  authUrl: http://127.0.0.1:9
  clientId: demo-client
  clientSecretFile: ${join(PACKAGE_ROOT, 'config/demo-client-secret')}
  sftp: { host: 127.0.0.1, port: ${sshd.port}, username: ${sshd.username}, privateKeyFile: ${sshd.userKeyFile}, hostKey: "${sshd.hostKey}", remoteDir: ${sshd.remoteDir} }
buffer: { path: ${dbFile} }
delivery: { mode: sftp, sftpMaxBytes: ${batchBytes}, sftpMaxScans: 1000000, maxBatchDelayMs: 60000 }
http: { listen: 127.0.0.1:${await freePort()} }
log: { level: info }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
inputs: []
`,
  );
  const child = track(
    spawn(process.execPath, [join(PACKAGE_ROOT, 'dist/src/main.js'), 'run', '--config', config], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
  child.stderr?.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
  const finals = () => readdirSync(sshd.remoteDir).filter((f) => f.endsWith('.json'));
  try {
    const pid = child.pid!;
    const startBy = nowMs() + 30_000;
    let idlePeak = NaN;
    while (!/scan-gateway started/.test(output)) {
      if (child.exitCode !== null || nowMs() > startBy)
        throw new Error(`gateway did not start:\n${output}`);
      idlePeak = processMemory(pid)?.peakMiB ?? idlePeak;
      await sleep(20);
    }
    idlePeak = processMemory(pid)?.peakMiB ?? idlePeak;
    const started = nowMs();
    const deadline = started + 600_000;
    let peak = idlePeak;
    while (finals().length < opts.batches) {
      if (child.exitCode !== null) throw new Error(`gateway exited while sending:\n${output}`);
      if (nowMs() > deadline)
        throw new Error(`${opts.batches} batches were not sent within 600 s:\n${output}`);
      peak = Math.max(peak, processMemory(pid)?.peakMiB ?? 0);
      await sleep(100);
    }
    const tookSec = (nowMs() - started) / 1000;
    peak = Math.max(peak, processMemory(pid)?.peakMiB ?? 0);
    const sizes = finals().map((f) => statSync(join(sshd.remoteDir, f)).size);
    const db = new Database(dbFile, { readonly: true });
    let transferred: number;
    try {
      transferred = db
        .prepare(
          `SELECT count(*) FROM batches WHERE route = 'sftp' AND state IN ('uploaded', 'done')`,
        )
        .pluck()
        .get() as number;
    } finally {
      db.close();
    }
    const sent = sizes.reduce((a, b) => a + b, 0);
    return {
      id: 'sftp',
      title: `${opts.batches} SFTP batches of ${opts.batchMiB} MiB (${Math.round(batchBytes / (scanBytes + 1)).toLocaleString('en-US')} scans of ~2 KiB each) to a local OpenSSH server`,
      figures: [
        judge({
          name: 'gateway peak RSS while sending',
          value: peak,
          unit: 'MiB',
          ceiling: {
            value: idlePeak,
            what: 'the same gateway just started, before its first batch',
          },
          targets: [{ kind: 'max', of: 'value', value: 200 }],
          note: `VmHWM of the gateway process; largest file ${(Math.max(...sizes) / 2 ** 20).toFixed(1)} MiB; the body is streamed from SQLite in pages of about 64 KiB`,
        }),
        judge({
          name: 'transfer rate',
          value: sent / 2 ** 20 / tookSec,
          unit: 'MiB/s',
          note: `${(sent / 2 ** 20).toFixed(0)} MiB in ${tookSec.toFixed(1)} s, hashing, .part write, stat and rename included; ${transferred} batches recorded`,
        }),
      ],
      notes: [],
    };
  } finally {
    child.kill('SIGKILL');
    await new Promise((resolve) =>
      child.exitCode !== null ? resolve(undefined) : child.once('exit', resolve),
    );
    await sshd.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
