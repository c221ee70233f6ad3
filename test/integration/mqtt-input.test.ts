import { createHash } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectAsync, type MqttClient } from 'mqtt';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Intake } from '../../src/intake/intake.js';
import { BufferStore } from '../../src/buffer/store.js';
import { mqttInputSchema, type MqttInputConfig } from '../../src/inputs/mqtt/schema.js';
import { parseConfigText } from '../../src/config/load.js';
import { MqttInput } from '../../src/inputs/mqtt/mqtt-input.js';
import type { MessageSink } from '../../src/inputs/mqtt/message-sink.js';
import { silentLogger } from '../../src/log.js';
import { mappingContext } from '../../src/mapping/map-read.js';
import { createTestPki, startMosquitto, type Broker } from '../helpers/mosquitto.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { waitFor } from '../helpers/wait.js';
import { samplePath } from '../helpers/samples.js';
import { sqlOf } from '../helpers/buffer-sql.js';

const SAMPLES = samplePath('mqtt-reader-payloads.ndjson');

interface ReadRow {
  raw: Buffer;
  outcome: string;
  reason: string | null;
  dcp_key: string | null;
  origin: string | null;
}

let broker: Broker;
let brokerDir: string;
let dir: string;
let store: BufferStore;
let intake: Intake;
let inputs: MqttInput[] = [];
const clients: MqttClient[] = [];
let seq = 0;

function configYaml(): string {
  return `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps:
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A }
  - { key: SOP-3, kind: startOfProcess, productModelKey: PACK-A, duplicateWindowMs: 0 }
  - { key: L1, kind: startOfProcess, productModelKey: PACK-A, duplicateWindowMs: 0 }
  - { key: L2, kind: startOfProcess, productModelKey: PACK-A, duplicateWindowMs: 0 }
inputs:
  - { id: mq, type: mqtt, url: mqtt://127.0.0.1:1, topics: [x], clientId: x, dcp: L1 }
`;
}

beforeAll(async () => {
  brokerDir = await mkdtemp(join(tmpdir(), 'sg-mosquitto-'));
  broker = await startMosquitto(brokerDir);
});

afterAll(async () => {
  await broker?.stop();
  await rm(brokerDir, { recursive: true, force: true });
});

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sg-mqtt-'));
  store = BufferStore.openAt(join(dir, 'buffer.db'));
  intake = new Intake({
    store,
    mapping: mappingContext(parseConfigText(configYaml(), 'test.yaml')),
    logger: silentLogger(),
  });
  intake.open();
  seq += 1;
});

afterEach(async () => {
  for (const input of inputs.splice(0)) await input.stop();
  for (const client of clients.splice(0)) await client.endAsync(true);
  intake.close();
  store.close();
  await rm(dir, { recursive: true, force: true });
});

/** A fresh topic prefix and client id per test, so retained state and sessions never leak between tests. */
const topic = (suffix: string): string => `t${seq}/${suffix}`;

function config(overrides: Partial<Record<keyof MqttInputConfig, unknown>> = {}): MqttInputConfig {
  return mqttInputSchema.parse({
    id: 'mq',
    type: 'mqtt',
    dcp: 'L1',
    url: broker.url,
    topics: [topic('#')],
    clientId: `gw-${seq}`,
    reconnectMs: 200,
    ...overrides,
  });
}

/** The intake, with `before` run ahead of each commit (a delay, a refusal by throwing). */
function through(before: () => Promise<void> | void): MessageSink {
  return {
    async submit(items, options) {
      await before();
      return intake.submit(items, options);
    },
    async submitMessage(items, message) {
      await before();
      return intake.submitMessage(items, message);
    },
    forgetMessages: (inputId) => intake.forgetMessages(inputId),
  };
}

async function startInput(cfg: MqttInputConfig, sink: MessageSink = intake): Promise<MqttInput> {
  const input = new MqttInput({ config: cfg, sink, logger: silentLogger(), submitRetryBaseMs: 50 });
  inputs.push(input);
  await input.start();
  await waitFor(() => input.status().state === 'up', { what: 'MQTT input up' });
  return input;
}

async function stopInput(input: MqttInput): Promise<void> {
  await input.stop();
  inputs = inputs.filter((i) => i !== input);
}

async function publisher(id = `pub-${seq}`): Promise<MqttClient> {
  const client = await connectAsync(broker.url, {
    clientId: id,
    clean: false,
    reconnectPeriod: 100,
    protocolVersion: 5,
  });
  clients.push(client);
  return client;
}

function rows(): ReadRow[] {
  return sqlOf(store)
    .prepare(`SELECT raw, outcome, reason, dcp_key, origin FROM reads ORDER BY id`)
    .all() as ReadRow[];
}

const codes = (): string[] => rows().map((r) => r.raw.toString('utf8'));

describe('MqttInput against a real mosquitto', () => {
  it('stores the reader sample (JSON: station as DCP, parent, numeric attributes as text) and acknowledges it', async () => {
    await startInput(config({ format: 'json', fields: { dcp: 'station', parents: 'parent' } }));
    const pub = await publisher();
    const lines = (await readFile(SAMPLES, 'utf8')).trim().split('\n');
    for (const line of lines) await pub.publishAsync(topic('cam'), line, { qos: 1 });
    await waitFor(() => rows().length === 5, { what: '5 reads stored' });
    expect(rows().map((r) => [r.outcome, r.dcp_key])).toEqual([
      ['scan', 'EOL-3'],
      ['scan', 'EOL-3'],
      ['noRead', 'EOL-3'],
      ['scan', 'SOP-3'],
      ['scan', 'SOP-3'],
    ]);
    const bodies = (
      sqlOf(store).prepare(`SELECT body FROM scans ORDER BY id`).pluck().all() as string[]
    ).map((b) => JSON.parse(b) as Record<string, unknown>);
    expect(bodies[0]).toMatchObject({
      reference: ']Q3010952123454321321MOD-000042\u001d240BM-48V-16S',
      timeStamp: '2026-11-18T08:01:02',
      dcpKey: 'EOL-3',
    });
    expect(bodies[2]).toMatchObject({
      reference: ']d1C24A0K3B0712345',
      dcpKey: 'SOP-3',
      parents: ['MOD-000043'],
      attributes: [],
    });
    // The last sample line's attributes {"cellVoltage":3.652,"ocvTest":"pass"} arrive as text.
    expect(bodies[3]).toMatchObject({ reference: ']d1C24A0K3B0712346', parents: ['MOD-000043'] });
    expect(bodies[3]!['attributes']).toEqual(
      expect.arrayContaining([
        { key: 'cellVoltage', value: '3.652' },
        { key: 'ocvTest', value: 'pass' },
      ]),
    );
    expect(JSON.parse(rows()[0]!.origin!)).toEqual({ topic: topic('cam') });
  });

  it('receives every message published while it was stopped exactly once (persistent session)', async () => {
    const cfg = config();
    const first = await startInput(cfg);
    await stopInput(first);
    const pub = await publisher();
    await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        pub.publishAsync(topic('line'), `CODE-${i}`, { qos: 1 }),
      ),
    );
    expect(rows()).toHaveLength(0);

    await startInput(cfg);
    await waitFor(() => rows().length >= 200, {
      what: '200 queued messages stored',
      timeoutMs: 30_000,
    });
    await new Promise((resolve) => setTimeout(resolve, 300)); // a duplicate would show up now
    expect(codes().sort()).toEqual(Array.from({ length: 200 }, (_, i) => `CODE-${i}`).sort());
  });

  it('loses nothing when the broker is killed (SIGKILL) and restarted while messages flow', async () => {
    const input = await startInput(config());
    const pub = await publisher();
    const sent: Promise<unknown>[] = [];
    for (let i = 0; i < 300; i++) {
      sent.push(pub.publishAsync(topic('flow'), `FLOW-${i}`, { qos: 1 }));
      if (i === 100) {
        await waitFor(() => rows().length > 20, { what: 'some messages stored before the kill' });
        await broker.kill();
        await waitFor(() => input.status().state === 'down', {
          what: 'input down while the broker is gone',
        });
        expect(input.status().lastError).toMatch(/127\.0\.0\.1/);
      }
      if (i === 200) await broker.restart();
    }
    await Promise.all(sent);
    const want = Array.from({ length: 300 }, (_, i) => `FLOW-${i}`);
    await waitFor(() => want.every((c) => codes().includes(c)), {
      what: 'all 300 messages stored after the restart',
      timeoutMs: 30_000,
    }).catch((e) => {
      throw new Error(
        `${String(e)}; missing ${want.filter((c) => !codes().includes(c)).join(',')}; log ${broker.log()}`,
      );
    });
    expect(input.status().state).toBe('up');
    // At least once: messages acknowledged just before the kill, whose acknowledgement the broker
    // had not yet written to its persistence file, come again after its restart. Only those.
    const seen = new Map<string, number>();
    for (const c of codes()) seen.set(c, (seen.get(c) ?? 0) + 1);
    const twice = [...seen].filter(([, n]) => n > 1).map(([c]) => Number(c.slice('FLOW-'.length)));
    expect(twice.every((i) => i <= 100)).toBe(true);
    expect([...seen.values()].every((n) => n <= 2)).toBe(true);
  });

  it('acknowledges messages resent after a lost connection without storing them twice', async () => {
    // The ten are held before their commit until the connection is gone, then committed while
    // the broker is down: their PUBACKs are never sent. SIGTERM makes mosquitto save them as
    // unacknowledged; after its restart it sends them again (DUP).
    let commit!: () => void;
    const held = new Promise<void>((resolve) => (commit = resolve));
    let holding = 0;
    const slow = through(() => {
      holding++;
      return held;
    });
    const input = await startInput(config(), slow);
    const pub = await publisher();
    await Promise.all(
      Array.from({ length: 10 }, (_, i) => pub.publishAsync(topic('r'), `R-${i}`, { qos: 1 })),
    );
    await waitFor(() => holding >= 10, { what: 'the ten held before their commit' });
    await broker.stop();
    commit();
    await waitFor(() => rows().length >= 10, { what: 'the ten committed, the broker down' });
    await broker.restart();
    // Each resend was recognised by the identity committed with its read, and counted.
    await waitFor(() => intake.countersFor('mq').redelivered >= 10, {
      what: 'the ten resends recognised, input up again',
      timeoutMs: 30_000,
    });
    expect(input.status().state).toBe('up');
    expect(codes()).toEqual(Array.from({ length: 10 }, (_, i) => `R-${i}`));
    expect(intake.countersFor('mq').redelivered).toBe(10);
  });

  it('stores the resend of a new message never committed, though its packet id, topic and payload match an older one', async () => {
    // The broker hands packet id 1 out again (here: a fresh session starts at 1) for a label scanned
    // again; the buffer refuses its commit until the connection is gone, so the broker resends it
    // (DUP). The identity stored under id 1 is of an older message the broker had the PUBACK for.
    let refusing = true;
    const gated = through(() => {
      if (refusing) throw new Error('quota');
    });
    const input = await startInput(config(), gated);
    const sha = createHash('sha256').update('SAME').digest();
    sqlOf(store)
      .prepare(
        `INSERT INTO mqtt_messages (input_id, packet_id, topic, payload_sha256, committed_at) VALUES ('mq', 1, ?, ?, 0)`,
      )
      .run(topic('s'), sha);
    const pub = await publisher();
    await pub.publishAsync(topic('s'), 'SAME', { qos: 1 });
    await waitFor(() => input.status().state === 'up', { what: 'up' });
    await new Promise((resolve) => setTimeout(resolve, 200)); // refused at least once
    await broker.restart();
    refusing = false;
    await waitFor(() => rows().length === 1, { what: 'the resend stored', timeoutMs: 30_000 });
    expect(codes()).toEqual(['SAME']);
    expect(intake.countersFor('mq').redelivered).toBe(0);
  });

  it('MQTT 3.1.1: stores a 2 MB payload and a non-JSON payload as rejections, acknowledges them, and the next message flows', async () => {
    // MQTT 5 brokers never send the 2 MB message (maximumPacketSize; see the test below).
    const cfg = config({ format: 'json', protocolVersion: 4 });
    const input = await startInput(cfg);
    const pub = await publisher();
    await pub.publishAsync(topic('p'), Buffer.alloc(2 * 1024 * 1024, 0x41), { qos: 1 });
    await pub.publishAsync(topic('p'), 'not json {', { qos: 1 });
    await pub.publishAsync(topic('p'), JSON.stringify({ ts: '2026-11-18T07:00:00Z' }), { qos: 1 });
    await pub.publishAsync(topic('p'), JSON.stringify({ code: 'AFTER-POISON' }), { qos: 1 });
    await waitFor(() => rows().length === 4, { what: '4 rows' });
    const [big, notJson, noCode, good] = rows();
    expect(big).toMatchObject({ outcome: 'rejected' });
    expect(big!.reason).toMatch(
      /payload of 2097152 bytes is larger than maxPayloadBytes \(262144\)/,
    );
    expect(big!.raw.length).toBe(4096);
    expect(notJson!.reason).toMatch(/payload is not JSON/);
    expect(notJson!.raw.toString()).toBe('not json {');
    expect(noCode!.reason).toMatch(/field "code" is missing/);
    expect(good).toMatchObject({ outcome: 'scan' });
    expect(good!.raw.toString()).toBe('AFTER-POISON');

    // All four were acknowledged: a new session of the same client id gets none of them again.
    await stopInput(input);
    await startInput(cfg);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(rows()).toHaveLength(4);
  });

  it('MQTT 3.1.1: a 50 MB payload is refused with its size, counted and kept as its first 4096 bytes (the stream cut it: mqtt-publish-limit.test.ts)', async () => {
    const cfg = config({ protocolVersion: 4 });
    const input = await startInput(cfg);
    const pub = await publisher();
    const big = Buffer.alloc(50 * 1024 * 1024, 0x5a);
    big.write('BIG-HEAD', 0);
    await pub.publishAsync(topic('big'), big, { qos: 1 });
    await pub.publishAsync(topic('big'), 'AFTER-BIG', { qos: 1 });
    await waitFor(() => rows().length === 2, { what: '2 rows', timeoutMs: 30_000 });
    const [refused, good] = rows();
    expect(refused).toMatchObject({ outcome: 'rejected' });
    expect(refused!.reason).toBe(
      'payload of 52428800 bytes is larger than maxPayloadBytes (262144) (first 4096 of 52428800 bytes kept)',
    );
    expect(refused!.raw).toHaveLength(4096);
    expect(refused!.raw.subarray(0, 8).toString()).toBe('BIG-HEAD');
    expect(good).toMatchObject({ outcome: 'scan' });
    expect(intake.countersFor('mq')).toMatchObject({ rejections: 1, scans: 1 });
    // Acknowledged: not sent again to a new connection of the session.
    await stopInput(input);
    await startInput(cfg);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(rows()).toHaveLength(2);
  });

  it('warns once at start that a password over plain mqtt:// travels in clear text (without the password)', async () => {
    const { logger, parsed, lines } = memoryLogger('info');
    const input = new MqttInput({
      config: config({ username: 'gw', passwordEnv: 'MQTT_PW' }),
      sink: intake,
      logger,
      env: { MQTT_PW: 'pw-3f9c1d' },
    });
    inputs.push(input);
    await input.start();
    await waitFor(() => input.status().state === 'up', { what: 'MQTT input up' });
    const warnings = parsed().filter((l) => /password travels in clear text/.test(l.msg));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, url: broker.url });
    expect(lines.join('\n')).not.toContain('pw-3f9c1d');
  });

  it('takes the DCP from a wildcard topic level and rejects a topic outside the pattern', async () => {
    await startInput(
      config({
        topics: [topic('plant/+/scans'), topic('other')],
        dcpFromTopic: `t${seq}/plant/{dcp}/scans`,
      }),
    );
    const pub = await publisher();
    await pub.publishAsync(topic('plant/L2/scans'), 'A-1', { qos: 1 });
    await pub.publishAsync(topic('other'), 'A-2', { qos: 1 });
    await waitFor(() => rows().length === 2, { what: '2 rows' });
    expect(rows().map((r) => [r.raw.toString(), r.outcome, r.dcp_key])).toEqual([
      ['A-1', 'scan', 'L2'],
      ['A-2', 'rejected', null],
    ]);
    expect(rows()[1]!.reason).toMatch(/does not match dcpFromTopic/);
  });

  it("publishes each committed read's verdict on verdictTopic (QoS 1, not retained), and takes none of them as a read", async () => {
    const verdicts = topic('verdicts');
    // The input's own subscription (#) covers the verdict topic too.
    await startInput(config({ verdictTopic: verdicts }));
    const watcher = await publisher(`watch-${seq}`);
    const seen: { payload: Record<string, unknown>; qos: number; retain: boolean }[] = [];
    watcher.on('message', (_t, payload, packet) =>
      seen.push({
        payload: JSON.parse(payload.toString()) as Record<string, unknown>,
        qos: packet.qos,
        retain: packet.retain,
      }),
    );
    await watcher.subscribeAsync(verdicts, { qos: 1 });
    const pub = await publisher();
    await pub.publishAsync(topic('scans'), 'CELL-1', { qos: 1 });
    await pub.publishAsync(topic('scans'), 'NR', { qos: 1 });
    await waitFor(() => seen.length === 2, { what: 'two verdicts' });
    expect(seen.map((m) => [m.payload.reference, m.payload.verdict, m.payload.reason])).toEqual([
      ['CELL-1', 'ack', null],
      ['NR', 'nak', 'noRead'],
    ]);
    expect(seen[0]).toMatchObject({ qos: 1, retain: false, payload: { input: 'mq' } });
    expect(Date.parse(String(seen[0]!.payload.time))).not.toBeNaN();
    // Given time to come round through the input's subscription: still only the two reads.
    await pub.publishAsync(topic('scans'), 'CELL-2', { qos: 1 });
    await waitFor(() => seen.length === 3, { what: 'the third verdict' });
    expect(codes()).toEqual(['CELL-1', 'NR', 'CELL-2']);
  });

  it('acknowledges only after the commit: a message whose commit failed is retried and stored once', async () => {
    let failures = 3;
    const flaky = through(() => {
      if (failures-- > 0) throw new Error('SQLITE_FULL');
    });
    const cfg = config();
    const input = await startInput(cfg, flaky);
    const pub = await publisher();
    await pub.publishAsync(topic('f'), 'RETRIED-1', { qos: 1 });
    await waitFor(() => rows().length === 1, { what: 'stored after three refusals' });
    await stopInput(input);
    await startInput(cfg);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(codes()).toEqual(['RETRIED-1']);
  });

  it('never has more than maxInFlight messages uncommitted', async () => {
    let open = 0;
    let most = 0;
    const slow = through(async () => {
      open += 1;
      most = Math.max(most, open);
      await new Promise((resolve) => setTimeout(resolve, 20));
      open -= 1;
    });
    await startInput(config({ maxInFlight: 4 }), slow);
    const pub = await publisher();
    await Promise.all(
      Array.from({ length: 60 }, (_, i) => pub.publishAsync(topic('b'), `B-${i}`, { qos: 1 })),
    );
    await waitFor(() => rows().length === 60, { what: '60 stored' });
    expect(most).toBeLessThanOrEqual(4);
    expect(most).toBeGreaterThan(1);
    expect(codes()).toEqual(Array.from({ length: 60 }, (_, i) => `B-${i}`));
  });

  it('pauses (disconnects, status "paused") without losing messages, and takes them all on resume', async () => {
    const input = await startInput(config({ statusTopic: topic('status') }));
    const watcher = await publisher(`watch-${seq}`);
    const statuses: string[] = [];
    watcher.on(
      'message',
      (t, payload) => t === topic('status') && statuses.push(payload.toString()),
    );
    await watcher.subscribeAsync(topic('status'), { qos: 1 });
    await waitFor(() => statuses.includes('online'), { what: 'retained online' });

    input.setPaused(true);
    await waitFor(() => input.status().state === 'paused' && statuses.at(-1) === 'paused', {
      what: 'paused',
    });
    const pub = await publisher();
    for (let i = 0; i < 50; i++) await pub.publishAsync(topic('q'), `Q-${i}`, { qos: 1 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(rows()).toHaveLength(0);

    input.setPaused(false);
    await waitFor(() => rows().length === 50, { what: '50 stored after resume' });
    expect(codes()).toEqual(Array.from({ length: 50 }, (_, i) => `Q-${i}`));
    // Queued messages are taken from the CONNACK on; 'online' may come a moment after them.
    await waitFor(() => statuses.at(-1) === 'online', { what: 'online again' });
    await stopInput(input);
    await waitFor(() => statuses.at(-1) === 'offline', { what: 'offline on stop' });
  });
});

describe('MqttInput, MQTT 5 maximum packet size', () => {
  let noticeBroker: Broker;
  let noticeDir: string;

  beforeAll(async () => {
    noticeDir = await mkdtemp(join(tmpdir(), 'sg-mosquitto-notice-'));
    noticeBroker = await startMosquitto(noticeDir, { logNotices: true });
  });

  afterAll(async () => {
    await noticeBroker?.stop();
    await rm(noticeDir, { recursive: true, force: true });
  });

  it('the broker drops a packet over maxPayloadBytes + 65 KiB (its log says so); a payload just over the limit is stored as a rejection', async () => {
    const cfg = config({ url: noticeBroker.url, maxPayloadBytes: 1024 });
    await startInput(cfg);
    const pub = await connectAsync(noticeBroker.url, {
      clientId: `pub5-${seq}`,
      protocolVersion: 5,
    });
    clients.push(pub);
    await pub.publishAsync(topic('m'), Buffer.alloc(1100, 0x41), { qos: 1 });
    await pub.publishAsync(topic('m'), Buffer.alloc(2 * 1024 * 1024, 0x42), { qos: 1 }); // the broker takes it (PUBACK) …
    await pub.publishAsync(topic('m'), 'AFTER-DROP', { qos: 1 });
    await waitFor(() => rows().length === 2, { what: '2 rows' });
    await new Promise((resolve) => setTimeout(resolve, 300)); // the 2 MB one, were it coming
    expect(rows().map((r) => [r.outcome, r.reason, r.raw.length])).toEqual([
      [
        'rejected',
        'payload of 1100 bytes is larger than maxPayloadBytes (1024) (first 1025 of 1100 bytes kept)',
        1025,
      ],
      ['scan', null, 'AFTER-DROP'.length],
    ]);
    // … and never sends it to the gateway: the only trace is the broker's own log (notice level).
    await waitFor(
      () => /Dropping too large outgoing PUBLISH for gw-\d+ \(\d+ bytes\)/.test(noticeBroker.log()),
      { what: 'the drop in the broker log' },
    );
    expect(intake.countersFor('mq')).toMatchObject({ rejections: 1, scans: 1 });
  });
});

describe('MqttInput over TLS (mqtts://, CA and client certificate)', () => {
  let tlsBroker: Broker;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let tlsDir: string;

  beforeAll(async () => {
    tlsDir = await mkdtemp(join(tmpdir(), 'sg-mosquitto-tls-'));
    await chmod(tlsDir, 0o755); // the broker, dropped to its own user, must reach the files inside
    pki = await createTestPki(join(tlsDir, 'pki'));
    tlsBroker = await startMosquitto(join(tlsDir, 'broker'), {
      tls: {
        caFile: pki.caFile,
        certFile: pki.serverCert,
        keyFile: pki.serverKey,
        requireClientCertificate: true,
      },
    });
  });

  afterAll(async () => {
    await tlsBroker?.stop();
    await rm(tlsDir, { recursive: true, force: true });
  });

  it('connects with caFile, certFile and keyFile and takes messages', async () => {
    const cfg = config({
      url: tlsBroker.url,
      caFile: pki.caFile,
      certFile: pki.clientCert,
      keyFile: pki.clientKey,
    });
    await startInput(cfg);
    const pub = await connectAsync(tlsBroker.url, {
      clientId: `tls-pub-${seq}`,
      ca: await readFile(pki.caFile),
      cert: await readFile(pki.clientCert),
      key: await readFile(pki.clientKey),
    });
    clients.push(pub);
    await pub.publishAsync(topic('tls'), 'OVER-TLS', { qos: 1 });
    await waitFor(() => codes().includes('OVER-TLS'), { what: 'message over TLS stored' });
  });

  it('refuses a broker whose certificate it cannot verify (no caFile): down with the reason', async () => {
    const input = new MqttInput({
      config: config({
        url: tlsBroker.url,
        certFile: pki.clientCert,
        keyFile: pki.clientKey,
        reconnectMs: 5000,
      }),
      sink: intake,
      logger: silentLogger(),
    });
    inputs.push(input);
    await input.start();
    await waitFor(() => input.status().state === 'down', { what: 'down' });
    expect(input.status().lastError).toMatch(/certificate/i);
  });
});
