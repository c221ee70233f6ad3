import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectAsync } from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mqttInputSchema } from '../../src/inputs/mqtt/schema.js';
import { MqttInput } from '../../src/inputs/mqtt/mqtt-input.js';
import { mqttClientOptions } from '../../src/inputs/mqtt/mqtt-options.js';
import { FakeSink } from '../helpers/fake-sink.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { startMosquitto, type Broker } from '../helpers/mosquitto.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The MQTT input under `ha` against a real mosquitto: two nodes share one client id and session.
 * A node that does not lead never connects again after a lost connection (its session taken over
 * by the new leader, or the broker gone): the two never evict each other, and the session's
 * messages go to the new one. (mosquitto 2.0 closes a taken-over MQTT 5 connection without a
 * DISCONNECT 0x8E; the input also stays away on 0x8E from brokers that send it.)
 */
describe('MQTT hand-over under ha', () => {
  let broker: Broker;
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sg-mqtt-ha-'));
    await chmod(dir, 0o755);
    broker = await startMosquitto(join(dir, 'broker'));
  });
  afterAll(async () => {
    await broker?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const config = (clientId: string) =>
    mqttInputSchema.parse({
      id: 'line',
      type: 'mqtt',
      url: broker.url,
      topics: ['ha/scans'],
      clientId,
      dcp: 'L1',
      reconnectMs: 100,
      statusTopic: false,
    });

  it('the old node, fenced, does not connect again when the new leader takes the session over; the new one keeps it', async () => {
    let oldLeads = true;
    const oldLog = memoryLogger('info');
    const oldSink = new FakeSink();
    const old = new MqttInput({
      config: config('sg-ha-pair'),
      sink: oldSink,
      logger: oldLog.logger,
      ha: { mayConnect: () => oldLeads },
    });
    await old.start();
    expect(old.status().state).toBe('up');
    // The old leader is fenced (its lease lapsed, say it hung); its inputs are not stopped yet.
    oldLeads = false;
    const newSink = new FakeSink();
    const fresh = new MqttInput({
      config: config('sg-ha-pair'),
      sink: newSink,
      logger: memoryLogger('info').logger,
      ha: { mayConnect: () => true },
    });
    await fresh.start();
    // mosquitto 2.0 closes the old connection (without DISCONNECT 0x8E): the old node must not connect again.
    await waitFor(() => old.status().state === 'down', {
      what: `the old node lost its connection; its log: ${oldLog.lines.join('\n')}`,
    });
    await waitFor(() => oldLog.lines.some((l) => l.includes('not connecting again')), {
      what: 'the old node says it does not connect again',
    });
    // Ten reconnect periods: the old node stays away, the new one stays connected. (A window for
    // something that must not happen: a slow machine makes it weaker, never red.)
    await new Promise((r) => setTimeout(r, 1000));
    expect(fresh.status().state).toBe('up');
    expect(old.status().state).toBe('down');

    const pub = await connectAsync(broker.url, { clientId: 'sg-ha-publisher' });
    await pub.publishAsync('ha/scans', 'CELL-1', { qos: 1 });
    await waitFor(() => newSink.items.length === 1, { what: 'the new leader takes the read' });
    expect(oldSink.items).toEqual([]);
    await pub.endAsync();
    await fresh.stop();
    await old.stop();
  });

  it('a node that does not lead does not connect again after a lost connection', async () => {
    let leads = true;
    const log = memoryLogger('info');
    const input = new MqttInput({
      config: config('sg-ha-alone'),
      sink: new FakeSink(),
      logger: log.logger,
      ha: { mayConnect: () => leads },
    });
    await input.start();
    expect(input.status().state).toBe('up');
    leads = false;
    await broker.restart();
    await waitFor(() => log.lines.some((l) => l.includes('not connecting again')), {
      what: 'the node says it does not connect again',
    });
    // Ten reconnect periods with the broker back: still down (a window for what must not happen).
    await new Promise((r) => setTimeout(r, 1000));
    expect(input.status().state).toBe('down');
    await input.stop();
  });

  it('a leader that dies leaves no offline will while the standby resumes the shared session within willDelaySec', async () => {
    const withStatus = mqttInputSchema.parse({
      id: 'line',
      type: 'mqtt',
      url: broker.url,
      topics: ['ha/scans'],
      clientId: 'sg-ha-will',
      dcp: 'L1',
      reconnectMs: 100,
    });
    const observer = await connectAsync(broker.url, { clientId: 'sg-ha-observer' });
    const seen: string[] = [];
    observer.on('message', (_topic, payload) => seen.push(payload.toString()));
    await observer.subscribeAsync('scan-gateway/sg-ha-will/status', { qos: 1 });
    // The dying leader: the input's own connection options, its socket then cut as a SIGKILL would.
    const dying = await connectAsync(broker.url, {
      ...(await mqttClientOptions(withStatus, {}, { willDelaySec: 15 })),
      reconnectPeriod: 0,
    });
    dying.stream.destroy();
    await new Promise((r) => setTimeout(r, 500));
    const fresh = new MqttInput({
      config: withStatus,
      sink: new FakeSink(),
      logger: memoryLogger('info').logger,
      ha: { mayConnect: () => true, willDelaySec: 15 },
    });
    await fresh.start();
    await waitFor(() => seen.includes('online'), { what: 'the new leader says online' });
    await new Promise((r) => setTimeout(r, 1000));
    // Without the delay the broker publishes the dead connection's will at once: `offline` while the standby takes over.
    expect(seen).toEqual(['online']);
    await fresh.stop();
    dying.end(true);
    await observer.endAsync();
  });
});
