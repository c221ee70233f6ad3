import { connect } from 'mqtt';
import { readCommands, reply } from './lib/child.js';

/**
 * The publisher of the soak benchmark, in a process of its own (its event loop and memory are not
 * the gateway's): `node dist/bench/soak-publisher.js '<json>'` with `{ url, topic, rate, seconds,
 * prefix }`. Connects, answers `{ ready: true }`, then on the JSON line `{ start: true }` publishes
 * `rate` QoS 1 messages a second for `seconds` (`prefix` + the sequence number in 10 digits, so each
 * read is unique and the gateway can be checked for every one). `{ stats: true }` answers
 * `{ published, acked, total }` at any time (all done when `acked === total`). Counters only, no per-message record: 30 minutes at
 * 500/s is 900,000 messages, and the publisher's memory must stay flat too. An error (the broker
 * refused or dropped the connection) ends the process with code 1: the benchmark then fails.
 */

interface Setup {
  url: string;
  topic: string;
  rate: number;
  seconds: number;
  prefix: string;
}

const setup = JSON.parse(process.argv[2] ?? '{}') as Setup;
const total = Math.round(setup.rate * setup.seconds);
let published = 0;
let acked = 0;
let finished = false;

const client = connect(setup.url, {
  protocolVersion: 5,
  clientId: `bench-soak-pub-${process.pid}`,
  clean: true,
  reconnectPeriod: 0,
});
const fail = (why: string): never => {
  process.stderr.write(`soak publisher: ${why}\n`);
  process.exit(1);
};
client.on('error', (err) => fail(err.message));
client.on('close', () => {
  if (!finished)
    fail(`the connection to the broker closed after ${published} published, ${acked} acknowledged`);
});

function onAck(err?: Error): void {
  if (err) fail(`publish failed: ${err.message}`);
  acked++;
}

/** Publishes what is due since `start` at `rate`/s, every millisecond or so (the timer's resolution). */
function run(): void {
  const start = performance.now();
  const tick = (): void => {
    const due = Math.min(total, Math.floor(((performance.now() - start) * setup.rate) / 1000) + 1);
    while (published < due) {
      client.publish(
        setup.topic,
        `${setup.prefix}${String(published).padStart(10, '0')}`,
        { qos: 1 },
        onAck,
      );
      published++;
    }
    if (published < total) setTimeout(tick, 1);
  };
  tick();
}

client.once('connect', () => {
  reply({ ready: true });
  readCommands<{ start?: boolean; stats?: boolean }>(
    (command) => {
      if (command.start) run();
      if (command.stats) reply({ published, acked, total });
    },
    () => {
      finished = true;
      client.end(true, () => process.exit(0));
    },
  );
});
