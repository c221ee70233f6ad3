import { spawn } from 'node:child_process';
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { PACKAGE_ROOT } from '../src/paths.js';
import { startJsonChild, track, type JsonChild } from './lib/child.js';
import { unitEnvironment, unitNodeArgs } from './footprint.js';
import { judge, type BenchResult } from './lib/report.js';
import { freePort, nowMs, processMemory, sleep } from './lib/system.js';

/**
 * Benchmark 7, one big file: the compiled daemon takes a `lines` file of 1,000,000
 * barcodes dropped into its inbox (committed in chunks of 2,000), while its resident memory is
 * sampled. By default delivery runs beside it, as on a line: pre-signed batches of 5,000 scans to
 * the sandbox in a process of its own, with their status polls. Reports the peak RSS (VmHWM of the
 * gateway process) with the target < 250 MiB, against the same gateway's peak before the file was
 * dropped (its idle footprint: what the file adds is the difference), the time to take the whole
 * file, and how many scans were delivered meanwhile.
 */

export interface BigFileOptions {
  /** Lines of the file. */
  lines: number;
  /**
   * Bytes of filler per line, in a second CSV column the input does not read (default 0: a
   * `lines` file). 1,000 makes 1,000,000 lines a 1 GB CSV file with as many reads.
   */
  padBytes?: number;
  /** Whether delivery runs beside the file (pre-signed batches of 5,000 to a sandbox); default true. */
  delivery?: boolean;
  /** Node.js options of the gateway process (default: those of systemd/scan-gateway.service's ExecStart, with its Environment=). */
  nodeArgs?: string[];
}

export const BIGFILE_DEFAULTS: BigFileOptions = { lines: 1_000_000, delivery: true };

/** Writes `lines` barcodes as a `lines` file under a temporary name and renames it into `inbox`. */
async function dropFile(inbox: string, lines: number, padBytes: number): Promise<number> {
  const tmp = join(inbox, 'big.txt.tmp');
  const out = createWriteStream(tmp);
  const pad = padBytes > 0 ? `,${'x'.repeat(padBytes)}` : '';
  let bytes = 0;
  if (pad) {
    out.write('barcode,filler\n');
    bytes += 15;
  }
  for (let i = 0; i < lines; i += 10_000) {
    let block = '';
    for (let j = i; j < Math.min(lines, i + 10_000); j++)
      block += `R${String(j).padStart(9, '0')}${pad}\n`;
    bytes += block.length;
    if (!out.write(block)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
  }
  await new Promise<void>((resolve, reject) =>
    out.end((err?: Error | null) => (err ? reject(err) : resolve())),
  );
  renameSync(tmp, join(inbox, 'big.txt'));
  return bytes;
}

export async function benchBigFile(
  opts: BigFileOptions,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-bigfile-'));
  const inbox = join(dir, 'inbox');
  mkdirSync(inbox);
  const dbFile = join(dir, 'buffer.db');
  const config = join(dir, 'config.yaml');
  const withDelivery = opts.delivery ?? true;
  let sandbox: JsonChild | undefined;
  let upstream = 'http://127.0.0.1:9';
  if (withDelivery) {
    sandbox = startJsonChild('sandbox-child.js', [
      JSON.stringify({ processingDelayMs: 200, kafka: false }),
    ]);
    upstream = (await sandbox.next<{ url: string }>(20_000, 'the sandbox to listen')).url;
  }
  writeFileSync(
    config,
    `site: { id: bench, timezone: Europe/Berlin }
upstream: { baseUrl: ${upstream}, authUrl: ${upstream}, clientId: demo-client, clientSecretFile: ${join(PACKAGE_ROOT, 'config/demo-client-secret')} }
${withDelivery ? 'delivery: { mode: presigned, presignedMaxScans: 5000, maxBatchDelayMs: 1000 }\n' : ''}buffer: { path: ${dbFile} }
http: { listen: 127.0.0.1:${await freePort()} }
log: { level: info }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042, duplicateWindowMs: 0 }
inputs:
  - { id: inbox, type: files, dir: ${inbox}, format: ${(opts.padBytes ?? 0) > 0 ? 'csv' : 'lines'}, dcp: GI-01, stableMs: 100 }
`,
  );
  const child = track(
    spawn(
      process.execPath,
      [
        ...(opts.nodeArgs ?? unitNodeArgs()),
        join(PACKAGE_ROOT, 'dist/src/main.js'),
        'run',
        '--config',
        config,
      ],
      {
        env: { ...process.env, ...unitEnvironment() },
        cwd: dir,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    ),
  );
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
  child.stderr?.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
  try {
    const pid = child.pid!;
    const startBy = nowMs() + 30_000;
    while (!/scan-gateway started/.test(output)) {
      if (child.exitCode !== null || nowMs() > startBy)
        throw new Error(`gateway did not start:\n${output}`);
      await sleep(50);
    }
    await sleep(1000);
    const idlePeak = processMemory(pid)?.peakMiB ?? NaN;
    const bytes = await dropFile(inbox, opts.lines, opts.padBytes ?? 0);
    const started = nowMs();
    const deadline = started + 600_000;
    let peak = idlePeak;
    let atLargest = { rssMiB: 0, peakMiB: 0, anonMiB: 0, fileMiB: 0 };
    while (existsSync(join(inbox, 'big.txt'))) {
      if (child.exitCode !== null)
        throw new Error(`gateway exited while taking the file:\n${output}`);
      if (nowMs() > deadline) throw new Error('the file was not taken within 600 s');
      const now = processMemory(pid);
      // The split of the largest RSS seen: anonymous memory (V8's heap, SQLite's page cache,
      // malloc) against mapped files (code, the database's shared memory).
      if (now && now.rssMiB > atLargest.rssMiB) atLargest = now;
      peak = Math.max(peak, now?.peakMiB ?? 0);
      await sleep(100);
    }
    const tookSec = (nowMs() - started) / 1000;
    peak = Math.max(peak, processMemory(pid)?.peakMiB ?? 0);
    const db = new Database(dbFile, { readonly: true });
    let rows: number;
    let delivered: number;
    try {
      rows = db.prepare(`SELECT count(*) FROM reads`).pluck().get() as number;
      delivered =
        (db
          .prepare(`SELECT coalesce(sum(scan_count), 0) FROM batches WHERE state = 'done'`)
          .pluck()
          .get() as number) ?? 0;
    } finally {
      db.close();
    }
    if (rows !== opts.lines)
      throw new Error(`the buffer holds ${rows} reads, expected ${opts.lines}`);
    return {
      id: 'bigfile',
      title: `One ${opts.lines.toLocaleString('en-US')}-line ${(opts.padBytes ?? 0) > 0 ? 'CSV' : 'lines'} file (${(bytes / 2 ** 20).toFixed(0)} MiB) dropped into a files inbox${withDelivery ? ', delivery beside it' : ''}`,
      figures: [
        judge({
          name: 'gateway peak RSS while taking the file',
          value: peak,
          unit: 'MiB',
          ceiling: { value: idlePeak, what: 'the same gateway before the file (peak so far)' },
          targets: [{ kind: 'max', of: 'value', value: 250 }],
          note: `VmHWM of the gateway process; the file is committed in chunks of 2,000 lines${withDelivery ? `; ${delivered.toLocaleString('en-US')} scans in batches the service had processed (pre-signed, 5,000 each) by the time the file was taken` : '; no delivery (upstream unreachable)'}`,
        }),
        judge({
          name: 'time to take the file',
          value: tookSec,
          unit: 's',
          note: `${Math.round(opts.lines / tookSec).toLocaleString('en-US')} lines/s, parse, map and commit`,
        }),
      ],
      notes: [
        `largest RSS sampled ${atLargest.rssMiB.toFixed(0)} MiB: ${atLargest.anonMiB.toFixed(0)} MiB anonymous (V8 heap, SQLite cache, malloc), ${atLargest.fileMiB.toFixed(0)} MiB mapped files; node options: ${(opts.nodeArgs ?? unitNodeArgs()).join(' ') || 'none'}`,
      ],
    };
  } finally {
    child.kill('SIGKILL');
    await new Promise((resolve) =>
      child.exitCode !== null ? resolve(undefined) : child.once('exit', resolve),
    );
    await sandbox?.stop(0);
    rmSync(dir, { recursive: true, force: true });
  }
}
