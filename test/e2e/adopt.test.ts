import { spawn } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { PACKAGE_ROOT } from '../../src/paths.js';
import {
  MAIN_JS,
  startGateway,
  writeInboxConfig,
  type GatewayProcess,
} from '../helpers/gateway-process.js';
import { dropCsv } from '../helpers/inbox.js';
import { freePort } from '../helpers/ports.js';
import { waitFor } from '../helpers/wait.js';

/**
 * `scan-gateway adopt` on a disk copy of a SIGKILLed gateway's buffer (docs/high-availability.md):
 * the compiled gateway delivers pre-signed to the sandbox and is killed while some batches wait for
 * their status at the service, one may be on the wire and the rest are pending. Its buffer files
 * (db, -wal, -shm, as a copied disk holds them) are adopted by a second node whose own gateway
 * runs beside: every scan reaches the sandbox once, and the batches the service had before the kill
 * keep their requestIds. Refused: a buffer a live gateway has open, and one of a newer schema.
 */

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const ENV = { SCAN_GATEWAY_CLIENT_SECRET: SECRET };
const DELIVERY =
  'mode: presigned, maxBatchScans: 100, presignedMaxScans: 100, maxBatchDelayMs: 30, uploadConcurrency: 1, statusPollMs: 100, statusPollMaxMs: 300, retryBaseMs: 30, retryMaxMs: 200, notFoundGraceMs: 400';

interface LoggedScan {
  requestId: string;
  scan: { reference: string };
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `scan-gateway adopt ARGS` (the compiled CLI) to its end. */
function adopt(args: string[], cwd: string): Promise<Run> {
  const child = spawn(process.execPath, [MAIN_JS, 'adopt', ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', ...ENV },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

/** Batch states and scan counts of a buffer file, read-only (the writer is dead or gone). */
function bufferState(file: string): {
  batches: { id: number; state: string; requestId: string | null; refs: string[] }[];
  pending: number;
} {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const batches = (
      db.prepare(`SELECT id, state, request_id AS requestId FROM batches ORDER BY id`).all() as {
        id: number;
        state: string;
        requestId: string | null;
      }[]
    ).map((b) => ({
      ...b,
      refs: db
        .prepare(`SELECT reference FROM scans WHERE batch_id = ? ORDER BY id`)
        .pluck()
        .all(b.id) as string[],
    }));
    const pending = db
      .prepare(`SELECT count(*) FROM scans WHERE state = 'pending'`)
      .pluck()
      .get() as number;
    return { batches, pending };
  } finally {
    db.close();
  }
}

async function sandboxScans(sandbox: RunningSandbox): Promise<LoggedScan[]> {
  return ((await (await fetch(`${sandbox.url}/_sandbox/scans`)).json()) as { scans: LoggedScan[] })
    .scans;
}

/** Copies `from` (a buffer file) with its -wal and -shm to `to`, as a copy of the dead node's disk holds them. */
function copyBuffer(from: string, to: string): void {
  for (const suffix of ['', '-wal', '-shm'])
    if (existsSync(from + suffix)) copyFileSync(from + suffix, to + suffix);
}

/** A second node's configuration: its own buffer and inbox, the health server on a fixed port. */
function survivorConfig(dir: string, sandboxUrl: string, port: number): string {
  const file = writeInboxConfig(dir, { site: 'survivor', sandboxUrl, delivery: DELIVERY });
  writeFileSync(
    file,
    readFileSync(file, 'utf8').replace(
      'http: { listen: 127.0.0.1:0 }',
      `http: { listen: 127.0.0.1:${port} }`,
    ),
  );
  return file;
}

describe("scan-gateway adopt: a dead node's buffer, delivered by the survivor", () => {
  let sandbox: RunningSandbox;
  let dead: GatewayProcess | undefined;
  let survivor: GatewayProcess | undefined;
  beforeAll(async () => {
    // Processing takes 3 s: batches the gateway uploaded wait for their status long enough to be
    // caught `uploaded` by the kill.
    sandbox = await startSandbox({ port: 0, processingDelayMs: 3000, kafka: false });
  });
  afterAll(async () => {
    await dead?.kill();
    await survivor?.kill();
    await sandbox.close();
  });

  it(
    'delivers every scan once, following the uploaded batches under their own requestIds; refuses a live or newer buffer',
    { timeout: 120_000 },
    async () => {
      const deadDir = mkdtempSync(join(tmpdir(), 'sg-adopt-dead-'));
      const deadDb = join(deadDir, 'buffer.db');
      dead = await startGateway(
        writeInboxConfig(deadDir, { site: 'dead', sandboxUrl: sandbox.url, delivery: DELIVERY }),
        ENV,
        deadDir,
      );
      // Uploads are slowed so that most of the file is still pending at the kill.
      sandbox.setFaults({ latencyMs: 150 });
      const expected = dropCsv(join(deadDir, 'inbox'), 'line1', 2000);
      await waitFor(
        () => {
          if (!existsSync(deadDb)) return false;
          const s = bufferState(deadDb);
          return s.batches.filter((b) => b.state === 'uploaded').length >= 3 && s.pending > 0;
        },
        { timeoutMs: 30_000, intervalMs: 20, what: 'three batches uploaded and scans pending' },
      );
      await dead.kill();
      dead = undefined;
      // The dead node's disk, copied before anything opens the files again.
      const nodeDir = mkdtempSync(join(tmpdir(), 'sg-adopt-survivor-'));
      mkdirSync(join(nodeDir, 'adopted'));
      const copy = join(nodeDir, 'adopted', 'buffer.db');
      copyBuffer(deadDb, copy);
      expect(existsSync(`${copy}-wal`)).toBe(true);
      const atKill = bufferState(deadDb);
      const uploaded = atKill.batches.filter((b) => b.state === 'uploaded');
      const onTheWay = atKill.batches.filter((b) => b.state === 'presigned' || b.state === 'ready');
      const before = await sandboxScans(sandbox);
      console.log(
        `adopt test: at the kill ${uploaded.length} batches uploaded awaiting status, ${onTheWay.length} presigned/ready, ${atKill.pending} scans pending; ` +
          `the sandbox had ${before.length} scans`,
      );
      expect(atKill.batches.some((b) => b.state === 'done') || uploaded.length > 0).toBe(true);

      // The survivor: its own gateway runs on its own buffer, inbox and port while adopt works.
      const port = await freePort();
      const config = survivorConfig(nodeDir, sandbox.url, port);
      survivor = await startGateway(config, ENV, nodeDir);

      // Refused: the survivor's own buffer, which its live gateway has open.
      const live = await adopt([join(nodeDir, 'buffer.db'), '--config', config], nodeDir);
      expect(live.code).toBe(4);
      expect(live.stderr).toMatch(
        /is open by another process \(a gateway running on it, or another adopt\)/,
      );

      // Refused: a buffer of a schema newer than this gateway.
      const newer = join(nodeDir, 'newer.db');
      copyBuffer(deadDb, newer);
      const db = new Database(newer);
      db.pragma('user_version = 999');
      db.close();
      const refusedNewer = await adopt([newer, '--config', config], nodeDir);
      expect(refusedNewer.code).toBe(4);
      expect(refusedNewer.stderr).toMatch(/schema version 999, newer than this gateway knows/);

      sandbox.setFaults({ latencyMs: 0 });
      const run = await adopt([copy, '--config', config, '--json', '--timeout', '60'], nodeDir);
      expect(run.code, run.stderr).toBe(0);
      const summary = JSON.parse(run.stdout) as {
        delivered: number;
        failed: number;
        held: number;
        finished: boolean;
        left: { pendingScans: number; openBatches: number };
      };
      const undeliveredAtKill =
        atKill.pending +
        atKill.batches.filter((b) => b.state !== 'done').reduce((n, b) => n + b.refs.length, 0);
      console.log(`adopt test: summary ${run.stdout.trim()}`);
      expect(summary).toMatchObject({
        delivered: undeliveredAtKill,
        failed: 0,
        held: 0,
        finished: true,
        left: { pendingScans: 0, openBatches: 0 },
      });
      // Progress and the file it adopted are in the log (stderr).
      expect(run.stderr).toMatch(/adopting the buffer: delivering what it holds/);

      // 0 lost, 0 twice: the sandbox has every reference once.
      const received = await sandboxScans(sandbox);
      const counts = new Map<string, number>();
      for (const s of received)
        counts.set(s.scan.reference, (counts.get(s.scan.reference) ?? 0) + 1);
      expect(expected.filter((r) => !counts.has(r))).toEqual([]);
      expect([...counts].filter(([, n]) => n > 1)).toEqual([]);
      expect(received).toHaveLength(expected.length);
      // The batches the service had before the kill were followed under their own requestIds, not sent
      // again; a pre-signed one whose address was taken went under that address's requestId too.
      const requestIdOf = new Map(received.map((s) => [s.scan.reference, s.requestId]));
      for (const b of uploaded)
        for (const ref of b.refs)
          expect(requestIdOf.get(ref), `${ref} of batch ${b.id}`).toBe(b.requestId);
      for (const b of atKill.batches.filter((x) => x.requestId !== null))
        expect(
          new Set(b.refs.map((r) => requestIdOf.get(r))),
          `batch ${b.id} (${b.state})`,
        ).toEqual(new Set([b.requestId]));
      const after = bufferState(copy);
      for (const b of uploaded)
        expect(after.batches.find((a) => a.id === b.id)).toMatchObject({
          state: 'done',
          requestId: b.requestId,
        });
      expect(after.batches.every((b) => b.state === 'done')).toBe(true);
      expect(after.pending).toBe(0);

      // The survivor's gateway ran on undisturbed beside it.
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
      expect(await survivor.stop()).toBe(0);
      survivor = undefined;
    },
  );
});
