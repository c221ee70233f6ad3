import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import mqtt from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { startMosquitto, type Broker } from '../helpers/mosquitto.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Why a shared subscription is not failover (docs/high-availability.md, "A shared
 * subscription is not failover"): two compiled gateways share `$share/gw/line1/scans` on mosquitto,
 * each with its own persistent session; 6,000 QoS 1 reads are published at 500/s and one member is
 * SIGKILLed halfway. The broker goes on giving that member its share: what it gives it while it is
 * down waits in its session, not taken by the live member, until the member returns. The test
 * asserts the phenomenon (reads stuck while the member is down, all of them there once it is back,
 * none twice) and prints the figures the runbook quotes.
 */

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const ENV = { SCAN_GATEWAY_CLIENT_SECRET: SECRET };
const READS = 6000;
const PER_SECOND = 500;
const KILL_AT = READS / 2;
/** How long the stuck count must stay unchanged to count as stuck (the live member had every chance). */
const STUCK_FOR_MS = 3000;

function writeConfig(dir: string, sandboxUrl: string, brokerUrl: string, member: string): string {
  const file = join(dir, 'config.yaml');
  writeFileSync(
    file,
    `site: { id: share-${member}, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandboxUrl}, authUrl: ${sandboxUrl}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 200, statusPollMs: 200, statusPollMaxMs: 1000 }
http: { listen: 127.0.0.1:0 }
# info: startGateway finds the health address in the "scan-gateway started" log line
log: { level: info }
dcps:
  - { key: L1, kind: startOfProcess, productModelKey: PACK-A, duplicateWindowMs: 0 }
inputs:
  - { id: line1, type: mqtt, url: ${brokerUrl}, topics: ['$share/gw/line1/scans'], clientId: sg-share-${member}, dcp: L1, reconnectMs: 200 }
`,
  );
  return file;
}

/** The payloads a member stored (its buffer's reads), read-only beside the running or dead gateway. */
function storedReads(dir: string): string[] {
  const file = join(dir, 'buffer.db');
  if (!existsSync(file)) return [];
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 2000');
    return (db.prepare(`SELECT raw FROM reads`).pluck().all() as Buffer[]).map((b) => b.toString());
  } finally {
    db.close();
  }
}

async function inputUp(gateway: GatewayProcess): Promise<boolean> {
  const status = (await (await fetch(`${gateway.httpUrl}/healthz`)).json()) as {
    inputs: { state: string }[];
  };
  return status.inputs[0]?.state === 'up';
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('a shared subscription on mosquitto does not fail over', () => {
  let sandbox: RunningSandbox;
  let broker: Broker;
  const gateways: (GatewayProcess | undefined)[] = [];

  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 100, kafka: false });
    // Saved every 30 s, not after each message: 6,000 queued messages would rewrite the file 6,000 times.
    broker = await startMosquitto(mkdtempSync(join(tmpdir(), 'sg-share-broker-')), {
      autosaveSeconds: 30,
    });
  });
  afterAll(async () => {
    for (const g of gateways) await g?.kill();
    await broker?.stop();
    await sandbox?.close();
  });

  it(
    "keeps the dead member's share queued in its session until it returns",
    { timeout: 180_000 },
    async () => {
      const dirs = ['a', 'b'].map((m) => mkdtempSync(join(tmpdir(), `sg-share-${m}-`)));
      const configs = ['a', 'b'].map((m, i) => writeConfig(dirs[i]!, sandbox.url, broker.url, m));
      for (const config of configs)
        gateways.push(await startGateway(config, ENV, dirs[gateways.length]!));
      await waitFor(async () => (await inputUp(gateways[0]!)) && (await inputUp(gateways[1]!)), {
        timeoutMs: 30_000,
        what: 'both members subscribed',
      });

      const pub = await mqtt.connectAsync(broker.url, {
        clientId: 'sg-share-publisher',
        protocolVersion: 5,
      });
      const codes = Array.from({ length: READS }, (_, i) => `CELL-${String(i).padStart(5, '0')}`);
      const started = performance.now();
      let killedAt = 0;
      // 500 reads a second in ticks of 50 every 100 ms, each acknowledged by the broker (QoS 1).
      for (let i = 0; i < READS; i += PER_SECOND / 10) {
        const tick = Promise.all(
          codes
            .slice(i, i + PER_SECOND / 10)
            .map((c) => pub.publishAsync('line1/scans', c, { qos: 1 })),
        );
        if (i === KILL_AT) {
          // At a random moment of a tick, as a crash comes: some of B's share may be on its way to it.
          await sleep(Math.random() * 100);
          await gateways[1]!.kill();
          gateways[1] = undefined;
          killedAt = performance.now();
        }
        await tick;
        const due = started + ((i + PER_SECOND / 10) / PER_SECOND) * 1000;
        await sleep(Math.max(0, due - performance.now()));
      }
      await pub.endAsync();

      // The live member takes what the broker gives it; then nothing more comes while B is down.
      const taken = () => storedReads(dirs[0]!).length + storedReads(dirs[1]!).length;
      let last = -1;
      await waitFor(
        () => {
          const now = taken();
          const settled = now === last;
          last = now;
          return settled;
        },
        {
          timeoutMs: 60_000,
          intervalMs: STUCK_FOR_MS,
          what: `no more reads stored for ${STUCK_FOR_MS} ms`,
        },
      );
      const byA = storedReads(dirs[0]!).length;
      const byBBeforeKill = storedReads(dirs[1]!).length;
      const stuck = READS - byA - byBBeforeKill;
      const downForS = (performance.now() - killedAt) / 1000;

      // B returns on its own buffer and session: the broker hands it what it kept.
      gateways[1] = await startGateway(configs[1]!, ENV, dirs[1]!);
      await waitFor(() => taken() >= READS, {
        timeoutMs: 60_000,
        intervalMs: 200,
        what: `all ${READS} reads stored`,
      });
      await sleep(1000); // a late resend, were there one
      const all = [...storedReads(dirs[0]!), ...storedReads(dirs[1]!)];
      const afterReturn = storedReads(dirs[1]!).length - byBBeforeKill;
      console.log(
        `shared subscription ($share/gw, mosquitto): ${READS} QoS 1 reads at ${PER_SECOND}/s, member B SIGKILLed while reads ${KILL_AT}–${KILL_AT + PER_SECOND / 10 - 1} were sent: ` +
          `${stuck} of ${READS} stayed queued in B's session while it was down (${downForS.toFixed(0)} s; A stored ${byA} in all, B ${byBBeforeKill} before the kill); ` +
          `B stored ${afterReturn} after it returned`,
      );

      // The phenomenon: reads stuck while the member was down, not handed to the live member …
      expect(stuck).toBeGreaterThan(0);
      // … all of them there once it returned, none twice.
      expect(afterReturn).toBe(stuck);
      expect(all).toHaveLength(READS);
      expect(new Set(all).size).toBe(READS);
      expect(all.slice().sort()).toEqual(codes);
    },
  );
});
