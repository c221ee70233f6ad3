import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/load.js';
import type { DeliveryApi } from '../../src/delivery/types.js';
import { createLogger, silentLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox } from '@scan-gateway/sandbox';
import { waitFor } from '../helpers/wait.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

describe('stop with an upload that never answers', () => {
  it('abandons it after the grace period, closes the buffer, and the next start sends it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-abandon-'));
    mkdirSync(join(dir, 'inbox'));
    const sandbox = await startSandbox({ port: 0, processingDelayMs: 50 });
    const file = join(dir, 'config.yaml');
    writeFileSync(
      file,
      `site: { id: abandon, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 50, statusPollMs: 100, statusPollMaxMs: 300 }
http: { listen: 127.0.0.1:0 }
dcps: [{ key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }]
inputs: [{ id: inbox, type: files, dir: ${join(dir, 'inbox')}, format: lines, dcp: GI-01, stableMs: 50 }]
`,
    );
    const loaded = loadConfig(file, { baseDir: dir, env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET } });
    let logged = '';
    const logger = createLogger({
      format: 'json',
      destination: new Writable({
        write(c: Buffer, _e, done) {
          logged += c.toString();
          done();
        },
      }),
    });
    // An upstream whose POST hangs: the connection is open, no answer ever comes.
    const hanging: DeliveryApi = {
      uploadScans: () => new Promise(() => {}),
      requestPresignedUpload: () => Promise.reject(new Error('not used')),
      putPresigned: () => Promise.reject(new Error('not used')),
      getScanStatus: () => Promise.reject(new Error('not used')),
    };
    const first = buildApp(loaded, { logger, api: hanging, deliveryStopGraceMs: 300 });
    await first.start();
    writeFileSync(join(dir, 'inbox', 'a.txt'), 'CELL-1\nCELL-2\nCELL-3\n');
    await waitFor(() => first.status().batches[0]?.state === 'uploading', { timeoutMs: 30_000 });
    await first.stop(); // resolves: the upload is abandoned, every other part stops
    expect(logged).toContain(
      'an upload was still in flight at the stop; abandoned, recovered at the next start',
    );
    const db = new Database(join(dir, 'buffer.db'), { readonly: true });
    expect(db.prepare('SELECT state FROM batches').pluck().all()).toEqual(['uploading']);
    db.close();

    const second = buildApp(loaded, { logger: silentLogger() });
    try {
      await second.start();
      await waitFor(() => second.status().buffer.scans.delivered === 3, { timeoutMs: 30_000 });
      const refs = (
        (await (await fetch(`${sandbox.url}/_sandbox/scans`)).json()) as {
          scans: { scan: { reference: string } }[];
        }
      ).scans.map((s) => s.scan.reference);
      expect(refs.sort()).toEqual(['CELL-1', 'CELL-2', 'CELL-3']);
      // The abandoned POST may have reached the service: the batch is flagged as a possible duplicate.
      expect(second.status().batches[0]).toMatchObject({ state: 'done', upstreamState: 'Success' });
      expect(second.status().batches[0]!.possibleDuplicate).toBeGreaterThanOrEqual(1);
    } finally {
      await second.stop();
      await sandbox.close();
    }
  });
});
