import { startSandbox, type SandboxOptions } from '@scan-gateway/sandbox';
import { reply } from './lib/child.js';

/**
 * The upstream sandbox in a process of its own, for the drain, batch-fill and footprint benchmarks:
 * `node dist/bench/sandbox-child.js '<SandboxOptions JSON>'`. Writes `{ "url": …, "kafka"?: {
 * "bootstrapServers", "caPem", "topic" } }` once listening on free ports (`kafka`: its status-event
 * broker and the demo client's topic, unless the options turn it off), closes on SIGTERM or when
 * stdin ends (the benchmark died).
 */
const options = JSON.parse(process.argv[2] ?? '{}') as SandboxOptions;
const sandbox = await startSandbox({ host: '127.0.0.1', port: 0, ...options });
const topic = sandbox.kafka?.info('demo-client')?.topic;
reply({
  url: sandbox.url,
  ...(sandbox.kafka && topic
    ? {
        kafka: {
          bootstrapServers: sandbox.kafka.bootstrapServers,
          caPem: sandbox.kafka.caPem,
          topic,
        },
      }
    : {}),
});

const close = () => {
  void sandbox.close().finally(() => process.exit(0));
};
process.once('SIGTERM', close);
process.stdin.on('end', close);
process.stdin.resume();
