import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  writeFileSync,
  renameSync,
  existsSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { waitFor } from '../helpers/wait.js';
import { startNotifyReceiver, type NotifyReceiver } from '../helpers/systemd-notify-receiver.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const FILES = 20;
const ROWS = 2000;

function writeConfig(dir: string, sandboxUrl: string): string {
  const file = join(dir, 'config.yaml');
  writeFileSync(
    file,
    `site: { id: shutdown, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandboxUrl}, authUrl: ${sandboxUrl}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchScans: 3000, maxBatchDelayMs: 50, statusPollMs: 100, statusPollMaxMs: 300, retryBaseMs: 100, retryMaxMs: 500 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
inputs:
  - { id: inbox, type: files, dir: ${join(dir, 'inbox')}, format: lines, dcp: GI-01, stableMs: 50 }
`,
  );
  return file;
}

/** Every barcode of file `f`. */
const rowsOf = (f: number) =>
  Array.from(
    { length: ROWS },
    (_, r) => `SHUT-${String(f).padStart(2, '0')}-${String(r).padStart(5, '0')}`,
  );

/** Files moved to processed/ (acknowledged), by name. */
function processedFiles(inbox: string): string[] {
  const root = join(inbox, 'processed');
  if (!existsSync(root)) return [];
  return readdirSync(root).flatMap((day) => readdirSync(join(root, day)));
}

/** How often each raw read is in the buffer. */
function readsInBuffer(dbFile: string): Map<string, number> {
  const db = new Database(dbFile, { readonly: true });
  try {
    const counts = new Map<string, number>();
    for (const raw of db.prepare('SELECT raw FROM reads').pluck().all() as Buffer[]) {
      const text = raw.toString();
      counts.set(text, (counts.get(text) ?? 0) + 1);
    }
    return counts;
  } finally {
    db.close();
  }
}

async function sandboxRefs(sandbox: RunningSandbox): Promise<Set<string>> {
  const body = (await (await fetch(`${sandbox.url}/_sandbox/scans`)).json()) as {
    scans: { scan: { reference: string } }[];
  };
  return new Set(body.scans.map((s) => s.scan.reference));
}

describe('graceful shutdown on SIGTERM during heavy intake', () => {
  let sandbox: RunningSandbox;
  let gateway: GatewayProcess | undefined;
  let receiver: NotifyReceiver | undefined;

  beforeAll(async () => {
    // Slow answers, so an upload is likely in flight when the stop comes.
    sandbox = await startSandbox({ port: 0, processingDelayMs: 200, faults: { latencyMs: 300 } });
  });
  afterEach(async () => {
    await gateway?.kill();
    gateway = undefined;
    await receiver?.close();
  });
  afterAll(async () => {
    await sandbox.close();
  });

  it('commits what it took, tells systemd, exits 0, and loses nothing acknowledged', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-shutdown-'));
    const inbox = join(dir, 'inbox');
    mkdirSync(inbox);
    const config = writeConfig(dir, sandbox.url);
    receiver = await startNotifyReceiver(dir);
    gateway = await startGateway(
      config,
      {
        SCAN_GATEWAY_CLIENT_SECRET: SECRET,
        NOTIFY_SOCKET: receiver.socket,
        WATCHDOG_USEC: '1000000',
      },
      dir,
    );
    await waitFor(() => receiver!.messages().some((m) => m.startsWith('READY=1')), {
      timeoutMs: 30_000,
    });

    // Heavy intake: 40,000 reads in 20 files, each dropped atomically (written under a temporary name).
    for (let f = 0; f < FILES; f++) {
      writeFileSync(join(inbox, `f${f}.tmp`), `${rowsOf(f).join('\n')}\n`);
      renameSync(join(inbox, `f${f}.tmp`), join(inbox, `f${f}.txt`));
    }
    await waitFor(() => processedFiles(inbox).length >= 3, { timeoutMs: 30_000 });
    await waitFor(() => receiver!.messages().some((m) => m.startsWith('WATCHDOG=1')), {
      timeoutMs: 30_000,
    });
    const mainPid = gateway.child.pid;
    const code = await gateway.stop(); // SIGTERM while files are still being read and batches uploaded
    const output = gateway.output();
    if (process.env.SG_DEBUG_SHUTDOWN)
      console.log(
        output
          .split('\n')
          .filter((l) => /stopp|abandon|in flight|uploaded|file stored/.test(l))
          .slice(-12)
          .join('\n'),
      );
    gateway = undefined;
    expect(code, output).toBe(0);
    expect(output).toContain('"msg":"stopped"');
    const messages = receiver.messages().filter((m) => m !== 'BARRIER=1');
    expect(messages[0]).toMatch(/^READY=1\|STATUS=ok, inputs 1\/1 up/);
    expect(messages[messages.length - 1]).toBe('STOPPING=1|STATUS=stopping on SIGTERM');
    // Every notification came from the gateway's own process, as NotifyAccess=main requires.
    expect(new Set(receiver.entries().map((e) => e.pid))).toEqual(new Set([mainPid]));

    // Every file that was acknowledged (moved to processed/) has every one of its rows in the buffer.
    const acknowledged = processedFiles(inbox);
    expect(acknowledged.length).toBeGreaterThanOrEqual(3);
    expect(acknowledged.length, 'the stop came during intake, not after it').toBeLessThan(FILES);
    const afterStop = readsInBuffer(join(dir, 'buffer.db'));
    for (const name of acknowledged) {
      const f = Number(/^f(\d+)\.txt$/.exec(name)![1]);
      const missing = rowsOf(f).filter((r) => !afterStop.has(r));
      expect(missing, `${name} was acknowledged`).toEqual([]);
    }

    // After a restart the rest is read and everything is delivered, once per reference.
    gateway = await startGateway(config, { SCAN_GATEWAY_CLIENT_SECRET: SECRET }, dir);
    await waitFor(() => processedFiles(inbox).length === FILES, { timeoutMs: 60_000 });
    await waitFor(async () => (await sandboxRefs(sandbox)).size === FILES * ROWS, {
      timeoutMs: 60_000,
      intervalMs: 500,
    });
    expect(await gateway.stop()).toBe(0);
    gateway = undefined;
    const all = readsInBuffer(join(dir, 'buffer.db'));
    for (let f = 0; f < FILES; f++) expect(rowsOf(f).filter((r) => !all.has(r))).toEqual([]);
    const delivered = await sandboxRefs(sandbox);
    for (let f = 0; f < FILES; f++) expect(rowsOf(f).filter((r) => !delivered.has(r))).toEqual([]);
  });
});
