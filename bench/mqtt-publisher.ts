import { connect } from 'mqtt';
import { readCommands, reply } from './lib/child.js';
import { plcText } from './lib/reads.js';

/**
 * The publisher of the MQTT benchmark, in a process of its own so that publishing does not share
 * an event loop with the subscriber being measured. `node dist/bench/mqtt-publisher.js '<json>'`
 * with `{ url, topic }`; then, per JSON line on stdin:
 * - `{ burst: N }`: publishes N QoS 1 messages as fast as the broker takes them (payloads are cell
 *   codes as the example's PLC bridge sends them); answers `{ startedAt, publishedAt, ackedAt }` (epoch ms).
 * - `{ steady: { rate, seconds, prefix } }`: publishes `rate` messages per second (`prefix` + the
 *   sequence number in 10 digits), answers `{ sends: [epoch ms of each publish] }` once all are acknowledged.
 * - `{ probe: text }`: one message, answers `{ probed: true }` once acknowledged.
 */

interface Setup {
  url: string;
  topic: string;
}

const setup = JSON.parse(process.argv[2] ?? '{}') as Setup;
const epochMs = (): number => performance.timeOrigin + performance.now();
const client = connect(setup.url, {
  protocolVersion: 5,
  clientId: `bench-pub-${process.pid}`,
  clean: true,
  reconnectPeriod: 0,
});
client.on('error', (err) => {
  process.stderr.write(`publisher: ${err.message}\n`);
  process.exit(1);
});

function publish(payload: string): Promise<void> {
  return new Promise((resolve, reject) =>
    client.publish(setup.topic, payload, { qos: 1 }, (err) => (err ? reject(err) : resolve())),
  );
}

async function burst(n: number): Promise<void> {
  const startedAt = epochMs();
  const acks: Promise<void>[] = [];
  for (let i = 0; i < n; i++) {
    acks.push(publish(plcText(i)));
    // Let the socket drain now and then instead of queueing every packet in memory first.
    if (i % 500 === 499) await new Promise((resolve) => setImmediate(resolve));
  }
  const publishedAt = epochMs();
  await Promise.all(acks);
  reply({ startedAt, publishedAt, ackedAt: epochMs() });
}

async function steady(rate: number, seconds: number, prefix: string): Promise<void> {
  const total = Math.round(rate * seconds);
  const sends: number[] = [];
  const acks: Promise<void>[] = [];
  const start = performance.now();
  while (sends.length < total) {
    const due = Math.min(total, Math.floor(((performance.now() - start) * rate) / 1000) + 1);
    while (sends.length < due) {
      const seq = sends.length;
      sends.push(epochMs());
      acks.push(publish(`${prefix}${String(seq).padStart(10, '0')}`));
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await Promise.all(acks);
  reply({ sends });
}

client.once('connect', () => {
  reply({ ready: true });
  readCommands<{
    burst?: number;
    steady?: { rate: number; seconds: number; prefix: string };
    probe?: string;
  }>(
    (command) => {
      const run =
        command.burst !== undefined
          ? burst(command.burst)
          : command.steady
            ? steady(command.steady.rate, command.steady.seconds, command.steady.prefix)
            : publish(command.probe ?? 'probe').then(() => reply({ probed: true }));
      run.catch((err: unknown) => {
        process.stderr.write(`publisher: ${String(err)}\n`);
        process.exit(1);
      });
    },
    () => client.end(true, () => process.exit(0)),
  );
});
