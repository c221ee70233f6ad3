import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import mqtt from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startMosquitto, type Broker } from '../helpers/mosquitto.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The gateway's MQTT path (buffer, intake, MQTT input: the compiled parts the daemon runs) in a
 * child process that SIGKILLs itself from the input's `onCommitted` seam: right after the Nth
 * read is committed and before its PUBACK is written. That is the window in which a crash made
 * the broker send a committed message again; here it is hit every time, not by chance.
 */
const CHILD = `
const [dist, db, url, topicFilter, clientId, killAfter] = process.argv.slice(1);
const load = (p) => import(new URL(p, dist).href);
const { BufferStore } = await load('src/buffer/store.js');
const { Intake } = await load('src/intake/intake.js');
const { MqttInput } = await load('src/inputs/mqtt/mqtt-input.js');
const { mqttInputSchema } = await load('src/inputs/mqtt/schema.js');
// A configuration is read only once the input kinds are registered (src/inputs/registry.ts).
await load('src/inputs/registry.js');
const { parseConfigText } = await load('src/config/load.js');
const { mappingContext } = await load('src/mapping/map-read.js');
const { silentLogger } = await load('src/log.js');
const yaml = \`site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps:
  - { key: L1, kind: startOfProcess, productModelKey: PACK-A, duplicateWindowMs: 0 }
  - { key: W1, kind: startOfProcess, productModelKey: PACK-A, duplicateWindowMs: 600000 }
inputs:
  - { id: mq, type: mqtt, url: mqtt://127.0.0.1:1, topics: [x], clientId: x, dcp: L1 }
\`;
const store = BufferStore.openAt(db);
const intake = new Intake({ store, mapping: mappingContext(parseConfigText(yaml, 'crash.yaml')), logger: silentLogger() });
intake.open();
const config = mqttInputSchema.parse({ id: 'mq', type: 'mqtt', url, topics: [topicFilter], clientId, dcp: 'L1', dcpFromTopic: 'crash/{dcp}/scans', reconnectMs: 200 });
const counters = () => process.stdout.write(JSON.stringify(intake.countersFor('mq')) + '\\n');
let commits = 0;
const input = new MqttInput({
  config, sink: intake, logger: silentLogger(),
  onCommitted: () => {
    if (++commits !== Number(killAfter)) return;
    counters(); // a pipe: written synchronously, before the kill
    process.kill(process.pid, 'SIGKILL');
  },
});
await input.start();
process.stdout.write('up\\n');
process.on('SIGTERM', async () => {
  await input.stop();
  intake.close();
  counters();
  store.close();
  process.exit(0);
});
`;

const DIST = join(PACKAGE_ROOT, 'dist/');

interface Child {
  /** Resolves with the counters the child printed last, when it exits (killed by itself, or stopped). */
  exited: Promise<{
    signal: NodeJS.Signals | null;
    counters: { scans: number; redelivered: number } | undefined;
    output: string;
  }>;
  up: Promise<void>;
  stop(): void;
}

function startChild(db: string, url: string, clientId: string, killAfter: number): Child {
  const child = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      CHILD,
      pathToFileURL(DIST).href,
      db,
      url,
      'crash/+/scans',
      clientId,
      String(killAfter),
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<{
    signal: NodeJS.Signals | null;
    counters: { scans: number; redelivered: number } | undefined;
    output: string;
  }>((resolve) =>
    child.once('exit', (_code, signal) => {
      const last = output
        .trim()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .at(-1);
      resolve({
        signal,
        counters: last ? (JSON.parse(last) as { scans: number; redelivered: number }) : undefined,
        output,
      });
    }),
  );
  const up = new Promise<void>((resolve, reject) => {
    const check = () => output.includes('up\n') && resolve();
    child.stdout.on('data', check);
    void exited.then(() => reject(new Error(`child exited before it was up:\n${output}`)));
  });
  return { exited, up, stop: () => child.kill('SIGTERM') };
}

describe('MQTT: the gateway killed (SIGKILL) between commit and PUBACK, again and again', () => {
  let broker: Broker;

  beforeAll(async () => {
    if (!existsSync(join(DIST, 'src/inputs/mqtt/mqtt-input.js')))
      throw new Error('dist/ is missing: run `npm run build` (npm test does) first');
    broker = await startMosquitto(mkdtempSync(join(tmpdir(), 'sg-crash-broker-')));
  });
  afterAll(async () => {
    await broker?.stop();
  });

  it('stores every message exactly once, counts each resend it recognised, and still stores genuine repeats', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-mqtt-crash-'));
    const db = join(dir, 'buffer.db');
    const clientId = 'sg-crash-gateway';
    const kills = [15, 40, 1, 25, 50, 7];
    const pub = await mqtt.connectAsync(broker.url, {
      clientId: 'sg-crash-publisher',
      protocolVersion: 5,
    });
    const expected: string[] = [];
    /** 50 new codes and a label scanned again ('AGAIN', a new message with the same payload each time). */
    const publishBatch = async (batch: number): Promise<void> => {
      for (let i = 0; i < 50; i++) {
        const code = `K-${batch}-${String(i).padStart(2, '0')}`;
        expected.push(code);
        await pub.publishAsync('crash/L1/scans', code, { qos: 1 });
        if (i === 25) {
          expected.push('AGAIN');
          await pub.publishAsync('crash/L1/scans', 'AGAIN', { qos: 1 });
        }
      }
    };

    const runs: {
      signal: NodeJS.Signals | null;
      counters: { scans: number; redelivered: number } | undefined;
      output: string;
    }[] = [];
    for (const [run, killAfter] of kills.entries()) {
      const child = startChild(db, broker.url, clientId, killAfter);
      // The first run makes the persistent session; later batches wait in it for the next run.
      if (run === 0) await child.up;
      await publishBatch(run);
      runs.push(await child.exited);
    }
    // The last run is not killed: it takes the last batch, and the resends of the last kill.
    await publishBatch(kills.length);
    await pub.endAsync();
    const child = startChild(db, broker.url, clientId, 0);
    await child.up;
    const stored = () => {
      const buffer = new Database(db, { readonly: true });
      try {
        return buffer.prepare(`SELECT raw FROM reads ORDER BY id`).pluck().all() as Buffer[];
      } finally {
        buffer.close();
      }
    };
    // A ceiling that only catches a hang; the checks below say what is missing.
    const deadline = Date.now() + 60_000;
    while (stored().length < expected.length && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 500)); // a late resend, were there one
    child.stop();
    runs.push(await child.exited);

    // Every kill came from the seam (right after a commit, before its PUBACK) …
    expect(runs.slice(0, kills.length).map((r) => r.signal)).toEqual(kills.map(() => 'SIGKILL'));
    // … and every run after a kill recognised at least the message committed just before it.
    for (const run of runs.slice(1))
      expect(run.counters?.redelivered ?? 0, run.output).toBeGreaterThanOrEqual(1);
    const codes = stored().map((b) => b.toString());
    expect(codes.slice().sort()).toEqual(expected.slice().sort());
    expect(codes.filter((c) => c === 'AGAIN')).toHaveLength(kills.length + 1);
    expect(codes).toHaveLength(expected.length);
  });

  it('keeps the duplicate window across a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-mqtt-window-'));
    const db = join(dir, 'buffer.db');
    const clientId = 'sg-window-gateway';
    let child = startChild(db, broker.url, clientId, 0);
    await child.up;
    const pub = await mqtt.connectAsync(broker.url, {
      clientId: 'sg-window-publisher',
      protocolVersion: 5,
    });
    // Every read is a row of reads, a duplicate too: the child is stopped once it has taken it.
    const reads = () => {
      const buffer = new Database(db, { readonly: true });
      try {
        return buffer.prepare(`SELECT count(*) FROM reads`).pluck().get() as number;
      } finally {
        buffer.close();
      }
    };
    await pub.publishAsync('crash/W1/scans', 'LABEL-1', { qos: 1 });
    await waitFor(() => reads() === 1, { what: 'LABEL-1 taken' });
    child.stop();
    expect((await child.exited).counters).toMatchObject({ scans: 1 });
    child = startChild(db, broker.url, clientId, 0);
    await child.up;
    // The same label at the same DCP again, within its 10-minute window: a duplicate, not a second scan.
    await pub.publishAsync('crash/W1/scans', 'LABEL-1', { qos: 1 });
    await pub.endAsync();
    await waitFor(() => reads() === 2, { what: 'LABEL-1 taken again' });
    child.stop();
    expect((await child.exited).counters).toMatchObject({ scans: 0, duplicates: 1 });
  });
});
