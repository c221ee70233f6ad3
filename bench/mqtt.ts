import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'mqtt';
import { MqttInput } from '../src/inputs/mqtt/mqtt-input.js';
import type { IntakeSink } from '../src/inputs/types.js';
import { silentLogger } from '../src/log.js';
import { startJsonChild, type JsonChild } from './lib/child.js';
import { startIntakePipeline } from './lib/pipeline.js';
import { benchConfig, exampleInputs, PLC_INPUT, PLC_TOPIC } from './lib/reads.js';
import { judge, type BenchResult, type Figure } from './lib/report.js';
import { epochMs, median, percentile, sleep } from './lib/system.js';
import { startMosquitto } from './lib/tools.js';

/**
 * Benchmark 2, end-to-end intake over MQTT: a publisher process publishes at QoS 1 to a real
 * mosquitto what the example's PLC bridge publishes (cell codes, text payloads, the DCP in the
 * topic); the gateway side (the real `MqttInput` of the example's `plc-bridge` input, handing reads
 * to intake wired as in app.ts with the example's rules, SQLite WAL synchronous=FULL) takes them to
 * committed reads. The ceiling is a bare mqtt.js
 * subscriber (QoS 1, acknowledging as it receives) on the same broker, under the same publisher, in
 * the same run. Then the latency from publish to commit at a steady rate.
 */

/** Sizes and rates of benchmark 2. */
export interface MqttBenchOptions {
  /** Messages per throughput trial. */
  messages: number;
  /** Throughput trials of each side, alternating. */
  trials: number;
  /** Steady rate of the latency run, messages/s. */
  latencyRate: number;
  latencySeconds: number;
}

/** 2 trials of 50,000 messages each side; latency at 1,000 messages/s for 10 s. */
export const MQTT_DEFAULTS: MqttBenchOptions = { messages: 50_000, trials: 2, latencyRate: 1000, latencySeconds: 10 };

const TOPIC = PLC_TOPIC;

/** Something that takes the benchmark's messages and says when (epoch ms) each text arrived. */
interface Receiver {
  /** Messages taken (received by the bare subscriber; committed by the gateway). */
  count(): number;
  /** Group commits so far (the gateway; 0 for the bare subscriber). */
  commits(): number;
  /** Epoch ms at which `count()` last grew. */
  lastAt(): number;
  /** Epoch ms at which the message with this text was taken. */
  takenAt(text: string): number | undefined;
  reset(): void;
  close(): Promise<void>;
}

function tracker(): Pick<Receiver, 'count' | 'lastAt' | 'takenAt' | 'reset'> & { took(text: string | undefined): void } {
  let n = 0;
  let last = 0;
  let times = new Map<string, number>();
  return {
    took(text) {
      n++;
      last = epochMs();
      if (text !== undefined) times.set(text, last);
    },
    count: () => n,
    lastAt: () => last,
    takenAt: (text) => times.get(text),
    reset() {
      n = 0;
      last = 0;
      times = new Map();
    },
  };
}

/** The ceiling: a bare mqtt.js subscriber; mqtt.js sends each PUBACK right after the 'message' event. */
async function bareSubscriber(url: string, record: () => boolean): Promise<Receiver> {
  const t = tracker();
  const client = connect(url, { protocolVersion: 5, clientId: `bench-bare-${Date.now()}`, clean: true, reconnectPeriod: 0 });
  await new Promise<void>((resolve, reject) => {
    client.once('connect', () => resolve());
    client.once('error', reject);
  });
  client.on('message', (_topic, payload) => t.took(record() ? payload.toString('latin1') : undefined));
  await client.subscribeAsync(TOPIC, { qos: 1 });
  return { ...t, commits: () => 0, close: () => client.endAsync() };
}

/** The gateway: MqttInput → intake → SQLite, as app.ts wires it; a message counts once its submit resolved (committed). */
async function gatewaySubscriber(url: string, dir: string, record: () => boolean): Promise<Receiver> {
  const t = tracker();
  const clientId = `bench-gw-${Date.now()}`;
  const index = exampleInputs().findIndex((i) => i.id === PLC_INPUT);
  if (index < 0) throw new Error(`config/example.yaml has no input ${PLC_INPUT}`);
  // The example's broker is the plant's (TLS, a CA file): here the local mosquitto, in the clear.
  const config = benchConfig([
    [['inputs', index, 'url'], url],
    [['inputs', index, 'clientId'], clientId],
    [['inputs', index, 'caFile'], undefined],
  ]);
  const inputConfig = config.inputs[index];
  if (inputConfig?.type !== 'mqtt') throw new Error(`input ${PLC_INPUT} of config/example.yaml is not an MQTT input`);
  const pipeline = startIntakePipeline(join(dir, `gateway-${clientId}.db`), config);
  let commits = 0;
  const commit = pipeline.store.commitIntake.bind(pipeline.store);
  // Counts transactions without changing them: the same method, called through.
  pipeline.store.commitIntake = (...args: Parameters<typeof commit>) => {
    commits++;
    commit(...args);
  };
  const sink: IntakeSink = {
    submit: (items, ...rest) =>
      pipeline.intake.submit(items, ...rest).then(() => {
        for (const item of items) t.took(record() && item.kind === 'read' ? item.read.raw.toString('latin1') : undefined);
      }),
  };
  const input = new MqttInput({ config: inputConfig, sink, logger: silentLogger() });
  await input.start();
  if (input.status().state !== 'up') throw new Error(`the MQTT input is ${input.status().state}: ${input.status().lastError ?? ''}`);
  return {
    ...t,
    reset() {
      t.reset();
      commits = 0;
    },
    commits: () => commits,
    async close() {
      await input.stop();
      pipeline.close();
    },
  };
}

/** Publishes probes until the receiver has taken one (its subscription is active), then clears its counts. */
async function waitSubscribed(publisher: JsonChild, receiver: Receiver): Promise<void> {
  for (let i = 0; receiver.count() === 0; i++) {
    if (i > 200) throw new Error('the subscriber never received a probe message');
    publisher.send({ probe: `]C0PROBE-${i}` });
    await publisher.next(10_000, 'a probe to be acknowledged');
    await sleep(25);
  }
  await sleep(200);
  receiver.reset();
}

async function throughput(publisher: JsonChild, receiver: Receiver, messages: number): Promise<number> {
  publisher.send({ burst: messages });
  const sent = await publisher.next<{ startedAt: number; ackedAt: number }>(300_000, 'the burst to be published');
  const deadline = Date.now() + 300_000;
  while (receiver.count() < messages) {
    if (Date.now() > deadline) throw new Error(`only ${receiver.count()} of ${messages} messages arrived within 300 s`);
    await sleep(5);
  }
  return messages / ((receiver.lastAt() - sent.startedAt) / 1000);
}

async function latency(publisher: JsonChild, receiver: Receiver, opts: MqttBenchOptions, prefix: string): Promise<number[]> {
  publisher.send({ steady: { rate: opts.latencyRate, seconds: opts.latencySeconds, prefix } });
  const { sends } = await publisher.next<{ sends: number[] }>(opts.latencySeconds * 1000 + 60_000, 'the steady run');
  const deadline = Date.now() + 30_000;
  while (receiver.count() < sends.length && Date.now() < deadline) await sleep(10);
  const lat: number[] = [];
  sends.forEach((sentAt, seq) => {
    const at = receiver.takenAt(`${prefix}${String(seq).padStart(10, '0')}`);
    if (at !== undefined) lat.push(at - sentAt);
  });
  if (lat.length < sends.length) throw new Error(`only ${lat.length} of ${sends.length} steady messages arrived`);
  return lat.sort((a, b) => a - b);
}

/** Runs benchmark 2. */
export async function benchMqtt(opts: MqttBenchOptions = MQTT_DEFAULTS): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-mqtt-'));
  const broker = await startMosquitto(dir);
  const publisher = startJsonChild('mqtt-publisher.js', [JSON.stringify({ url: broker.url, topic: TOPIC })]);
  try {
    await publisher.next(10_000, 'the publisher to connect');
    const gatewayRates: number[] = [];
    const groupSizes: number[] = [];
    let latencyGroup = NaN;
    const bareRates: number[] = [];
    const noTimes = () => false;
    for (let t = 0; t < opts.trials; t++) {
      for (const side of ['bare', 'gateway'] as const) {
        const receiver = side === 'bare' ? await bareSubscriber(broker.url, noTimes) : await gatewaySubscriber(broker.url, dir, noTimes);
        try {
          await waitSubscribed(publisher, receiver);
          (side === 'bare' ? bareRates : gatewayRates).push(await throughput(publisher, receiver, opts.messages));
          if (side === 'gateway') groupSizes.push(opts.messages / receiver.commits());
        } finally {
          await receiver.close();
        }
      }
    }
    const withTimes = () => true;
    const lat: Record<'bare' | 'gateway', number[]> = { bare: [], gateway: [] };
    for (const side of ['bare', 'gateway'] as const) {
      const receiver = side === 'bare' ? await bareSubscriber(broker.url, withTimes) : await gatewaySubscriber(broker.url, dir, withTimes);
      try {
        await waitSubscribed(publisher, receiver);
        lat[side] = await latency(publisher, receiver, opts, side === 'bare' ? 'CLATB' : 'CLATG');
        if (side === 'gateway') latencyGroup = lat.gateway.length / receiver.commits();
      } finally {
        await receiver.close();
      }
    }
    const rate = median(gatewayRates);
    const ceiling = median(bareRates);
    const figures: Figure[] = [
      judge({
        name: 'MQTT QoS 1 to committed reads',
        value: rate,
        unit: 'reads/s',
        ceiling: { value: ceiling, what: 'a bare mqtt.js subscriber on the same broker, same publisher' },
        targets: [{ kind: 'min', of: 'ratio', value: 0.7 }],
        note: `median of ${opts.trials} trials of ${opts.messages} messages, from the first publish to the last commit`,
      }),
      judge({
        name: `publish → commit p50 at ${opts.latencyRate}/s`,
        value: percentile(lat.gateway, 50),
        unit: 'ms',
        ceiling: { value: percentile(lat.bare, 50), what: 'publish → receive of the bare subscriber' },
      }),
      judge({
        name: `publish → commit p99 at ${opts.latencyRate}/s`,
        value: percentile(lat.gateway, 99),
        unit: 'ms',
        ceiling: { value: percentile(lat.bare, 99), what: 'publish → receive of the bare subscriber' },
        targets: [{ kind: 'max', of: 'value', value: 10 }],
      }),
      judge({ name: `publish → commit max at ${opts.latencyRate}/s`, value: lat.gateway[lat.gateway.length - 1] ?? NaN, unit: 'ms' }),
      judge({ name: 'reads per commit (MQTT throughput)', value: median(groupSizes), unit: 'reads' }),
      judge({ name: `reads per commit at ${opts.latencyRate}/s`, value: latencyGroup, unit: 'reads' }),
    ];
    return {
      id: 'mqtt',
      title: 'End-to-end intake over MQTT (mosquitto, QoS 1, the example\'s plc-bridge input → intake → SQLite)',
      figures,
      notes: [
        `gateway trials ${gatewayRates.map(Math.round).join(', ')} reads/s; bare subscriber trials ${bareRates.map(Math.round).join(', ')} msgs/s`,
        `latency over ${lat.gateway.length} messages (${opts.latencySeconds} s at ${opts.latencyRate}/s); bare subscriber p50/p99 ${percentile(lat.bare, 50).toFixed(2)}/${percentile(lat.bare, 99).toFixed(2)} ms`,
      ],
    };
  } finally {
    await publisher.stop();
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
