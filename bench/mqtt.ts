import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'mqtt';
import type { GatewayConfig } from '../src/config/schema.js';
import { MqttInput } from '../src/inputs/mqtt/mqtt-input.js';
import type { MqttInputConfig } from '../src/inputs/mqtt/schema.js';
import { messageToItem } from '../src/inputs/mqtt/mqtt-payload.js';
import { mappingContext, mapRead } from '../src/mapping/map-read.js';
import type { MessageSink } from '../src/inputs/mqtt/message-sink.js';
import type { IntakeItem } from '../src/inputs/types.js';
import { silentLogger } from '../src/log.js';
import { startJsonChild, type JsonChild } from './lib/child.js';
import { INTAKE_DEFAULTS } from './intake.js';
import { startIntakePipeline } from './lib/pipeline.js';
import { runRawCeiling, type RawCeiling } from './lib/raw-ceiling.js';
import { benchConfig, exampleInputs, PLC_INPUT, PLC_TOPIC, plcText } from './lib/reads.js';
import { judge, type BenchResult, type Figure } from './lib/report.js';
import {
  epochMs,
  median,
  percentile,
  processCpuSeconds,
  sleep,
  threadCpuSeconds,
  threadSchedNs,
} from './lib/system.js';
import { startMosquitto, type Tool } from './lib/tools.js';

/**
 * Benchmark 2, end-to-end intake over MQTT: a publisher process publishes at QoS 1 to a real
 * mosquitto what the example's PLC bridge publishes (cell codes, text payloads, the DCP in the
 * topic); the gateway side (the real `MqttInput` of the example's `plc-bridge` input, handing reads
 * to intake wired as in app.ts with the example's rules, SQLite WAL synchronous=FULL) takes them to
 * committed reads. The ceiling is a bare mqtt.js
 * subscriber (QoS 1, acknowledging as it receives) on the same broker, under the same publisher, in
 * the same run. Then the latency from publish to commit at a steady rate.
 *
 * The CPU budget: the publisher, mosquitto and the subscriber share the same
 * cores, so each throughput trial also accounts the CPU of each process (utime + stime of
 * /proc/PID/stat, all threads) and, from the raw-insert ceiling of benchmark 1 run on the rows the
 * gateway wrote, derives the fewest cores any implementation of the gateway would need at 0.7 of
 * the bare subscriber's rate.
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
  /** Messages of one untimed burst to each side before the trials (JIT warm-up of publisher, mqtt.js and the gateway). */
  warmupMessages: number;
  /**
   * The fair mode: the broker and the publisher are pinned to the last core (`taskset`), this
   * process (both subscriber sides: the bare client and the gateway) to the others, so the
   * gateway's ratio is measured with a core of its own instead of sharing both with the load it
   * is fed by. Needs at least 2 cores.
   */
  fair?: boolean;
}

/** 2 trials of 50,000 messages each side after a 10,000-message warm-up of each; latency at 1,000 messages/s for 10 s. */
export const MQTT_DEFAULTS: MqttBenchOptions = {
  messages: 50_000,
  trials: 2,
  latencyRate: 1000,
  latencySeconds: 10,
  warmupMessages: 10_000,
};

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
  /** The gateway's SQLite file (undefined for the bare subscriber). */
  dbPath?: string;
  reset(): void;
  close(): Promise<void>;
}

function tracker(): Pick<Receiver, 'count' | 'lastAt' | 'takenAt' | 'reset'> & {
  took(text: string | undefined): void;
} {
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
  const client = connect(url, {
    protocolVersion: 5,
    clientId: `bench-bare-${Date.now()}`,
    clean: true,
    reconnectPeriod: 0,
  });
  await new Promise<void>((resolve, reject) => {
    client.once('connect', () => resolve());
    client.once('error', reject);
  });
  client.on('message', (_topic, payload) =>
    t.took(record() ? payload.toString('latin1') : undefined),
  );
  await client.subscribeAsync(TOPIC, { qos: 1 });
  return { ...t, commits: () => 0, close: () => client.endAsync() };
}

/** The gateway: MqttInput → intake → SQLite, as app.ts wires it; a message counts once its submit resolved (committed). */
async function gatewaySubscriber(
  url: string,
  dir: string,
  record: () => boolean,
): Promise<Receiver> {
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
  const inputConfig = config.inputs[index] as MqttInputConfig | undefined;
  if (inputConfig?.type !== 'mqtt')
    throw new Error(`input ${PLC_INPUT} of config/example.yaml is not an MQTT input`);
  const dbPath = join(dir, `gateway-${clientId}.db`);
  const pipeline = startIntakePipeline(dbPath, config);
  let commits = 0;
  const commit = pipeline.store.intake.commitIntake.bind(pipeline.store.intake);
  // Counts transactions without changing them: the same method, called through.
  pipeline.store.intake.commitIntake = (...args: Parameters<typeof commit>) => {
    commits++;
    commit(...args);
  };
  const took = (items: IntakeItem[]) => {
    for (const item of items)
      t.took(record() && item.kind === 'read' ? item.read.raw.toString('latin1') : undefined);
  };
  const sink: MessageSink = {
    submit: (items, options) => pipeline.intake.submit(items, options).then(() => took(items)),
    submitMessage: (items, message) =>
      pipeline.intake.submitMessage(items, message).then(() => took(items)),
    forgetMessages: (inputId) => pipeline.intake.forgetMessages(inputId),
  };
  const input = new MqttInput({ config: inputConfig, sink, logger: silentLogger() });
  await input.start();
  if (input.status().state !== 'up')
    throw new Error(`the MQTT input is ${input.status().state}: ${input.status().lastError ?? ''}`);
  return {
    ...t,
    dbPath,
    reset() {
      t.reset();
      commits = 0;
    },
    commits: () => commits,
    async close() {
      await input.stop();
      pipeline.close();
      await dropSession(url, clientId);
    },
  };
}

/**
 * Ends the persistent session (`clean: false`, the example's 7-day expiry) that a gateway trial
 * leaves on the broker: otherwise mosquitto goes on queueing every later message for it, and later
 * trials (of both sides) measure a broker that does more work per message than the first.
 */
async function dropSession(url: string, clientId: string): Promise<void> {
  // MQTT 5: clean start discards the session; no session expiry interval ends the new one at disconnect.
  const client = connect(url, { protocolVersion: 5, clientId, clean: true, reconnectPeriod: 0 });
  await new Promise<void>((resolve, reject) => {
    client.once('connect', () => resolve());
    client.once('error', reject);
  });
  await client.endAsync();
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

/** The processes of a throughput trial whose CPU is accounted. */
type Role = 'subscriber' | 'broker' | 'publisher';
const ROLES: readonly Role[] = ['subscriber', 'broker', 'publisher'];

/** CPU used by each process during one throughput trial. */
interface TrialCpu {
  /** CPU seconds (user + system, all threads) per process. */
  seconds: Record<Role, number>;
  /** CPU seconds of the subscriber's main thread (its event loop: mqtt.js, and for the gateway MqttInput, intake, SQLite). */
  subscriberMainSeconds: number;
  /** CPU seconds of each other thread of the subscriber's process that used any (V8's GC and compiler helpers, libuv's pool), largest first. */
  subscriberOtherThreads: number[];
  /** Seconds the subscriber's main thread was runnable but waited for a core (schedstat; NaN without schedstats). */
  subscriberMainWaitSec: number;
  /** Seconds the subscriber's main thread was on a core, by schedstat (precise; NaN without schedstats). */
  subscriberMainRunSec: number;
  /** Wall seconds from the first publish command to the last message taken. */
  wallSec: number;
}

/** CPU seconds of each thread of process `pid` so far, by thread id (Node 20 names them all `node`). */
function threadsNow(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const entry of readdirSync(`/proc/${pid}/task`)) {
    const seconds = threadCpuSeconds(pid, Number(entry));
    if (seconds !== undefined) out.set(Number(entry), seconds);
  }
  return out;
}

/** CPU seconds of each process so far (/proc/PID/stat), and of the subscriber's main thread; a process that is gone is an error. */
function cpuNow(pids: Record<Role, number>): Record<Role | 'subscriberMain', number> {
  const out = {} as Record<Role | 'subscriberMain', number>;
  for (const role of ROLES) {
    const s = processCpuSeconds(pids[role]);
    if (s === undefined) throw new Error(`the ${role} process (pid ${pids[role]}) is gone`);
    out[role] = s;
  }
  const main = threadCpuSeconds(pids.subscriber, pids.subscriber);
  if (main === undefined)
    throw new Error(`the subscriber's main thread (pid ${pids.subscriber}) is gone`);
  out.subscriberMain = main;
  return out;
}

/**
 * One burst of `messages`; the rate from the first publish to the last message taken, and the CPU
 * of each process over the trial. CPU is read again 250 ms after the last message, so that the
 * broker's handling of the last PUBACKs is counted (the processes are idle by then: keepalives only).
 */
async function throughput(
  publisher: JsonChild,
  receiver: Receiver,
  messages: number,
  pids: Record<Role, number>,
): Promise<{ rate: number; cpu: TrialCpu }> {
  const threadsBefore = threadsNow(pids.subscriber);
  const schedBefore = threadSchedNs(pids.subscriber, pids.subscriber);
  const cpuBefore = cpuNow(pids);
  const wallBefore = epochMs();
  publisher.send({ burst: messages });
  const sent = await publisher.next<{ startedAt: number; ackedAt: number }>(
    300_000,
    'the burst to be published',
  );
  const deadline = Date.now() + 300_000;
  while (receiver.count() < messages) {
    if (Date.now() > deadline)
      throw new Error(`only ${receiver.count()} of ${messages} messages arrived within 300 s`);
    await sleep(5);
  }
  const wallSec = (receiver.lastAt() - wallBefore) / 1000;
  // Read at the last message, not after the settle pause: these describe the trial's wall time.
  const schedAfter = threadSchedNs(pids.subscriber, pids.subscriber);
  const subscriberMainRunSec =
    schedBefore && schedAfter ? (schedAfter.runNs - schedBefore.runNs) / 1e9 : NaN;
  const subscriberMainWaitSec =
    schedBefore && schedAfter ? (schedAfter.waitNs - schedBefore.waitNs) / 1e9 : NaN;
  await sleep(250);
  const cpuAfter = cpuNow(pids);
  const subscriberOtherThreads: number[] = [];
  for (const [tid, seconds] of threadsNow(pids.subscriber)) {
    // A thread started during the trial counts from 0; one that ended during it is not counted.
    const used = seconds - (threadsBefore.get(tid) ?? 0);
    if (tid !== pids.subscriber && used > 0) subscriberOtherThreads.push(used);
  }
  subscriberOtherThreads.sort((a, b) => b - a);
  const seconds = {} as Record<Role, number>;
  for (const role of ROLES) seconds[role] = cpuAfter[role] - cpuBefore[role];
  const subscriberMainSeconds = cpuAfter.subscriberMain - cpuBefore.subscriberMain;
  return {
    rate: messages / ((receiver.lastAt() - sent.startedAt) / 1000),
    cpu: {
      seconds,
      subscriberMainSeconds,
      subscriberOtherThreads,
      subscriberMainRunSec,
      subscriberMainWaitSec,
      wallSec,
    },
  };
}

async function latency(
  publisher: JsonChild,
  receiver: Receiver,
  opts: MqttBenchOptions,
  prefix: string,
): Promise<number[]> {
  publisher.send({ steady: { rate: opts.latencyRate, seconds: opts.latencySeconds, prefix } });
  const { sends } = await publisher.next<{ sends: number[] }>(
    opts.latencySeconds * 1000 + 60_000,
    'the steady run',
  );
  const deadline = Date.now() + 30_000;
  while (receiver.count() < sends.length && Date.now() < deadline) await sleep(10);
  const lat: number[] = [];
  sends.forEach((sentAt, seq) => {
    const at = receiver.takenAt(`${prefix}${String(seq).padStart(10, '0')}`);
    if (at !== undefined) lat.push(at - sentAt);
  });
  if (lat.length < sends.length)
    throw new Error(`only ${lat.length} of ${sends.length} steady messages arrived`);
  return lat.sort((a, b) => a - b);
}

/** The broker's pid (mosquitto is a process of its own). */
function brokerPid(broker: Tool): number {
  const pid = broker.child?.pid;
  if (pid === undefined) throw new Error('mosquitto has no process id');
  return pid;
}

/** Median over trials of f(trial). */
const medianOf = (trials: readonly TrialCpu[], f: (trial: TrialCpu) => number): number =>
  median(trials.map(f));

/**
 * The gateway's own work per message outside mqtt.js and SQLite, alone, in this process: the
 * payload's SHA-256 (the exactly-once record), the payload to a read (`messageToItem`),
 * the read to a Scan with the example's rules (`mapRead`: the lookup of the station, the cell
 * code's check, the product key) and the Scan's JSON, for the benchmark's own payloads
 * (`plcText`). Nothing of it can be left out without dropping a guarantee or the mapping itself.
 * CPU (`process.cpuUsage`, user + system) per message in µs: the least of 3 passes over `messages`
 * payloads, after one pass to warm the JIT up.
 */
function ownWorkMicrosPerMessage(messages: number): number {
  const config: GatewayConfig = benchConfig();
  const input = config.inputs.find((i) => i.id === PLC_INPUT) as MqttInputConfig | undefined;
  if (input?.type !== 'mqtt')
    throw new Error(`input ${PLC_INPUT} of config/example.yaml is not an MQTT input`);
  const ctx = mappingContext(config);
  const payloads = Array.from({ length: messages }, (_, n) => Buffer.from(plcText(n)));
  let sink = 0;
  const pass = (): number => {
    const before = process.cpuUsage();
    const receivedAt = new Date();
    for (const payload of payloads) {
      sink += createHash('sha256').update(payload).digest()[0]!;
      const item = messageToItem(input, PLC_TOPIC, payload, receivedAt);
      if (item.kind !== 'read')
        throw new Error(`the benchmark's payload was refused: ${item.rejection.reason}`);
      const mapped = mapRead(item.read, ctx);
      if (mapped.outcome !== 'scan')
        throw new Error(`the benchmark's read was not mapped to a scan: ${mapped.outcome}`);
      sink += JSON.stringify(mapped.scan).length;
    }
    const cpu = process.cpuUsage(before);
    return (cpu.user + cpu.system) / messages;
  };
  pass();
  const least = Math.min(pass(), pass(), pass());
  if (sink === 0) throw new Error('nothing was mapped');
  return least;
}

/**
 * The CPU figures of the throughput trials and the CPU lower bound at 0.7 of the bare subscriber:
 * at rate r = 0.7 × the ceiling's rate, publisher, broker and any gateway (which must at least
 * receive and acknowledge each message as the bare subscriber does, and insert the same rows as the
 * raw ceiling does) together need r × (publisher + broker + bare subscriber + raw insert) µs of CPU
 * per second, whatever their threads. Publisher and broker per message come from the ceiling trials
 * (the same work as in the gateway's trials; those are reported too, to show it).
 */
function cpuBudget(
  trials: Record<'bare' | 'gateway', TrialCpu[]>,
  rawCeilings: readonly RawCeiling[],
  rawCeilingsExactlyOnce: readonly RawCeiling[],
  ownWork: number,
  ceilingRate: number,
  messages: number,
): { figures: Figure[]; notes: string[] } {
  const usPerMsg = (side: 'bare' | 'gateway', role: Role) =>
    medianOf(trials[side], (t) => (t.seconds[role] / messages) * 1e6);
  const coresOf = (side: 'bare' | 'gateway', role: Role | 'all') =>
    medianOf(
      trials[side],
      (t) =>
        (role === 'all' ? ROLES.reduce((a, r) => a + t.seconds[r], 0) : t.seconds[role]) /
        t.wallSec,
    );
  const gateway = usPerMsg('gateway', 'subscriber');
  const bare = usPerMsg('bare', 'subscriber');
  const broker = usPerMsg('bare', 'broker');
  const pub = usPerMsg('bare', 'publisher');
  const insert = median(rawCeilings.map((c) => c.cpuMicrosPerRead));
  const cores = availableParallelism();
  const rate07 = 0.7 * ceilingRate;
  const floorUs = pub + broker + bare + insert;
  const needed = (rate07 * floorUs) / 1e6;
  const insertExactlyOnce = median(rawCeilingsExactlyOnce.map((c) => c.cpuMicrosPerRead));
  const budget = (cores * 1e6) / rate07 - pub - broker;
  const leastOfThisGateway = bare + insertExactlyOnce + ownWork;
  // What the three processes used together when nothing held them back: the ceiling trials.
  const usedCores = coresOf('bare', 'all');
  const budgetUsed = (usedCores * 1e6) / rate07 - pub - broker;
  const us = 'µs/msg';
  const figures: Figure[] = [
    judge({
      name: 'CPU per message, gateway process (all threads)',
      value: gateway,
      unit: us,
      note: 'MqttInput + intake + SQLite, this process, throughput trials',
    }),
    judge({
      name: 'CPU per message, gateway main thread',
      value: medianOf(trials.gateway, (t) => (t.subscriberMainSeconds / messages) * 1e6),
      unit: us,
      note: 'the event loop: mqtt.js, MqttInput, intake, SQLite (the rest of the process: GC helpers, libuv pool)',
    }),
    judge({
      name: 'CPU per message, bare subscriber',
      value: bare,
      unit: us,
      note: 'mqtt.js receive + PUBACK, this process, ceiling trials',
    }),
    judge({ name: 'CPU per message, mosquitto (ceiling trials)', value: broker, unit: us }),
    judge({ name: 'CPU per message, publisher (ceiling trials)', value: pub, unit: us }),
    judge({
      name: 'CPU per message, mosquitto (gateway trials)',
      value: usPerMsg('gateway', 'broker'),
      unit: us,
    }),
    judge({
      name: 'CPU per message, publisher (gateway trials)',
      value: usPerMsg('gateway', 'publisher'),
      unit: us,
    }),
    judge({
      name: 'raw SQLite insert CPU per read (the MQTT rows)',
      value: insert,
      unit: 'µs/read',
      note: `benchmark 1's ceiling on the rows of each gateway trial, ${INTAKE_DEFAULTS.ceilingBatch} reads per transaction; mqtt_messages rows not included`,
    }),
    judge({
      name: 'cores used, gateway process (gateway trials)',
      value: coresOf('gateway', 'subscriber'),
      unit: 'cores',
    }),
    judge({
      name: 'cores used, gateway main thread (gateway trials)',
      value: medianOf(trials.gateway, (t) => t.subscriberMainSeconds / t.wallSec),
      unit: 'cores',
    }),
    judge({
      name: 'gateway main thread waiting for a core (share of the trial)',
      value: medianOf(trials.gateway, (t) => (100 * t.subscriberMainWaitSec) / t.wallSec),
      unit: '%',
      note: "runnable, not running (/proc schedstat): the machine's cores were busy",
    }),
    judge({
      name: 'gateway main thread asleep (share of the trial)',
      value: medianOf(
        trials.gateway,
        (t) => (100 * (t.wallSec - t.subscriberMainRunSec - t.subscriberMainWaitSec)) / t.wallSec,
      ),
      unit: '%',
      note: 'neither running nor runnable: in fsync, or nothing to do (no message, e.g. the in-flight window full)',
    }),
    judge({
      name: 'cores used, mosquitto (gateway trials)',
      value: coresOf('gateway', 'broker'),
      unit: 'cores',
    }),
    judge({
      name: 'cores used, publisher (gateway trials)',
      value: coresOf('gateway', 'publisher'),
      unit: 'cores',
    }),
    judge({
      name: 'cores used, all three (gateway trials)',
      value: coresOf('gateway', 'all'),
      unit: 'cores',
    }),
    judge({
      name: 'cores used, bare subscriber (ceiling trials)',
      value: coresOf('bare', 'subscriber'),
      unit: 'cores',
    }),
    judge({
      name: 'cores used, mosquitto (ceiling trials)',
      value: coresOf('bare', 'broker'),
      unit: 'cores',
    }),
    judge({
      name: 'cores used, publisher (ceiling trials)',
      value: coresOf('bare', 'publisher'),
      unit: 'cores',
    }),
    judge({
      name: 'cores used, all three (ceiling trials)',
      value: coresOf('bare', 'all'),
      unit: 'cores',
    }),
    judge({
      name: 'CPU lower bound at 0.7 × ceiling',
      value: needed,
      unit: 'cores',
      ceiling: { value: cores, what: 'the cores of this machine (os.availableParallelism())' },
      note: `${Math.round(rate07)} msgs/s × (publisher ${pub.toFixed(1)} + broker ${broker.toFixed(1)} + bare subscriber ${bare.toFixed(1)} + raw insert ${insert.toFixed(1)} µs) / 1e6`,
    }),
    judge({
      name: 'gateway CPU budget per message at 0.7 (all its threads)',
      value: budget,
      unit: us,
      ceiling: {
        value: bare + insert,
        what: 'the least any gateway needs: bare subscriber + raw insert',
      },
      note: 'cores × 1e6 / (0.7 × ceiling rate) − publisher − broker; below the ceiling column: 0.7 is out of reach on these cores',
    }),
    judge({
      name: 'raw SQLite insert CPU per read, with its exactly-once row',
      value: insertExactlyOnce,
      unit: 'µs/read',
      note: 'the same rows and the same transactions as the raw insert above, each read with its mqtt_messages row, as the gateway writes them',
    }),
    judge({
      name: "gateway's own work per message, alone",
      value: ownWork,
      unit: us,
      note: "in this process, no broker, no SQLite: the payload's SHA-256 (exactly-once record), payload to read, read to Scan with the example's rules, the Scan's JSON; least of 3 passes",
    }),
    judge({
      name: 'least CPU per message of this gateway at 0.7',
      value: leastOfThisGateway,
      unit: us,
      ceiling: { value: budget, what: 'the gateway CPU budget per message at 0.7 (above)' },
      note: 'bare subscriber + raw insert with the exactly-once rows + own work alone: nothing of the duplicate window, the group commit, the acknowledgements in commit order, back-pressure, counters or logs; a ratio over 1: no gateway doing this work reaches 0.7 on these cores beside this publisher and broker',
    }),
    judge({
      name: 'least CPU per message of this gateway at 0.7, on the cores the ceiling used',
      value: leastOfThisGateway,
      unit: us,
      ceiling: {
        value: budgetUsed,
        what: 'the budget on the cores publisher, broker and bare subscriber used together in the ceiling trials',
      },
      note: `the budget with ${usedCores.toFixed(2)} cores (the most the three processes were seen to use) instead of ${cores}: a ratio over 1: out of reach in practice`,
    }),
    judge({
      name: "one thread's CPU per message at 0.7, at most",
      value: 1e6 / rate07,
      unit: us,
      note: 'a thread cannot use more than one core: each thread of the gateway must stay below this per message',
    }),
  ];
  const notes = [
    `CPU per message (µs) by trial: ${(['bare', 'gateway'] as const)
      .map(
        (side) =>
          `${side}: ${trials[side].map((t) => ROLES.map((r) => `${r} ${((t.seconds[r] / messages) * 1e6).toFixed(1)}`).join(' / ')).join('; ')}`,
      )
      .join('; ')}`,
    `gateway process CPU per message (µs) by thread, by trial: ${trials.gateway
      .map(
        (t) =>
          `main ${((t.subscriberMainSeconds / messages) * 1e6).toFixed(1)}, others ${t.subscriberOtherThreads.map((sec) => ((sec / messages) * 1e6).toFixed(1)).join(' + ')}`,
      )
      .join('; ')}`,
    `raw insert of the MQTT rows: ${rawCeilings.map((c) => `${c.reads} reads, ${c.cpuMicrosPerRead.toFixed(1)} µs CPU/read, ${Math.round(c.readsPerSec)} reads/s`).join('; ')}`,
    `raw insert of the MQTT rows with their exactly-once rows: ${rawCeilingsExactlyOnce.map((c) => `${c.cpuMicrosPerRead.toFixed(1)} µs CPU/read`).join('; ')}`,
    `at 0.7 × ${Math.round(ceilingRate)} msgs/s, a gateway of the least work per message (${leastOfThisGateway.toFixed(1)} µs) would need ${((rate07 * (pub + broker + leastOfThisGateway)) / 1e6).toFixed(2)} cores of ${cores}`,
    `at 0.7 × ${Math.round(ceilingRate)} msgs/s the current gateway would need ${((rate07 * (pub + broker + gateway)) / 1e6).toFixed(2)} cores (publisher + broker + the gateway's ${gateway.toFixed(1)} µs/msg)`,
  ];
  return { figures, notes };
}

/**
 * Pins the broker and the publisher (every thread) to the last core and this process to the
 * others, with util-linux's `taskset`. Answers the pinning, for the notes.
 * @throws Error with fewer than 2 cores, or when taskset is missing or refused.
 */
function pinApart(brokerPid: number, publisherPid: number): string {
  const cores = availableParallelism();
  if (cores < 2) throw new Error(`the fair mode needs at least 2 cores; this machine has ${cores}`);
  const last = cores - 1;
  const own = last === 1 ? '0' : `0-${last - 1}`;
  for (const [pid, list] of [
    [brokerPid, String(last)],
    [publisherPid, String(last)],
    [process.pid, own],
  ] as const) {
    execFileSync('taskset', ['-a', '-p', '-c', list, String(pid)], { stdio: 'ignore' });
  }
  return `fair mode: mosquitto (pid ${brokerPid}) and the publisher (pid ${publisherPid}) pinned to core ${last}, the subscriber sides (this process) to core${own.includes('-') ? 's' : ''} ${own} (taskset -a)`;
}

/** Runs benchmark 2. */
export async function benchMqtt(
  opts: MqttBenchOptions = MQTT_DEFAULTS,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-mqtt-'));
  const broker = await startMosquitto(dir);
  const publisher = startJsonChild('mqtt-publisher.js', [
    JSON.stringify({ url: broker.url, topic: TOPIC }),
  ]);
  try {
    await publisher.next(10_000, 'the publisher to connect');
    const pinning = opts.fair ? pinApart(brokerPid(broker), publisher.pid) : undefined;
    const gatewayRates: number[] = [];
    const groupSizes: number[] = [];
    let latencyGroup = NaN;
    const bareRates: number[] = [];
    const noTimes = () => false;
    // Both sides' subscriber is this process (the bare mqtt.js client, or MqttInput + intake + SQLite).
    const pids: Record<Role, number> = {
      subscriber: process.pid,
      broker: brokerPid(broker),
      publisher: publisher.pid,
    };
    const trialCpu: Record<'bare' | 'gateway', TrialCpu[]> = { bare: [], gateway: [] };
    const rawCeilings: RawCeiling[] = [];
    const rawCeilingsExactlyOnce: RawCeiling[] = [];
    for (const side of opts.warmupMessages > 0 ? (['bare', 'gateway'] as const) : []) {
      const receiver =
        side === 'bare'
          ? await bareSubscriber(broker.url, noTimes)
          : await gatewaySubscriber(broker.url, dir, noTimes);
      try {
        await waitSubscribed(publisher, receiver);
        await throughput(publisher, receiver, opts.warmupMessages, pids);
      } finally {
        await receiver.close();
      }
    }
    for (let t = 0; t < opts.trials; t++) {
      for (const side of ['bare', 'gateway'] as const) {
        const receiver =
          side === 'bare'
            ? await bareSubscriber(broker.url, noTimes)
            : await gatewaySubscriber(broker.url, dir, noTimes);
        try {
          await waitSubscribed(publisher, receiver);
          const trial = await throughput(publisher, receiver, opts.messages, pids);
          (side === 'bare' ? bareRates : gatewayRates).push(trial.rate);
          trialCpu[side].push(trial.cpu);
          if (side === 'gateway') groupSizes.push(opts.messages / receiver.commits());
        } finally {
          await receiver.close();
        }
        if (receiver.dbPath !== undefined) {
          // The SQLite work of the same rows, raw (benchmark 1's ceiling), right after the trial that wrote them.
          const ceilingDir = join(dir, `raw-ceiling-${t}`);
          mkdirSync(ceilingDir);
          rawCeilings.push(
            runRawCeiling(ceilingDir, receiver.dbPath, INTAKE_DEFAULTS.ceilingBatch),
          );
          const exactlyOnceDir = join(dir, `raw-ceiling-exactly-once-${t}`);
          mkdirSync(exactlyOnceDir);
          rawCeilingsExactlyOnce.push(
            runRawCeiling(exactlyOnceDir, receiver.dbPath, INTAKE_DEFAULTS.ceilingBatch, {
              mqttMessages: true,
            }),
          );
        }
      }
    }
    const withTimes = () => true;
    const lat: Record<'bare' | 'gateway', number[]> = { bare: [], gateway: [] };
    for (const side of ['bare', 'gateway'] as const) {
      const receiver =
        side === 'bare'
          ? await bareSubscriber(broker.url, withTimes)
          : await gatewaySubscriber(broker.url, dir, withTimes);
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
    const budget = cpuBudget(
      trialCpu,
      rawCeilings,
      rawCeilingsExactlyOnce,
      ownWorkMicrosPerMessage(opts.messages),
      ceiling,
      opts.messages,
    );
    const figures: Figure[] = [
      judge({
        name: 'MQTT QoS 1 to committed reads',
        value: rate,
        unit: 'reads/s',
        ceiling: {
          value: ceiling,
          what: 'a bare mqtt.js subscriber on the same broker, same publisher',
        },
        targets: [{ kind: 'min', of: 'ratio', value: 0.7 }],
        note: `median of ${opts.trials} trials of ${opts.messages} messages, from the first publish to the last commit`,
      }),
      judge({
        name: `publish → commit p50 at ${opts.latencyRate}/s`,
        value: percentile(lat.gateway, 50),
        unit: 'ms',
        ceiling: {
          value: percentile(lat.bare, 50),
          what: 'publish → receive of the bare subscriber',
        },
      }),
      judge({
        name: `publish → commit p99 at ${opts.latencyRate}/s`,
        value: percentile(lat.gateway, 99),
        unit: 'ms',
        ceiling: {
          value: percentile(lat.bare, 99),
          what: 'publish → receive of the bare subscriber',
        },
        targets: [{ kind: 'max', of: 'value', value: 10 }],
      }),
      judge({
        name: `publish → commit max at ${opts.latencyRate}/s`,
        value: lat.gateway[lat.gateway.length - 1] ?? NaN,
        unit: 'ms',
      }),
      judge({
        name: 'reads per commit (MQTT throughput)',
        value: median(groupSizes),
        unit: 'reads',
      }),
      judge({
        name: `reads per commit at ${opts.latencyRate}/s`,
        value: latencyGroup,
        unit: 'reads',
      }),
      ...budget.figures,
    ];
    return {
      id: opts.fair ? 'mqtt-fair' : 'mqtt',
      title: `End-to-end intake over MQTT (mosquitto, QoS 1, the example's plc-bridge input → intake → SQLite)${opts.fair ? ', the broker and the publisher on a core of their own' : ''}`,
      figures,
      notes: [
        ...(pinning ? [pinning] : []),
        `gateway trials ${gatewayRates.map(Math.round).join(', ')} reads/s; bare subscriber trials ${bareRates.map(Math.round).join(', ')} msgs/s`,
        ...budget.notes,
        `latency over ${lat.gateway.length} messages (${opts.latencySeconds} s at ${opts.latencyRate}/s); bare subscriber p50/p99 ${percentile(lat.bare, 50).toFixed(2)}/${percentile(lat.bare, 99).toFixed(2)} ms`,
      ],
    };
  } finally {
    await publisher.stop();
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
