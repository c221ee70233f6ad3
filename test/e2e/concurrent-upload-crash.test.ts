import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { startGateway, writeInboxConfig, type GatewayProcess } from '../helpers/gateway-process.js';
import { dropCsv } from '../helpers/inbox.js';
import { waitFor } from '../helpers/wait.js';
import { sandboxRefs } from '../helpers/sandbox-scans.js';

/**
 * A SIGKILL while several uploads are in flight at once (`delivery.uploadConcurrency`):
 * the compiled gateway runs as a child process, the sandbox takes each upload and holds its answer
 * back, and the gateway is killed once three batches are on the wire. After a restart each of
 * them is recovered by its own stored state: pre-signed ones by asking their status (none sent
 * twice), direct ones sent again and each counted as a possible duplicate.
 */

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const SCANS = 1500;

function writeConfig(dir: string, sandboxUrl: string, mode: 'direct' | 'presigned'): string {
  return writeInboxConfig(dir, {
    site: 'crash',
    sandboxUrl,
    requestTimeoutMs: 10_000,
    delivery: `mode: ${mode}, uploadConcurrency: 3, maxBatchScans: 200, presignedMaxScans: 200, maxBatchDelayMs: 30, statusPollMs: 60, statusPollMaxMs: 200, retryBaseMs: 30, retryMaxMs: 200, notFoundGraceMs: 400`,
  });
}

/** Batches on the wire now: direct ones `uploading`, pre-signed ones `presigned` with a PUT started. */
function onTheWire(dbFile: string): number[] {
  if (!existsSync(dbFile)) return [];
  const db = new Database(dbFile, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 1000');
    return db
      .prepare(
        `SELECT id FROM batches WHERE state = 'uploading' OR (state = 'presigned' AND put_started_at IS NOT NULL) ORDER BY id`,
      )
      .pluck()
      .all() as number[];
  } catch {
    return [];
  } finally {
    db.close();
  }
}

async function crashWithThreeInFlight(sandbox: RunningSandbox, mode: 'direct' | 'presigned') {
  const dir = mkdtempSync(join(tmpdir(), `sg-conc-crash-${mode}-`));
  const config = writeConfig(dir, sandbox.url, mode);
  const dbFile = join(dir, 'buffer.db');
  const env = { SCAN_GATEWAY_CLIENT_SECRET: SECRET };
  let gateway: GatewayProcess | undefined;
  try {
    // The service takes each upload and holds its answer 5 s: uploads stay in flight, their data arrived.
    sandbox.setFaults({ answerDelayMs: 5000 });
    gateway = await startGateway(config, env, dir);
    const expected = dropCsv(join(dir, 'inbox'), 'conc', SCANS);
    const inFlight = await waitFor(
      () => (onTheWire(dbFile).length >= 3 ? onTheWire(dbFile) : undefined),
      { timeoutMs: 30_000, intervalMs: 10, what: 'three uploads on the wire' },
    );
    // Every one of them reached the service (its answer is what is held back).
    await waitFor(async () => (await sandboxRefs(sandbox)).length >= 3 * 200, {
      timeoutMs: 30_000,
      what: 'the service has the three uploads',
    });
    await gateway.kill();
    gateway = undefined;
    expect(inFlight).toHaveLength(3);

    sandbox.setFaults({ answerDelayMs: 0 });
    gateway = await startGateway(config, env, dir);
    const url = gateway.httpUrl;
    await waitFor(
      async () => {
        const s = (await (await fetch(`${url}/api/v1/status`)).json()) as {
          buffer: { undeliveredScans: number; pendingScans?: number };
        };
        return s.buffer.undeliveredScans === 0 && (await sandboxRefs(sandbox)).length >= SCANS;
      },
      { timeoutMs: 30_000, intervalMs: 100, what: 'every scan delivered after the restart' },
    );
    const status = (await (await fetch(`${url}/api/v1/status`)).json()) as {
      delivery: {
        possibleDuplicates: number;
        possibleDuplicateUploads: number;
        possibleDuplicatesTotal: number;
      };
    };
    expect(await gateway.stop()).toBe(0);
    gateway = undefined;

    const received = await sandboxRefs(sandbox);
    const db = new Database(dbFile, { readonly: true });
    let flagged: number[];
    try {
      flagged = db
        .prepare(`SELECT id FROM batches WHERE possible_duplicate > 0 ORDER BY id`)
        .pluck()
        .all() as number[];
    } finally {
      db.close();
    }
    // None lost.
    expect(expected.filter((r) => !received.includes(r))).toEqual([]);
    return { received, expected, inFlight, flagged, status: status.delivery };
  } finally {
    await gateway?.kill();
  }
}

describe.concurrent('SIGKILL with three uploads in flight (uploadConcurrency 3)', () => {
  const sandboxes: RunningSandbox[] = [];
  beforeAll(async () => {
    for (let i = 0; i < 2; i++)
      sandboxes.push(await startSandbox({ port: 0, processingDelayMs: 100 }));
  });
  afterAll(async () => {
    for (const s of sandboxes) await s.close();
  });

  it(
    'pre-signed: each batch in flight is recovered by its status; none sent twice, none counted',
    { timeout: 120_000 },
    async () => {
      const r = await crashWithThreeInFlight(sandboxes[0]!, 'presigned');
      expect(r.received).toHaveLength(SCANS);
      expect(new Set(r.received).size).toBe(SCANS);
      expect(r.flagged).toEqual([]);
      expect(r.status.possibleDuplicatesTotal).toBe(0);
    },
  );

  it(
    'direct: each batch in flight is sent again and counted as a possible duplicate, and only those',
    { timeout: 120_000 },
    async () => {
      const r = await crashWithThreeInFlight(sandboxes[1]!, 'direct');
      // The three in flight had arrived: each is twice at the service, and each was counted (the
      // open count falls back once the service's status of each batch is known; the total stays).
      expect(r.flagged).toEqual(r.inFlight);
      expect(r.received).toHaveLength(SCANS + 3 * 200);
      expect(r.status.possibleDuplicatesTotal).toBe(600);
    },
  );
});
