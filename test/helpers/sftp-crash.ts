import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { startGateway, type GatewayProcess } from './gateway-process.js';
import { waitFor } from './wait.js';
import { dropCsv } from './inbox.js';

/** An SFTP server the crash run sends to, and where its files land on this machine. */
export interface SftpTarget {
  /** The `upstream.sftp` mapping (YAML flow style), without remoteDir. */
  sftpYaml: string;
  /** The remoteDir as the server sees it. */
  remoteDir: string;
  /** The same folder on this machine's disk. */
  localDir: string;
  /** Extra environment of the gateway (a password). */
  env?: Record<string, string>;
}

/** What one crash run saw, for the assertions of the test that ran it. */
export interface SftpCrashResult {
  expected: string[];
  /** Reference → the remote files it is in. */
  filesOf: Map<string, string[]>;
  files: string[];
  parts: string[];
  invalid: string[];
  kills: string[];
  transfersKilled: number;
  integrity: string;
  /** Every gateway process's output, one after the other. */
  output: string;
  /** Restarts that found a batch file complete (killed after the rename), and that removed a left-over `.part`. */
  recovered: { found: number; partRemoved: number };
}

/** SFTP batches with a transfer in flight (`uploading`), from a read-only connection beside the gateway. */
function transferring(dbFile: string): number {
  if (!existsSync(dbFile)) return 0;
  try {
    const db = new Database(dbFile, { readonly: true, fileMustExist: true });
    try {
      db.pragma('busy_timeout = 1000');
      return db
        .prepare(`SELECT count(*) FROM batches WHERE state = 'uploading'`)
        .pluck()
        .get() as number;
    } finally {
      db.close();
    }
  } catch {
    return 0;
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The SFTP crash run: the compiled gateway in `delivery.mode: sftp` takes `total`
 * scans from dropped files and is killed with SIGKILL `kills` times while a transfer is in flight
 * (alternately: a `.part` being written, and just after a batch file appeared under its final name,
 * before the gateway could record it), restarted each time, and finally left to finish. The caller
 * asserts on what the remote folder holds.
 */
export async function sftpCrashRun(
  target: SftpTarget,
  opts: { total: number; kills: number; baseUrl: string; clientSecret: string },
): Promise<SftpCrashResult> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-sftp-crash-'));
  const inbox = join(dir, 'inbox');
  const dbFile = join(dir, 'buffer.db');
  const file = join(dir, 'config.yaml');
  writeFileSync(
    file,
    `site: { id: crash, timezone: Europe/Berlin }
upstream:
  baseUrl: ${opts.baseUrl}
  authUrl: ${opts.baseUrl}
  clientId: demo-client
  sftp: { ${target.sftpYaml}, remoteDir: ${target.remoteDir}, connectTimeoutMs: 5000 }
buffer: { path: ${dbFile} }
delivery: { mode: sftp, sftpMaxScans: 1000, maxBatchDelayMs: 30, retryBaseMs: 30, retryMaxMs: 200 }
http: { listen: 127.0.0.1:0 }
log: { level: info }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042, duplicateWindowMs: 0 }
inputs:
  - { id: inbox, type: files, dir: ${inbox}, format: csv, barcodeColumn: barcode, timeColumn: read_at, dcp: GI-01, stableMs: 30 }
`,
  );
  const env = { SCAN_GATEWAY_CLIENT_SECRET: opts.clientSecret, ...target.env };
  const perFile = Math.ceil(opts.total / opts.kills);
  const expected: string[] = [];
  const kills: string[] = [];
  let transfersKilled = 0;
  let gateway: GatewayProcess | undefined;
  let output = '';
  const finals = () => readdirSync(target.localDir).filter((f) => f.endsWith('.json')).length;
  const hasPart = () => readdirSync(target.localDir).some((f) => f.endsWith('.part'));
  try {
    for (let k = 0; k < opts.kills; k++) {
      gateway = await startGateway(file, env, dir);
      const rows = Math.min(perFile, opts.total - expected.length);
      if (rows > 0) expected.push(...dropCsv(inbox, `f${k}`, rows));
      const before = finals();
      const onPart = k % 2 === 0;
      // Polled fast: a batch of 1,000 scans is written in tens of ms.
      const hit = await waitFor(
        () => (onPart ? hasPart() || transferring(dbFile) > 0 : finals() > before),
        { timeoutMs: 30_000, intervalMs: 2 },
      ).then(
        () => true,
        () => false,
      );
      if (onPart) await sleep(Math.random() * 5);
      await gateway.kill();
      output += gateway.output();
      gateway = undefined;
      if (hit) transfersKilled++;
      kills.push(
        onPart
          ? hit
            ? 'during a .part write'
            : 'no transfer seen'
          : hit
            ? 'just after a rename'
            : 'no rename seen',
      );
    }
    gateway = await startGateway(file, env, dir);
    const url = gateway.httpUrl;
    await waitFor(
      async () => {
        const s = (await (await fetch(`${url}/api/v1/status`)).json()) as {
          buffer: { undeliveredScans: number };
        };
        return (
          s.buffer.undeliveredScans === 0 &&
          readdirSync(inbox).filter((f) => f.endsWith('.csv')).length === 0
        );
      },
      { timeoutMs: 60_000, intervalMs: 200, what: 'nothing undelivered' },
    );
    output += gateway.output();
    await gateway.stop();
    gateway = undefined;

    const names = readdirSync(target.localDir);
    const files = names.filter((f) => f.endsWith('.json'));
    const parts = names.filter((f) => f.endsWith('.part'));
    const filesOf = new Map<string, string[]>();
    const invalid: string[] = [];
    for (const f of files) {
      let scans: unknown;
      try {
        scans = JSON.parse(readFileSync(join(target.localDir, f), 'utf8'));
      } catch {
        invalid.push(f);
        continue;
      }
      if (
        !Array.isArray(scans) ||
        scans.some((s) => typeof (s as { reference?: unknown })?.reference !== 'string')
      ) {
        invalid.push(f);
        continue;
      }
      for (const s of scans as { reference: string }[])
        filesOf.set(s.reference, [...(filesOf.get(s.reference) ?? []), f]);
    }
    const db = new Database(dbFile, { readonly: true });
    let integrity: string;
    try {
      integrity = String(db.pragma('integrity_check', { simple: true }));
    } finally {
      db.close();
    }
    const count = (text: string) => output.split(text).length - 1;
    const recovered = {
      found: count('batch file is complete on the SFTP server already'),
      partRemoved: count('a partial batch file was left by an interrupted transfer'),
    };
    return {
      expected,
      filesOf,
      files,
      parts,
      invalid,
      kills,
      transfersKilled,
      integrity,
      output,
      recovered,
    };
  } finally {
    await gateway?.kill();
  }
}
