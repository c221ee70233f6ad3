import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { startMosquitto, type Broker } from '../helpers/mosquitto.js';
import { waitFor } from '../helpers/wait.js';
import { sandboxRefs } from '../helpers/sandbox-scans.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

async function publish(url: string, from: number, to: number): Promise<void> {
  const client = await mqtt.connectAsync(url, { clientId: `e2e-publisher-${from}`, clean: true });
  for (let i = from; i < to; i++)
    await client.publishAsync('plant/GI-01/scans', `CELL-${String(i).padStart(5, '0')}`, {
      qos: 1,
    });
  await client.endAsync();
}

describe('end to end over MQTT: the whole daemon stopped while readers publish', () => {
  let sandbox: RunningSandbox;
  let broker: Broker;
  let gateway: GatewayProcess | undefined;

  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 100 });
    broker = await startMosquitto(mkdtempSync(join(tmpdir(), 'sg-e2e-broker-')));
  });
  afterAll(async () => {
    await gateway?.stop();
    await broker?.stop();
    await sandbox?.close();
  });

  it('receives every message once: the broker keeps them for the persistent session while the gateway is down', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-e2e-mqtt-'));
    const config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      `site: { id: e2e, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 100, statusPollMs: 100, statusPollMaxMs: 300 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
inputs:
  - { id: readers, type: mqtt, url: ${broker.url}, topics: [plant/+/scans], clientId: sg-e2e-gateway, dcp: GI-01, dcpFromTopic: 'plant/{dcp}/scans' }
`,
    );
    const env = { SCAN_GATEWAY_CLIENT_SECRET: SECRET };
    gateway = await startGateway(config, env, dir);
    await waitFor(
      async () => {
        const status = (await (await fetch(`${gateway!.httpUrl}/healthz`)).json()) as {
          inputs: { state: string }[];
        };
        return status.inputs[0]?.state === 'up';
      },
      { timeoutMs: 30_000 },
    );
    await publish(broker.url, 0, 300);
    await waitFor(async () => (await sandboxRefs(sandbox)).length >= 300, { timeoutMs: 30_000 });

    expect(await gateway.stop()).toBe(0);
    gateway = undefined;
    await publish(broker.url, 300, 600); // nobody is subscribed now: the broker queues them for the session

    gateway = await startGateway(config, env, dir);
    await waitFor(async () => (await sandboxRefs(sandbox)).length >= 600, { timeoutMs: 30_000 });
    // Give a redelivery, if there were one, the time to show up before counting.
    await new Promise((r) => setTimeout(r, 1000));
    const refs = await sandboxRefs(sandbox);
    expect(refs).toHaveLength(600);
    expect(new Set(refs).size).toBe(600);
  });

  it('receives every message once when the broker is restarted cleanly twice while readers publish', async () => {
    // A PUBACK the gateway writes while mosquitto shuts down never reaches it; after the restart
    // the broker sends those messages again. Before the gateway kept recognising them for a while
    // after the PUBACK, each restart stored a few messages twice.
    await gateway?.stop();
    gateway = undefined;
    const dir = mkdtempSync(join(tmpdir(), 'sg-e2e-mqtt-restart-'));
    const config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      `site: { id: e2e, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 100, statusPollMs: 100, statusPollMaxMs: 300 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042, duplicateWindowMs: 0 }
inputs:
  - { id: readers, type: mqtt, url: ${broker.url}, topics: [line/+/reads], clientId: sg-e2e-restarts, dcp: GI-01 }
`,
    );
    gateway = await startGateway(config, { SCAN_GATEWAY_CLIENT_SECRET: SECRET }, dir);
    await waitFor(
      async () =>
        (
          (await (await fetch(`${gateway!.httpUrl}/healthz`)).json()) as {
            inputs: { state: string }[];
          }
        ).inputs[0]?.state === 'up',
      {
        timeoutMs: 30_000,
      },
    );
    const total = 1500;
    const publisher = await mqtt.connectAsync(broker.url, {
      clientId: 'e2e-restart-publisher',
      clean: false,
      reconnectPeriod: 200,
    });
    const acks: Promise<unknown>[] = [];
    const acked = new Set<number>();
    let published = 0;
    // The publisher's own leg is at-least-once too: a message whose PUBACK it had not received when
    // the broker went down is published again, as a new message. Those may arrive twice; no other may.
    const resentByPublisher = new Set<string>();
    // mqtt.js refuses a publish still queued when the connection closes ("Connection closed"): a
    // reader publishes it again, as a new message, like those whose PUBACK never came.
    const publishOne = async (ref: number): Promise<void> => {
      const code = `RST-${String(ref).padStart(5, '0')}`;
      for (;;) {
        try {
          await publisher.publishAsync('line/L1/reads', code, { qos: 1 });
          acked.add(ref);
          return;
        } catch {
          resentByPublisher.add(code);
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    };
    const publishing = (async () => {
      for (let i = 0; i < total; i++) {
        acks.push(publishOne(i));
        published = i + 1;
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    for (const pause of [800, 1500]) {
      await new Promise((r) => setTimeout(r, pause));
      await broker.stop();
      for (let i = 0; i < published; i++)
        if (!acked.has(i)) resentByPublisher.add(`RST-${String(i).padStart(5, '0')}`);
      await broker.restart();
    }
    await publishing;
    await Promise.all(acks);
    await publisher.endAsync();
    const mine = async () => (await sandboxRefs(sandbox)).filter((r) => r.startsWith('RST-'));
    await waitFor(async () => (await mine()).length >= total, { timeoutMs: 30_000 });
    await new Promise((r) => setTimeout(r, 1500)); // a late resend, if there were one
    const refs = await mine();
    expect(new Set(refs).size).toBe(total);
    const seen = new Set<string>();
    const twice = refs.filter((r) => (seen.has(r) ? true : (seen.add(r), false)));
    expect(
      twice.filter((r) => !resentByPublisher.has(r)),
      'messages the broker had and the gateway stored twice',
    ).toEqual([]);
  });
});
