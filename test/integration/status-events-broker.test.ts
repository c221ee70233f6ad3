import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { deliverySchema } from '../../src/config/schema.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { StatusEventFeed } from '../../src/delivery/status-events.js';
import { StatusTracker } from '../../src/delivery/status-tracker.js';
import { ErrorCodes } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { KafkaBroker, makeSandboxTls, type SandboxTls } from '@scan-gateway/sandbox/kafka';
import { StatusTopicReader } from '../../src/upstream/status-topic.js';
import { waitFor } from '../helpers/wait.js';

// The gateway's status-event consumer (src/upstream/status-topic.ts, src/delivery/status-events.ts)
// against the sandbox's real Kafka broker over SASL_SSL/SCRAM-SHA-512 (packages/sandbox/src/kafka/), and
// against Debian's kcat (librdkafka) as the producer of an event.

const USER = 'plant-7';
const PASSWORD = 'sandbox-secret-7';
const TOPIC = 'sandbox-plant-7-status-event';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

let sharedTls: SandboxTls | undefined;
/** A CA and certificate per file (RSA key generation takes a moment); made by the first broker. */
const tlsOnce = () => sharedTls!;

async function startBroker(): Promise<{
  broker: KafkaBroker;
  tls: SandboxTls;
  saslRefused: { on: boolean };
}> {
  const tls = (sharedTls ??= await makeSandboxTls());
  const saslRefused = { on: false };
  const broker = new KafkaBroker({
    host: '127.0.0.1',
    port: 0,
    tls,
    users: [
      { user: USER, password: PASSWORD, topic: TOPIC },
      { user: 'plant-8', password: 'other-secret', topic: 'sandbox-plant-8-status-event' },
    ],
    faults: () => ({ saslRefused: saslRefused.on }),
    logger: silentLogger(),
  });
  await broker.start();
  cleanups.push(() => broker.close());
  return { broker, tls, saslRefused };
}

function reader(
  broker: KafkaBroker,
  o: { password?: string; ca?: string; topic?: string; servers?: string[] } = {},
): StatusTopicReader {
  const r = new StatusTopicReader({
    bootstrapServers: o.servers ?? [broker.bootstrapServers],
    topic: o.topic ?? TOPIC,
    username: USER,
    password: () => o.password ?? PASSWORD,
    extraCaPems: [o.ca ?? tlsOnce().caPem],
    connectTimeoutMs: 3000,
    requestTimeoutMs: 5000,
    maxWaitMs: 300,
    logger: silentLogger(),
  });
  cleanups.push(() => r.close());
  return r;
}

const event = (o: object) => ({
  timestamp: Date.now(),
  key: null,
  value: Buffer.from(JSON.stringify(o)),
  headers: [],
});

function scan(reference: string): IntakeRecord {
  const body = JSON.stringify({ reference, dcpKey: 'GI-01' });
  return {
    inputId: 'in',
    receivedAt: new Date(0),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: { reference, dcpKey: 'GI-01', instant: new Date(0), body },
  };
}

/** A real buffer, tracker and feed reading `broker`. */
function gatewaySide(broker: KafkaBroker, dir = mkdtempSync(join(tmpdir(), 'sg-broker-'))) {
  const store = BufferStore.openAt(join(dir, 'buffer.db'));
  const logger = silentLogger();
  const tracker = new StatusTracker({
    store,
    api: { getScanStatus: () => Promise.reject(new Error('no poll here')) },
    config: deliverySchema.parse({}),
    logger,
    now: Date.now,
    concurrency: 1,
    onResend: () => {},
  });
  const feed = new StatusEventFeed({
    store,
    topic: TOPIC,
    connect: () => reader(broker),
    apply: (ref, status, source) => tracker.apply(ref, status, source),
    onPaceChange: () => {},
    safetyPollMs: 600_000,
    maxLagEvents: 1000,
    staleAfterMs: 30_000,
    logger,
    now: Date.now,
    retryBaseMs: 50,
    retryMaxMs: 200,
  });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await feed.stop();
    store.close();
  };
  cleanups.push(stop);
  const uploaded = (requestId: string, ref: string) => {
    store.intake.commitIntake([scan(ref)], Date.now());
    const b = formBatch(store, {
      mode: 'direct',
      maxScans: 100,
      maxBytes: 1e6,
      nowIso: new Date().toISOString(),
    })!;
    store.batches.updateBatch(b.id, {
      state: 'uploaded',
      requestId,
      uploadedAt: new Date().toISOString(),
      nextAttemptAt: Date.now() + 600_000,
    });
    return b.id;
  };
  return { dir, store, feed, uploaded, stop };
}

describe('status topic reader against the sandbox broker (SASL_SSL, SCRAM-SHA-512)', () => {
  it('reads the events of the topic from a position, and waits at the broker for new ones', async () => {
    const { broker } = await startBroker();
    broker.append(TOPIC, [
      event({ state: 'Success', requestId: 1, description: '', processed: 1 }),
      event({ state: 'Failed', requestId: 2, description: 'x', processed: 0 }),
    ]);
    const r = reader(broker);
    expect(await r.partitions()).toEqual([0]);
    expect(await r.offsets('earliest')).toEqual(new Map([[0, 0n]]));
    expect(await r.offsets('latest')).toEqual(new Map([[0, 2n]]));
    expect(await r.offsets({ since: Date.now() - 60_000 })).toEqual(new Map([[0, 0n]]));
    expect(await r.offsets({ since: Date.now() + 60_000 })).toEqual(new Map([[0, 2n]]));
    const from1 = await r.fetch(new Map([[0, 1n]]));
    expect(
      from1.records.map((x) => [x.offset, JSON.parse(x.value!.toString()) as unknown]),
    ).toEqual([[1n, { state: 'Failed', requestId: 2, description: 'x', processed: 0 }]]);
    expect(from1.next.get(0)).toBe(2n);
    expect(from1.ends.get(0)).toBe(2n);
    const waiting = r.fetch(new Map([[0, 2n]]));
    setTimeout(
      () =>
        broker.append(TOPIC, [
          event({ state: 'Success', requestId: 3, description: '', processed: 1 }),
        ]),
      50,
    );
    expect((await waiting).records.map((x) => x.offset)).toEqual([2n]);
  });

  it('gives each refusal its code: wrong password, a CA that did not sign the broker, a topic not ours, no broker', async () => {
    const { broker } = await startBroker();
    const other = await makeSandboxTls();
    const code = async (r: StatusTopicReader) =>
      r.partitions().then(
        () => 'none',
        (e: { code: string }) => e.code,
      );
    expect(await code(reader(broker, { password: 'wrong' }))).toBe(ErrorCodes.EVENTS_AUTH);
    expect(await code(reader(broker, { ca: other.caPem }))).toBe(ErrorCodes.EVENTS_TLS);
    expect(await code(reader(broker, { topic: 'sandbox-someone-else-status-event' }))).toBe(
      ErrorCodes.EVENTS_TOPIC,
    );
    // Another client's topic: it exists, but this user may not describe it (TOPIC_AUTHORIZATION_FAILED).
    expect(await code(reader(broker, { topic: 'sandbox-plant-8-status-event' }))).toBe(
      ErrorCodes.EVENTS_TOPIC,
    );
    const port = broker.port;
    await broker.down();
    expect(await code(reader(broker, { servers: [`127.0.0.1:${port}`] }))).toBe(
      ErrorCodes.EVENTS_NETWORK,
    );
  });
});

describe('status events end to end on the wire: broker → feed → tracker → buffer', () => {
  it('finishes batches from events, survives a broker outage with the reason on the status, and loses none across a restart', async () => {
    const { broker, saslRefused } = await startBroker();
    const first = gatewaySide(broker);
    const a = first.uploaded('100', 'A');
    const b = first.uploaded('101', 'B');
    const c = first.uploaded('102', 'C');
    first.feed.start();
    await waitFor(() => first.feed.snapshot().state === 'flowing', {
      what: 'the feed reads the topic',
    });
    broker.append(TOPIC, [
      event({ state: 'InProgress', requestId: 100, description: '', processed: 0 }),
      event({ state: 'Success', requestId: 100, description: '', processed: 1 }),
    ]);
    await waitFor(() => first.store.batches.batch(a)?.state === 'done', {
      what: 'batch 100 done by its event',
    });

    // Broker down: the status says so with its code; back up: it reads again.
    const port = broker.port;
    await broker.down();
    await waitFor(() => first.feed.snapshot().state === 'down', {
      what: 'the outage seen',
      timeoutMs: 30_000,
    });
    expect(first.feed.snapshot().lastError?.code).toBe(ErrorCodes.EVENTS_NETWORK);
    expect(first.feed.pace().events).toBe(false);
    saslRefused.on = true;
    await broker.start();
    expect(broker.port).toBe(port);
    await waitFor(() => first.feed.snapshot().lastError?.code === ErrorCodes.EVENTS_AUTH, {
      what: 'SASL refused seen',
      timeoutMs: 30_000,
    });
    saslRefused.on = false;
    await waitFor(() => first.feed.snapshot().state === 'flowing', {
      what: 'reading again after the outage',
      timeoutMs: 30_000,
    });

    // Stopped (as by a crash: the position is what SQLite holds), events published meanwhile, then a restart.
    await first.stop();
    broker.append(TOPIC, [
      event({
        state: 'HasFailures',
        requestId: 101,
        description: '',
        processed: 0,
        failed: 1,
        failures: [{ reference: 'B', reason: 'Invalid DCP' }],
      }),
    ]);
    broker.append(TOPIC, [
      event({ state: 'Success', requestId: 100, description: 'a repeat', processed: 1 }),
    ]);
    const second = gatewaySide(broker, first.dir);
    second.feed.start();
    broker.append(TOPIC, [
      event({ state: 'Success', requestId: 102, description: '', processed: 1 }),
    ]);
    await waitFor(
      () =>
        second.store.batches.batch(b)?.state === 'done' &&
        second.store.batches.batch(c)?.state === 'done',
      { what: 'both after the restart' },
    );
    expect(second.store.batches.batch(b)).toMatchObject({
      upstreamState: 'HasFailures',
      failed: 1,
    });
    expect(second.feed.snapshot()).toMatchObject({ received: 3, applied: 2, duplicates: 1 });
  });

  it('applies an event that kcat (librdkafka) produces over SASL_SSL with the sandbox CA', async () => {
    const kcat = spawnSync('sh', ['-c', 'command -v kcat'], { encoding: 'utf8' }).stdout.trim();
    expect(kcat, 'kcat is needed (Debian package kcat; .ci/run installs it)').not.toBe('');
    const { broker, tls } = await startBroker();
    const side = gatewaySide(broker);
    const id = side.uploaded('4711', 'K');
    side.feed.start();
    await waitFor(() => side.feed.snapshot().state === 'flowing');
    const dir = mkdtempSync(join(tmpdir(), 'sg-kcat-'));
    writeFileSync(join(dir, 'ca.pem'), tls.caPem);
    // The password in a config file, not on the command line (ps would show it).
    writeFileSync(
      join(dir, 'kcat.conf'),
      [
        `bootstrap.servers=${broker.bootstrapServers}`,
        'security.protocol=SASL_SSL',
        'sasl.mechanisms=SCRAM-SHA-512',
        `sasl.username=${USER}`,
        `sasl.password=${PASSWORD}`,
        `ssl.ca.location=${join(dir, 'ca.pem')}`,
      ].join('\n'),
      { mode: 0o600 },
    );
    // Asynchronously: the broker answers kcat from this very process.
    await new Promise<void>((resolve, reject) => {
      const child = execFile(
        kcat,
        ['-F', join(dir, 'kcat.conf'), '-P', '-t', TOPIC],
        { timeout: 120_000 },
        (err, _out, stderr) =>
          err ? reject(new Error(`kcat failed: ${err.message} ${stderr}`)) : resolve(),
      );
      child.stdin!.end(
        `${JSON.stringify({ state: 'Success', requestId: 4711, description: 'from kcat', processed: 1 })}\n`,
      );
    });
    await waitFor(() => side.store.batches.batch(id)?.state === 'done', {
      what: "kcat's event applied",
    });
    expect(side.store.batches.batch(id)).toMatchObject({ upstreamState: 'Success', processed: 1 });
  });
});
