import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import type { AppApi } from '../../src/app/gateway.js';
import { parseConfigText } from '../../src/config/load.js';
import { EtcdClient } from '../../src/ha/etcd-client.js';
import { INGEST_PATH } from '../../src/inputs/http/ingest-routes.js';
import { silentLogger } from '../../src/log.js';
import { startEtcdCluster, type EtcdCluster } from '../helpers/etcd.js';
import { waitFor } from '../helpers/wait.js';

const TOKEN = 'ingest-test-token-1234567890';
const AUTH = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const KEY = '/sg-test/line/leader';

/** An upstream that takes every batch (the test is about intake, not delivery). */
const api: AppApi = {
  postScans: async (_scans: unknown, requestId: string) => ({ requestId }),
  getPresignedUrl: async () => ({
    url: 'http://127.0.0.1:9/x',
    requestId: 'r',
    expiresAt: new Date(Date.now() + 60_000).toISOString(),
  }),
  putPresigned: async () => undefined,
  getScanStatus: async (requestId: string) => ({ state: 'Success', requestId }),
} as unknown as AppApi;

/**
 * The app under `ha` against a real etcd (three members on loopback): as standby its inputs do
 * not run and HTTP ingest answers 503; once the other node's lease is revoked it takes over,
 * ingest answers 202 and the read is stored with the epoch; a clean stop revokes its lease.
 */
describe('the gateway under ha, against a real etcd', () => {
  let etcd: EtcdCluster;
  let etcdDir: string;
  beforeAll(async () => {
    etcdDir = mkdtempSync(join(tmpdir(), 'sg-ha-etcd-'));
    etcd = await startEtcdCluster(etcdDir);
  }, 120_000);
  // The members' data (preallocated logs) is about 370 MB.
  afterAll(async () => {
    await etcd?.stop();
    rmSync(etcdDir, { recursive: true, force: true });
  });

  it(
    'stands by while another node holds the key, takes over when its lease goes, and hands over at stop',
    { timeout: 60_000 },
    async () => {
      const endpoints = etcd.members.map((m) => m.clientUrl);
      // The other node: holds the key with its own lease.
      const other = new EtcdClient({ endpoints, requestTimeoutMs: 1000 });
      await other.open();
      const lease = await other.grant(5000);
      const held = await other.campaign(KEY, 'node-B', lease);
      expect(held.won).toBe(true);

      const dir = mkdtempSync(join(tmpdir(), 'sg-ha-app-'));
      const file = join(dir, 'config.yaml');
      const yaml = `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${join(dir, 'buffer.db')} }
http: { listen: 127.0.0.1:0 }
ha: { nodeId: node-A, key: ${KEY}, etcd: { endpoints: [${endpoints.join(', ')}] } }
dcps:
  - { key: MES-1, kind: startOfProcess, productModelKey: PACK-A, duplicateWindowMs: 0 }
inputs:
  - { id: mes, type: http, dcp: MES-1 }
`;
      const app: App = buildApp(
        { file, config: parseConfigText(yaml, file), clientSecret: 'x' },
        { logger: silentLogger(), api, env: { SCAN_GATEWAY_INGEST_TOKEN: TOKEN } },
      );
      await app.start();
      try {
        const url = app.httpUrl!;
        await waitFor(
          () =>
            app.status()['ha'] && (app.status()['ha'] as { leader?: string }).leader === 'node-B',
          { what: 'standby for node-B' },
        );
        expect(app.status()).toMatchObject({
          inputs: [],
          ha: { role: 'follower', leader: 'node-B', epoch: (held as { epoch: number }).epoch },
        });
        const refused = await fetch(`${url}${INGEST_PATH}`, {
          method: 'POST',
          headers: AUTH,
          body: '{"code":"CELL-1"}',
        });
        expect(refused.status).toBe(503);
        expect((await fetch(`${url}/api/v1/ha/leader`)).status).toBe(503);

        // The other node stops cleanly: its lease is revoked, the key goes, node A takes over.
        await other.revoke(lease);
        await waitFor(async () => (await fetch(`${url}/api/v1/ha/leader`)).status === 200, {
          timeoutMs: 30_000,
          intervalMs: 50,
          what: 'node A leads',
        });
        const epoch = (app.status()['ha'] as { epoch: number }).epoch;
        expect(epoch).toBeGreaterThan((held as { epoch: number }).epoch);
        await waitFor(() => app.status().inputs.some((i) => i.id === 'mes' && i.state === 'up'), {
          what: 'ingest input up',
        });
        const ok = await fetch(`${url}${INGEST_PATH}`, {
          method: 'POST',
          headers: AUTH,
          body: '{"code":"CELL-1"}',
        });
        expect(ok.status).toBe(202);
        const db = new Database(join(dir, 'buffer.db'), { readonly: true });
        try {
          expect(db.prepare('SELECT raw, leader_epoch AS epoch FROM reads').all()).toEqual([
            { raw: Buffer.from('CELL-1'), epoch },
          ]);
        } finally {
          db.close();
        }
        const healthz = (await (await fetch(`${url}/healthz`)).json()) as { ha: unknown };
        expect(healthz.ha).toMatchObject({
          nodeId: 'node-A',
          role: 'leader',
          leaderNode: 'node-A',
          epoch,
          etcdReachable: true,
        });
        const metrics = await (await fetch(`${url}/metrics`)).text();
        expect(metrics).toContain(`scan_gateway_ha_leader{node="node-A",key="${KEY}"} 1`);
        expect(metrics).toContain(`scan_gateway_ha_epoch{node="node-A",key="${KEY}"} ${epoch}`);
      } finally {
        await app.stop();
      }
      // A clean stop hands over at once: the key is gone, not waiting for the lease to lapse.
      expect(await other.get(KEY)).toBeUndefined();
      await other.close();
    },
  );
});
