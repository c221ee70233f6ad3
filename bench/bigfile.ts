import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
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
import { ENV_WORD, unitEnvironment, unitNodeArgs } from './footprint.js';
import { judge, type BenchResult, type Figure } from './lib/report.js';
import { freePort, nowMs, processMemory, sleep } from './lib/system.js';

/**
 * Benchmark 7, one big file, as a site runs it: the compiled daemon in a process of its own,
 * started with the node options and environment of systemd/scan-gateway.service (the settings
 * every launcher re-executes itself with), the sandbox in another process, so the figure is the
 * gateway's own memory. The configuration is a Goods In station's: a `csv` inbox whose barcodes
 * are GS1 DataMatrix codes mapped to their canonical reference (the demo's rules, the DCP's
 * default duplicate window), and a second inbox into which hostile files are dropped beside the
 * big one (binary junk, 200 overlong rows, an empty file, a 64 MiB line, a 32 MiB field).
 * Delivery runs in batches of 5,000 before the file arrives (a 50,000-row file is taken first).
 * Then a 1,000,000-row CSV export of distinct GS1 codes is renamed into the inbox. Run once per
 * delivery mode (`auto`, `presigned`); each reports the peak RSS (VmHWM of the gateway process)
 * against the target < 250 MiB, beside the same gateway's peak before the big file.
 */

export type BigFileMode = 'auto' | 'presigned';

export interface BigFileOptions {
  /** Rows of the big file. */
  lines: number;
  /** Delivery modes, one run each (default both). */
  modes?: BigFileMode[];
  /** Whether the hostile files go into the second inbox beside the big one (default true). */
  hostile?: boolean;
  /**
   * Node.js options of the gateway process (default: those of systemd/scan-gateway.service's
   * ExecStart, with its Environment=); `NAME=value` words set its environment over the unit's.
   */
  nodeArgs?: string[];
}

export const BIGFILE_DEFAULTS: BigFileOptions = { lines: 1_000_000 };

/** Rows of the file taken first, so that delivery is running when the big one is dropped. */
const WARM_ROWS = 50_000;
/** How long memory is still sampled after the big file was taken (delivery goes on). */
const TAIL_MS = 10_000;

const HEADER = 'read_at,station,barcode,supplier,delivery_note\n';
const EXPORT_START = Date.parse('2026-11-18T06:00:00+01:00');

/** Rows `[from, to)` of a Goods In export: distinct GS1 DataMatrix codes (GTIN, batch, serial), 50 ms apart. */
function exportRows(from: number, to: number): string {
  let block = '';
  for (let j = from; j < to; j++) {
    block += `${new Date(EXPORT_START + j * 50).toISOString()},GI-01,]d2010952123454321310B2611-03\x1d21C${String(j).padStart(10, '0')},SUP-0042,DN-88121\n`;
  }
  return block;
}

/** Writes rows `[from, to)` as a CSV export under a temporary name and renames it to `name` in `dir`. */
async function dropExport(dir: string, name: string, from: number, to: number): Promise<number> {
  const tmp = join(dir, `${name}.tmp`);
  const out = createWriteStream(tmp);
  let bytes = HEADER.length;
  out.write(HEADER);
  for (let i = from; i < to; i += 10_000) {
    const block = exportRows(i, Math.min(to, i + 10_000));
    bytes += block.length;
    if (!out.write(block)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
  }
  await new Promise<void>((resolve, reject) =>
    out.end((err?: Error | null) => (err ? reject(err) : resolve())),
  );
  renameSync(tmp, join(dir, name));
  return bytes;
}

/** The hostile files a second inbox sees on a bad day, each renamed into `dir`. */
function dropHostile(dir: string): string[] {
  const files: [string, Buffer][] = [
    ['junk.bin', randomBytes(8 * 2 ** 20)],
    ['empty.csv', Buffer.alloc(0)],
    [
      'overlong.csv',
      Buffer.from(
        'read_at,station,barcode\n' +
          Array.from(
            { length: 200 },
            (_, i) => `2026-11-18T06:00:00Z,GI-01,${'X'.repeat(60_000)}${i}\n`,
          ).join(''),
      ),
    ],
    ['hugeline.csv', Buffer.alloc(64 * 2 ** 20, 0x41)],
    [
      'hugefield.csv',
      Buffer.concat([
        Buffer.from('read_at,station,barcode\n'),
        Buffer.alloc(32 * 2 ** 20, 0x42),
        Buffer.from('\n'),
      ]),
    ],
  ];
  for (const [name, content] of files) {
    writeFileSync(join(dir, `${name}.tmp`), content);
    renameSync(join(dir, `${name}.tmp`), join(dir, name));
  }
  return files.map(([name]) => name);
}

interface ModeRun {
  mode: BigFileMode;
  peak: number;
  idlePeak: number;
  tookSec: number;
  bytes: number;
  delivered: number;
  largest: { rssMiB: number; anonMiB: number; fileMiB: number };
  hostileLeft: number;
}

async function runMode(opts: BigFileOptions, mode: BigFileMode): Promise<ModeRun> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-bigfile-'));
  const inbox = join(dir, 'inbox');
  const hostile = join(dir, 'hostile');
  mkdirSync(inbox);
  mkdirSync(hostile);
  const dbFile = join(dir, 'buffer.db');
  const config = join(dir, 'config.yaml');
  let sandbox: JsonChild | undefined;
  try {
    sandbox = startJsonChild('sandbox-child.js', [
      JSON.stringify({ processingDelayMs: 200, kafka: false }),
    ]);
    const upstream = (await sandbox.next<{ url: string }>(20_000, 'the sandbox to listen')).url;
    const csv = 'format: csv, barcodeColumn: barcode, timeColumn: read_at, dcp: GI-01';
    writeFileSync(
      config,
      `site: { id: bench, timezone: Europe/Berlin }
upstream: { baseUrl: ${upstream}, authUrl: ${upstream}, clientId: demo-client, clientSecretFile: ${join(PACKAGE_ROOT, 'config/demo-client-secret')} }
delivery: { mode: ${mode}, maxBatchScans: 5000, presignedMaxScans: 5000, maxBatchDelayMs: 1000 }
buffer: { path: ${dbFile} }
http: { listen: 127.0.0.1:${await freePort()} }
log: { level: info }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
inputs:
  - { id: inbox, type: files, dir: ${inbox}, ${csv} }
  - { id: hostile, type: files, dir: ${hostile}, ${csv} }
rules:
  - name: gs1-item
    match: { gs1: true }
    reference: { gs1: canonical }
    attributes: { batch: { ai: '10' }, expiry: { ai: '17', as: date }, purchaseOrder: { ai: '400' } }
  - name: other-codes
    reference: { code: data }
`,
    );
    // As in the footprint row: `NAME=value` words are the daemon's environment, over the unit's.
    const words = opts.nodeArgs ?? unitNodeArgs();
    const nodeArgs = words.filter((w) => !ENV_WORD.test(w));
    const env: Record<string, string> = { ...unitEnvironment() };
    for (const w of words.filter((w) => ENV_WORD.test(w)))
      env[w.slice(0, w.indexOf('='))] = w.slice(w.indexOf('=') + 1);
    const child = track(
      spawn(
        process.execPath,
        [...nodeArgs, join(PACKAGE_ROOT, 'dist/src/main.js'), 'run', '--config', config],
        {
          env: { ...process.env, ...env },
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
      // Delivery running: a first export taken and being sent when the big one arrives.
      await dropExport(inbox, 'warm.csv', 10_000_000, 10_000_000 + WARM_ROWS);
      const warmBy = nowMs() + 120_000;
      while (existsSync(join(inbox, 'warm.csv'))) {
        if (child.exitCode !== null || nowMs() > warmBy)
          throw new Error(`the first file was not taken:\n${output}`);
        await sleep(100);
      }
      const idlePeak = processMemory(pid)?.peakMiB ?? NaN;
      const bytes = await dropExport(inbox, 'big.csv', 0, opts.lines);
      const started = nowMs();
      const hostileFiles = (opts.hostile ?? true) ? dropHostile(hostile) : [];
      const deadline = started + 1_200_000;
      let largest = { rssMiB: 0, anonMiB: 0, fileMiB: 0 };
      let tookSec: number | undefined;
      let tailUntil = Infinity;
      while (nowMs() < tailUntil) {
        if (child.exitCode !== null)
          throw new Error(`gateway exited while taking the file:\n${output}`);
        if (nowMs() > deadline) throw new Error('the file was not taken within 1,200 s');
        const now = processMemory(pid);
        if (now && now.rssMiB > largest.rssMiB) largest = now;
        if (tookSec === undefined && !existsSync(join(inbox, 'big.csv'))) {
          tookSec = (nowMs() - started) / 1000;
          tailUntil = nowMs() + TAIL_MS;
        }
        await sleep(100);
      }
      const peak = processMemory(pid)?.peakMiB ?? NaN;
      const hostileLeft = hostileFiles.filter((f) => existsSync(join(hostile, f))).length;
      const db = new Database(dbFile, { readonly: true });
      let rows: number;
      let delivered: number;
      try {
        rows = db
          .prepare(`SELECT count(*) FROM reads WHERE input_id = 'inbox'`)
          .pluck()
          .get() as number;
        delivered =
          (db
            .prepare(`SELECT coalesce(sum(scan_count), 0) FROM batches WHERE state = 'done'`)
            .pluck()
            .get() as number) ?? 0;
      } finally {
        db.close();
      }
      if (rows !== opts.lines + WARM_ROWS)
        throw new Error(`the buffer holds ${rows} reads, expected ${opts.lines + WARM_ROWS}`);
      return {
        mode,
        peak,
        idlePeak,
        tookSec: tookSec ?? NaN,
        bytes,
        delivered,
        largest,
        hostileLeft,
      };
    } finally {
      child.kill('SIGKILL');
      await new Promise((resolve) =>
        child.exitCode !== null ? resolve(undefined) : child.once('exit', resolve),
      );
    }
  } finally {
    await sandbox?.stop(0);
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchBigFile(
  opts: BigFileOptions,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const modes = opts.modes ?? ['auto', 'presigned'];
  const runs: ModeRun[] = [];
  for (const mode of modes) runs.push(await runMode(opts, mode));
  const figures: Figure[] = [];
  for (const r of runs) {
    figures.push(
      judge({
        name: `gateway peak RSS, delivery mode ${r.mode}`,
        value: r.peak,
        unit: 'MiB',
        ceiling: { value: r.idlePeak, what: 'the same gateway before the big file (peak so far)' },
        targets: [{ kind: 'max', of: 'value', value: 250 }],
        note: `VmHWM of the gateway process, the sandbox in its own; ${r.delivered.toLocaleString('en-US')} scans in batches of 5,000 the service had processed by ${TAIL_MS / 1000} s after the file was taken; largest RSS sampled ${r.largest.rssMiB.toFixed(0)} MiB (${r.largest.anonMiB.toFixed(0)} anonymous, ${r.largest.fileMiB.toFixed(0)} mapped files)`,
      }),
      judge({
        name: `time to take the file, delivery mode ${r.mode}`,
        value: r.tookSec,
        unit: 's',
        note: `${Math.round(opts.lines / r.tookSec).toLocaleString('en-US')} rows/s: hash, check pass, parse, map and commit`,
      }),
    );
  }
  const first = runs[0];
  return {
    id: 'bigfile',
    title: `One ${opts.lines.toLocaleString('en-US')}-row GS1 CSV export (${((first?.bytes ?? 0) / 2 ** 20).toFixed(0)} MiB) dropped into a files inbox beside a running delivery${(opts.hostile ?? true) ? ' and a second inbox of hostile files' : ''}`,
    figures,
    notes: [
      `node options and environment: ${(opts.nodeArgs ?? [...Object.entries(unitEnvironment()).map(([k, v]) => `${k}=${v}`), ...unitNodeArgs()]).join(' ') || 'none'} (over the unit's environment); hostile files left in their inbox after the run: ${runs.map((r) => `${r.mode} ${r.hostileLeft}`).join(', ')} (0: each went to failed/ or processed/)`,
    ],
  };
}
