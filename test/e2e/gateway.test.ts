import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { createPtyPair } from '../helpers/pty.js';
import { waitFor } from '../helpers/wait.js';

const SAMPLES = join(PACKAGE_ROOT, 'samples');
const GS = '\u001d';
const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

interface SandboxScan {
  requestId: string;
  scan: {
    reference: string;
    timeStamp: string;
    dcpKey: string;
    productModelKey: string;
    supplierKey?: string;
    clientKey?: string;
    parents: string[];
    attributes: unknown[];
  };
}

async function sandboxScans(sandbox: RunningSandbox): Promise<SandboxScan[]> {
  const res = await fetch(`${sandbox.url}/_sandbox/scans`);
  return ((await res.json()) as { scans: SandboxScan[] }).scans;
}

function writeConfig(dir: string, sandboxUrl: string, serialPath?: string): string {
  const file = join(dir, 'config.yaml');
  writeFileSync(
    file,
    `site: { id: e2e, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandboxUrl}, authUrl: ${sandboxUrl}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchScans: 5000, maxBatchDelayMs: 200, statusPollMs: 200, statusPollMaxMs: 500, retryBaseMs: 100, retryMaxMs: 500 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
inputs:
  - { id: inbox, type: files, dir: ${join(dir, 'inbox')}, format: csv, barcodeColumn: barcode, timeColumn: read_at, dcp: GI-01, stableMs: 200 }
${serialPath ? `  - { id: gi-scanner, type: serial, path: ${serialPath}, baudRate: 9600, dcp: GI-01 }` : ''}
`,
  );
  return file;
}

function batchesOf(
  dbFile: string,
): { state: string; upstream_state: string | null; scan_count: number }[] {
  const db = new Database(dbFile, { readonly: true });
  try {
    return db.prepare('SELECT state, upstream_state, scan_count FROM batches').all() as {
      state: string;
      upstream_state: string | null;
      scan_count: number;
    }[];
  } finally {
    db.close();
  }
}

describe('end to end: file drop and serial scanner → SQLite → upload → status', () => {
  let sandbox: RunningSandbox;
  let gateway: GatewayProcess | undefined;

  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 300 });
  });
  afterEach(async () => {
    await gateway?.stop();
    gateway = undefined;
    await fetch(`${sandbox.url}/_sandbox/scans`, { method: 'DELETE' });
    sandbox.setFaults({ errorRate: 0 });
  });
  afterAll(async () => {
    await sandbox.close();
  });

  it('delivers exactly the expected scans from the sample CSV and the serial capture', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-e2e-'));
    const pty = await createPtyPair(dir);
    try {
      gateway = await startGateway(
        writeConfig(dir, sandbox.url, pty.devicePath),
        { SCAN_GATEWAY_CLIENT_SECRET: SECRET },
        dir,
      );
      const serialStart = Date.now();
      copyFileSync(join(SAMPLES, 'goods-in-export.csv'), join(dir, 'inbox', 'goods-in-export.csv'));
      await pty.write(readFileSync(join(SAMPLES, 'serial-capture-line3.bin')));
      const serialEnd = Date.now();

      await waitFor(async () => (await sandboxScans(sandbox)).length >= 10, { timeoutMs: 30_000 });
      await waitFor(() => batchesOf(join(dir, 'buffer.db')).every((b) => b.state === 'done'), {
        timeoutMs: 30_000,
      });
      const received = await sandboxScans(sandbox);

      const common = {
        dcpKey: 'GI-01',
        productModelKey: 'PACK-A',
        supplierKey: 'SUP-0042',
        parents: [],
        attributes: [],
      };
      const fromCsv = received
        .filter((s) => s.scan.timeStamp.startsWith('2026-11-18'))
        .map((s) => s.scan);
      expect(fromCsv).toEqual([
        {
          reference: ']C100095212345678901235400PO-4711',
          timeStamp: '2026-11-18T06:58:12',
          ...common,
        },
        {
          reference: `]d2010952123454321310B2611-03${GS}21C2611030001234`,
          timeStamp: '2026-11-18T06:58:40',
          ...common,
        },
        {
          reference: `]d2010952123454321310B2611-03${GS}21C2611030001235`,
          timeStamp: '2026-11-18T06:58:41',
          ...common,
        },
        { reference: ']d1C24A0K3B0712345', timeStamp: '2026-11-18T06:59:03', ...common },
      ]);

      const fromSerial = received
        .filter((s) => !s.scan.timeStamp.startsWith('2026-11-18'))
        .map((s) => s.scan);
      expect(fromSerial.map((s) => s.reference)).toEqual([
        `]d2010952123454321310B2611-03${GS}21C2611030001234`,
        `]d2010952123454321310B2611-03${GS}21C2611030001235`,
        `]d2010952123454321310B2611-03${GS}21C2611030001236`,
        ']C100095212345678901235400PO-4711',
        `]d2010952123454321310B2611-03${GS}21C2611030001237`,
        ']d1C24A0K3B0712345',
      ]);
      const berlin = (ms: number) =>
        new Intl.DateTimeFormat('sv-SE', {
          timeZone: 'Europe/Berlin',
          dateStyle: 'short',
          timeStyle: 'medium',
        })
          .format(ms)
          .replace(' ', 'T');
      for (const s of fromSerial) {
        expect(s).toMatchObject(common);
        expect(
          s.timeStamp >= berlin(serialStart - 1000) && s.timeStamp <= berlin(serialEnd + 5000),
        ).toBe(true);
      }
      // No-read strings, the line noise and the GS1 codes with a wrong check digit were not sent.
      const refs = received.map((s) => s.scan.reference);
      for (const notSent of ['NOREAD', 'ERROR']) expect(refs).not.toContain(notSent);
      expect(refs.some((r) => r.includes('4321410LOT') || r.includes('43214' + GS))).toBe(false);

      const batches = batchesOf(join(dir, 'buffer.db'));
      expect(batches.length).toBeGreaterThan(0);
      for (const b of batches) expect(b.upstream_state).toBe('Success');
      const processedDir = join(dir, 'inbox', 'processed');
      const dated = readdirSync(processedDir);
      expect(dated).toHaveLength(1);
      expect(readdirSync(join(processedDir, dated[0]!))).toEqual(['goods-in-export.csv']);
      expect(existsSync(join(dir, 'inbox', 'goods-in-export.csv'))).toBe(false);

      const health = (await (await fetch(`${gateway.httpUrl}/healthz`)).json()) as Record<
        string,
        unknown
      >;
      expect(health).toMatchObject({ pendingScans: 0, deliveredScans: 10 });
      expect(typeof health.lastSuccessfulUploadAt).toBe('string');
      expect(health.inputs).toEqual([
        { id: 'inbox', type: 'files', state: 'up' },
        { id: 'gi-scanner', type: 'serial', state: 'up' },
      ]);
      const status = (await (await fetch(`${gateway.httpUrl}/api/v1/status`)).json()) as {
        inputs: { id: string; counters: Record<string, number> }[];
      };
      const serial = status.inputs.find((i) => i.id === 'gi-scanner')!;
      expect(serial.counters).toMatchObject({
        reads: 11,
        scans: 6,
        noReads: 2,
        duplicates: 1,
        rejections: 2,
      });
    } finally {
      await pty.kill();
    }
  });

  it('loses nothing when killed with SIGKILL after files were acknowledged but before upload', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-e2e-kill-'));
    const config = writeConfig(dir, sandbox.url);
    sandbox.setFaults({ errorRate: 1 });
    gateway = await startGateway(config, { SCAN_GATEWAY_CLIENT_SECRET: SECRET }, dir);
    const lines = ['barcode,read_at'];
    for (let i = 0; i < 200; i++)
      lines.push(
        `CELL-${String(i).padStart(5, '0')},2026-11-18T07:00:${String(i % 60).padStart(2, '0')}+01:00`,
      );
    writeFileSync(join(dir, 'inbox', 'cells.csv'), `${lines.join('\n')}\n`);
    await waitFor(
      () =>
        existsSync(join(dir, 'inbox', 'processed')) &&
        readdirSync(join(dir, 'inbox', 'processed')).length > 0,
      { timeoutMs: 30_000 },
    );
    await gateway.kill();
    gateway = undefined;
    expect(await sandboxScans(sandbox)).toHaveLength(0);

    sandbox.setFaults({ errorRate: 0 });
    gateway = await startGateway(config, { SCAN_GATEWAY_CLIENT_SECRET: SECRET }, dir);
    await waitFor(async () => (await sandboxScans(sandbox)).length >= 200, { timeoutMs: 30_000 });
    const refs = (await sandboxScans(sandbox)).map((s) => s.scan.reference).sort();
    expect(new Set(refs).size).toBe(200);
    expect(refs[0]).toBe('CELL-00000');
    expect(refs[199]).toBe('CELL-00199');
  });
});
