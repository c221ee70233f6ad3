import { mkdirSync, mkdtempSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Status events for SFTP batches end to end: the compiled gateway in
 * `delivery.mode: sftp` transfers its batches to the sandbox's SFTP endpoint and reads the
 * sandbox's status topic (its real Kafka endpoint). A batch ends `transferred` when its file is
 * on the server, and the event whose description names the file ("<file name>: …", the
 * convention of docs/delivery.md "SFTP") moves it on to the service's terminal state; no status
 * request is made.
 */

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const TEN_MINUTES = 600_000;
const PROCESSING_MS = 1500;

interface BatchView {
  id: number;
  state: string;
  requestId: string | null;
  upstreamState: string | null;
  processed: number | null;
  failed: number | null;
}
interface Status {
  batches: BatchView[];
  statusEvents?: {
    state: string;
    received: number;
    applied: number;
    duplicates: number;
    ignored: number;
    invalid: number;
  };
}

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function writeConfig(dir: string, sandbox: RunningSandbox): string {
  writeFileSync(join(dir, 'kafka-ca.pem'), sandbox.kafka!.caPem);
  mkdirSync(join(dir, 'inbox'), { recursive: true });
  const sftp = sandbox.sftp!;
  const file = join(dir, 'config.yaml');
  // GI-99 is a DCP of this site, not of the sandbox's client: the service refuses its scans (Invalid DCP).
  writeFileSync(
    file,
    `site: { id: sftpev, timezone: Europe/Berlin }
upstream:
  baseUrl: ${sandbox.url}
  authUrl: ${sandbox.url}
  clientId: demo-client
  requestTimeoutMs: 5000
  sftp: { host: ${sftp.host}, port: ${sftp.port}, hostKey: "${sftp.hostKey}", remoteDir: /, connectTimeoutMs: 5000 }
  statusEvents: { enabled: true, bootstrapServers: [${sandbox.kafka!.bootstrapServers}], environment: sandbox, caFile: ${join(dir, 'kafka-ca.pem')}, safetyPollMs: ${TEN_MINUTES}, staleAfterMs: 10000 }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: sftp, sftpMaxScans: 20, maxBatchDelayMs: 30, statusPollMs: ${TEN_MINUTES}, statusPollMaxMs: ${TEN_MINUTES}, retryBaseMs: 30, retryMaxMs: 200 }
http: { listen: 127.0.0.1:0 }
# info: the test helper finds the health address in the "scan-gateway started" log line
log: { level: info }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042, duplicateWindowMs: 0 }
  - { key: GI-99, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042, duplicateWindowMs: 0 }
inputs:
  - { id: inbox, type: files, dir: ${join(dir, 'inbox')}, format: csv, barcodeColumn: barcode, timeColumn: read_at, dcp: GI-01, dcpColumn: dcp, stableMs: 30 }
`,
  );
  return file;
}

/** Drops a CSV of 20 reads (one SFTP batch with sftpMaxScans 20); `refused` rows carry the DCP the service does not know. */
function dropFile(dir: string, name: string, refused: number): void {
  const rows = Array.from(
    { length: 20 },
    (_, i) =>
      `${name}-${i},2026-11-24T07:00:${String(i).padStart(2, '0')}+01:00,${i < refused ? 'GI-99' : 'GI-01'}`,
  );
  writeFileSync(
    join(dir, 'inbox', `${name}.csv.tmp`),
    `${['barcode,read_at,dcp', ...rows].join('\n')}\n`,
  );
  renameSync(join(dir, 'inbox', `${name}.csv.tmp`), join(dir, 'inbox', `${name}.csv`));
}

async function status(g: GatewayProcess): Promise<Status> {
  return (await (await fetch(`${g.httpUrl}/api/v1/status`)).json()) as Status;
}

describe('status events for SFTP batches end to end: gateway process in mode sftp, sandbox SFTP and Kafka endpoints', () => {
  it('moves each SFTP batch from transferred to the service terminal state by its event (Success; HasFailures with the refused scan), without a status request; duplicated events change nothing', async () => {
    const sandbox = await startSandbox({
      host: '127.0.0.1',
      port: 0,
      processingDelayMs: PROCESSING_MS,
      sftp: {},
    });
    cleanups.push(() => sandbox.close());
    sandbox.setFaults({ kafkaDuplicateRate: 1 });
    const dir = mkdtempSync(join(tmpdir(), 'sg-sftp-events-'));
    const g = await startGateway(
      writeConfig(dir, sandbox),
      { SCAN_GATEWAY_CLIENT_SECRET: SECRET, SCAN_GATEWAY_SFTP_PASSWORD: SECRET },
      dir,
    );
    cleanups.push(() =>
      g.child.exitCode === null && g.child.signalCode === null ? g.kill() : undefined,
    );
    await waitFor(async () => (await status(g)).statusEvents?.state === 'flowing', {
      what: 'events flowing',
      timeoutMs: 30_000,
    });

    // Each batch is seen `transferred` first (its file is on the server; the service has not
    // finished it for PROCESSING_MS), then in the state its event brings.
    const transferredSeen = new Set<number>();
    const watch = async (wanted: number): Promise<BatchView[] | undefined> => {
      const s = await status(g);
      for (const b of s.batches)
        if (b.state === 'done' && b.upstreamState === 'transferred') transferredSeen.add(b.id);
      return s.batches.length === wanted &&
        s.batches.every((b) => b.state === 'done' && b.upstreamState !== 'transferred')
        ? s.batches
        : undefined;
    };
    dropFile(dir, 'good', 0);
    const [good] = await waitFor(() => watch(1), {
      what: 'the first batch finished by its event',
      timeoutMs: 30_000,
      intervalMs: 50,
    });
    dropFile(dir, 'mixed', 1);
    const batches = await waitFor(() => watch(2), {
      what: 'the second batch finished by its event',
      timeoutMs: 30_000,
      intervalMs: 50,
    });
    const mixed = batches.find((b) => b.id !== good!.id)!;

    expect(transferredSeen).toEqual(new Set([good!.id, mixed.id]));
    expect(good).toMatchObject({ upstreamState: 'Success', processed: 20 });
    expect(mixed).toMatchObject({ upstreamState: 'HasFailures', processed: 20, failed: 1 });
    // The service's request ids are kept on the batches, for the record.
    const files = sandbox.sftp!.files();
    expect(files).toHaveLength(2);
    expect(new Set(batches.map((b) => b.requestId))).toEqual(
      new Set(files.map((f) => f.requestId)),
    );
    const reported = g
      .output()
      .split('\n')
      .filter((l) => l.includes('the service reported on a transferred batch'));
    expect(reported).toHaveLength(2);

    // No status request, ever: the outcome came by event only.
    const requests = (
      (await (await fetch(`${sandbox.url}/_sandbox/requests`)).json()) as {
        requests: { method: string; path: string }[];
      }
    ).requests;
    expect(requests.filter((r) => r.method === 'GET' && r.path.includes('/status'))).toEqual([]);

    // Received, InProgress and the terminal state of each batch, each published twice: two applied,
    // the others changed nothing (none counted ignored: each named a file of ours).
    const events = await waitFor(async () => {
      const e = (await status(g)).statusEvents!;
      return e.received >= 12 && e.received === e.applied + e.duplicates + e.ignored + e.invalid
        ? e
        : undefined;
    });
    expect(events).toMatchObject({ applied: 2, ignored: 0, invalid: 0 });
    expect(events.duplicates).toBe(events.received - 2);
    expect((await status(g)).batches).toEqual(batches);
  });
});
