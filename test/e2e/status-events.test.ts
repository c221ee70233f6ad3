import { execFile, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { makeSandboxTls } from '@scan-gateway/sandbox/kafka';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { startGateway, writeInboxConfig, type GatewayProcess } from '../helpers/gateway-process.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Status events end to end: the compiled gateway as a child process reads the status
 * topic of an in-process sandbox (its real Kafka endpoint: SASL_SSL, SCRAM-SHA-512, its own CA),
 * so the gateway can be killed with SIGKILL while the sandbox goes on publishing.
 */

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const TEN_MINUTES = 600_000;
const STATUS_PATH = /^\/api\/trace\/v3\/scans\/\d+\/status$/;

interface BatchView {
  id: number;
  state: string;
  requestId: string | null;
  upstreamState: string | null;
  processed: number | null;
  finishedAt: string | null;
}
interface Status {
  state: string;
  batches: BatchView[];
  healthProblems: { code: string; severity: string; sentence: string }[];
  statusEvents?: {
    state: string;
    received: number;
    applied: number;
    duplicates: number;
    ignored: number;
    invalid: number;
    lastError?: { code: string };
  };
}

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function sandboxWithKafka(processingDelayMs: number): Promise<RunningSandbox> {
  const sandbox = await startSandbox({ host: '127.0.0.1', port: 0, processingDelayMs });
  cleanups.push(() => sandbox.close());
  return sandbox;
}

function writeConfig(
  dir: string,
  sandbox: RunningSandbox,
  poll: { statusPollMs: number; statusPollMaxMs: number },
  mode: 'direct' | 'presigned' = 'direct',
): string {
  writeFileSync(join(dir, 'kafka-ca.pem'), sandbox.kafka!.caPem);
  mkdirSync(join(dir, 'inbox'), { recursive: true });
  return writeInboxConfig(dir, {
    site: 'events',
    sandboxUrl: sandbox.url,
    upstream: `  statusEvents: { enabled: true, bootstrapServers: [${sandbox.kafka!.bootstrapServers}], environment: sandbox, caFile: ${join(dir, 'kafka-ca.pem')}, safetyPollMs: ${TEN_MINUTES}, staleAfterMs: 10000 }\n`,
    delivery: `mode: ${mode}, maxBatchScans: 20, presignedMaxScans: 20, maxBatchDelayMs: 30, statusPollMs: ${poll.statusPollMs}, statusPollMaxMs: ${poll.statusPollMaxMs}, retryBaseMs: 30, retryMaxMs: 200`,
  });
}

async function gateway(file: string, dir: string): Promise<GatewayProcess> {
  const g = await startGateway(file, { SCAN_GATEWAY_CLIENT_SECRET: SECRET }, dir);
  cleanups.push(() =>
    g.child.exitCode === null && g.child.signalCode === null ? g.kill() : undefined,
  );
  return g;
}

/** Drops a CSV of `rows` reads atomically; with maxBatchScans 20, one batch per 20 rows. */
function dropFile(dir: string, name: string, rows: number): void {
  const lines = [
    'barcode,read_at',
    ...Array.from(
      { length: rows },
      (_, i) => `${name}-${i},2026-11-24T07:00:${String(i % 60).padStart(2, '0')}+01:00`,
    ),
  ];
  writeFileSync(join(dir, 'inbox', `${name}.csv.tmp`), `${lines.join('\n')}\n`);
  renameSync(join(dir, 'inbox', `${name}.csv.tmp`), join(dir, 'inbox', `${name}.csv`));
}

async function status(g: GatewayProcess): Promise<Status> {
  return (await (await fetch(`${g.httpUrl}/api/v1/status`)).json()) as Status;
}

async function requestLog(
  sandbox: RunningSandbox,
): Promise<{ method: string; path: string; status: number; time: string; ms: number }[]> {
  return (
    (await (await fetch(`${sandbox.url}/_sandbox/requests`)).json()) as {
      requests: { method: string; path: string; status: number; time: string; ms: number }[];
    }
  ).requests;
}

const statusPolls = async (sandbox: RunningSandbox) =>
  (await requestLog(sandbox)).filter((r) => r.method === 'GET' && STATUS_PATH.test(r.path)).length;

describe('status events end to end: gateway process, sandbox Kafka endpoint', () => {
  it.each(['direct', 'presigned'] as const)(
    'with polling at 10 minutes, finishes every batch (%s) within 2 s of the sandbox finishing it, without one status request; duplicated events change nothing',
    async (mode) => {
      const processingMs = 1500;
      const sandbox = await sandboxWithKafka(processingMs);
      sandbox.setFaults({ kafkaDuplicateRate: 1 });
      const dir = mkdtempSync(join(tmpdir(), 'sg-events-e2e-'));
      const g = await gateway(
        writeConfig(
          dir,
          sandbox,
          { statusPollMs: TEN_MINUTES, statusPollMaxMs: TEN_MINUTES },
          mode,
        ),
        dir,
      );
      await waitFor(async () => (await status(g)).statusEvents?.state === 'flowing', {
        what: 'events flowing',
        timeoutMs: 30_000,
      });
      dropFile(dir, 'a', 50);
      dropFile(dir, 'b', 30);
      const done = await waitFor(
        async () => {
          const s = await status(g);
          return s.batches.every((b) => b.state === 'done') &&
            s.batches.reduce((n, b) => n + (b.processed ?? 0), 0) === 80
            ? s
            : undefined;
        },
        { what: 'every batch done, 80 scans processed', timeoutMs: 30_000 },
      );
      expect(done.batches.every((b) => b.upstreamState === 'Success')).toBe(true);
      expect(done.batches.length).toBeGreaterThanOrEqual(4);

      // The sandbox finishes a batch processingMs after it received it, so no earlier than the start
      // of the POST (or pre-signed PUT) that brought it: finishedAt - (its start + processingMs) bounds the delay.
      // A poll would come after ten minutes: 10 s tells the event from it on however busy a machine.
      const upload = (r: { method: string; path: string }) =>
        mode === 'direct'
          ? r.method === 'POST' && r.path === '/api/trace/v3/scans'
          : r.method === 'PUT' && r.path.startsWith('/_presigned/');
      const posts = (await requestLog(sandbox)).filter((r) => upload(r) && r.status < 300);
      expect(posts).toHaveLength(done.batches.length);
      const postStarts = posts.map((p) => Date.parse(p.time) - p.ms - 1).sort((x, y) => x - y);
      const finished = done.batches.map((b) => Date.parse(b.finishedAt!)).sort((x, y) => x - y);
      finished.forEach((f, i) =>
        expect(
          f - (postStarts[i]! + processingMs),
          `batch ${i}: ms after the sandbox finished it`,
        ).toBeLessThan(10_000),
      );
      expect(await statusPolls(sandbox)).toBe(0);

      // Every state was published twice: the repeats were read and changed nothing.
      const events = await waitFor(async () => {
        const e = (await status(g)).statusEvents!;
        // Received, InProgress and Success of each batch, each twice.
        return e.received === e.applied + e.duplicates + e.ignored + e.invalid &&
          e.received >= 6 * done.batches.length
          ? e
          : undefined;
      });
      expect(events).toMatchObject({ ignored: 0, invalid: 0 });
      expect(events.duplicates).toBeGreaterThanOrEqual(done.batches.length);
      const again = await status(g);
      expect(again.batches).toEqual(done.batches);
      expect(again.state).toBe('ok');
    },
  );

  it('loses no outcome when killed with SIGKILL while events are pending: after the restart every batch is finished from the events published meanwhile', async () => {
    const processingMs = 3000;
    const sandbox = await sandboxWithKafka(processingMs);
    const dir = mkdtempSync(join(tmpdir(), 'sg-events-kill-'));
    const file = writeConfig(dir, sandbox, {
      statusPollMs: TEN_MINUTES,
      statusPollMaxMs: TEN_MINUTES,
    });
    const first = await gateway(file, dir);
    await waitFor(async () => (await status(first)).statusEvents?.state === 'flowing', {
      what: 'events flowing',
      timeoutMs: 30_000,
    });
    dropFile(dir, 'k', 60);
    const uploaded = await waitFor(
      async () => {
        const s = await status(first);
        return s.batches.length === 3 && s.batches.every((b) => b.state === 'uploaded')
          ? s.batches
          : undefined;
      },
      { what: 'three batches uploaded', timeoutMs: 30_000 },
    );
    await first.kill();
    // The sandbox finishes them (and publishes Received/InProgress/Success) while the gateway is dead.
    await new Promise((r) => setTimeout(r, processingMs + 500));
    const second = await gateway(file, dir);
    const done = await waitFor(
      async () => {
        const s = await status(second);
        return s.batches.length === 3 && s.batches.every((b) => b.state === 'done') ? s : undefined;
      },
      { what: 'every batch done after the restart', timeoutMs: 30_000 },
    );
    expect(done.batches.map((b) => b.requestId).sort()).toEqual(
      uploaded.map((b) => b.requestId).sort(),
    );
    expect(done.batches.every((b) => b.upstreamState === 'Success' && b.processed === 20)).toBe(
      true,
    );
    expect(done.statusEvents!.applied).toBeGreaterThanOrEqual(3);
    expect(await statusPolls(sandbox)).toBe(0);
  });

  it('lets polling take over while the broker is down or refuses the secret, with the reason and its code on the health, and goes back to events', async () => {
    const sandbox = await sandboxWithKafka(300);
    const dir = mkdtempSync(join(tmpdir(), 'sg-events-down-'));
    const g = await gateway(
      writeConfig(dir, sandbox, { statusPollMs: 200, statusPollMaxMs: 400 }),
      dir,
    );
    await waitFor(async () => (await status(g)).statusEvents?.state === 'flowing', {
      what: 'events flowing',
      timeoutMs: 30_000,
    });
    dropFile(dir, 'up', 5);
    await waitFor(async () => (await status(g)).batches.some((b) => b.state === 'done'), {
      what: 'first batch done by its event',
    });
    expect(await statusPolls(sandbox)).toBe(0);

    sandbox.setFaults({ kafkaDown: true });
    const down = await waitFor(
      async () => {
        const s = await status(g);
        return s.statusEvents?.state === 'down' ? s : undefined;
      },
      { what: 'the outage on the status', timeoutMs: 30_000 },
    );
    expect(down.statusEvents!.lastError!.code).toBe('SCANGW_E_EVENTS_NETWORK');
    expect(down.state).toBe('degraded');
    expect(down.healthProblems).toContainEqual(
      expect.objectContaining({ code: 'SCANGW_E_EVENTS_NETWORK', severity: 'degraded' }),
    );
    dropFile(dir, 'down', 5);
    await waitFor(
      async () => (await status(g)).batches.filter((b) => b.state === 'done').length === 2,
      { what: 'second batch done by polling', timeoutMs: 30_000 },
    );
    expect(await statusPolls(sandbox)).toBeGreaterThan(0);
    expect(g.output()).toMatch(/"source":"poll"[^\n]*"msg":"batch processed"/);

    sandbox.setFaults({ kafkaDown: false, kafkaSaslRefused: true });
    const refused = await waitFor(
      async () => {
        const s = await status(g);
        return s.statusEvents?.lastError?.code === 'SCANGW_E_EVENTS_AUTH' ? s : undefined;
      },
      { what: 'SASL refused on the status', timeoutMs: 30_000 },
    );
    expect(refused.healthProblems).toContainEqual(
      expect.objectContaining({ code: 'SCANGW_E_EVENTS_AUTH', severity: 'degraded' }),
    );
    expect(g.output()).not.toContain(SECRET);

    sandbox.setFaults({ kafkaSaslRefused: false });
    const back = await waitFor(
      async () => {
        const s = await status(g);
        return s.statusEvents?.state === 'flowing' ? s : undefined;
      },
      { what: 'events flowing again', timeoutMs: 40_000 },
    );
    expect(back.healthProblems.filter((p) => p.code.startsWith('SCANGW_E_EVENTS'))).toEqual([]);
  });

  it('counts events of other requestIds as ignored and events that are not a status object as invalid (one log line), and keeps applying the others', async () => {
    const sandbox = await sandboxWithKafka(1000);
    const dir = mkdtempSync(join(tmpdir(), 'sg-events-bad-'));
    const g = await gateway(
      writeConfig(dir, sandbox, { statusPollMs: TEN_MINUTES, statusPollMaxMs: TEN_MINUTES }),
      dir,
    );
    await waitFor(async () => (await status(g)).statusEvents?.state === 'flowing', {
      what: 'events flowing',
      timeoutMs: 30_000,
    });
    sandbox.kafka!.appendRaw('demo-client', [
      { key: null, value: 'not json {' },
      { key: '1', value: null },
      {
        key: '2',
        value: JSON.stringify({ state: 'Exploded', requestId: 2, description: '', processed: 0 }),
      },
      {
        key: '3',
        value: JSON.stringify({ state: 'Success', description: 'no requestId', processed: 1 }),
      },
      {
        key: '99',
        value: JSON.stringify({
          state: 'Success',
          requestId: 99_000_001,
          description: 'another gateway',
          processed: 1,
        }),
      },
    ]);
    // Read before any upload is in flight: an unknown requestId during an upload is held a while (it may be ours).
    await waitFor(async () => (await status(g)).statusEvents?.received === 5, {
      what: 'the five read',
    });
    dropFile(dir, 'after', 3);
    const s = await waitFor(
      async () => {
        const now = await status(g);
        return now.batches.some((b) => b.state === 'done') ? now : undefined;
      },
      { what: 'a batch finished by its event after the bad ones', timeoutMs: 30_000 },
    );
    expect(s.statusEvents).toMatchObject({ invalid: 4, ignored: 1 });
    expect(
      g
        .output()
        .split('\n')
        .filter((l) => l.includes('not a status object')),
    ).toHaveLength(1);
    expect(await statusPolls(sandbox)).toBe(0);
  });

  it('refused at the start (a CA that did not sign the brokers; a topic that does not exist): the health says why with its code, and polling finishes the batches', async () => {
    const sandbox = await sandboxWithKafka(200);
    const otherCa = (await makeSandboxTls()).caPem;
    for (const [name, change, code] of [
      [
        'tls',
        (text: string, dir: string) =>
          text.replace(
            `caFile: ${join(dir, 'kafka-ca.pem')}`,
            `caFile: ${join(dir, 'other-ca.pem')}`,
          ),
        'SCANGW_E_EVENTS_TLS',
      ],
      [
        'topic',
        (text: string) => text.replace('environment: sandbox', 'environment: production'),
        'SCANGW_E_EVENTS_TOPIC',
      ],
    ] as const) {
      const dir = mkdtempSync(join(tmpdir(), `sg-events-${name}-`));
      const file = writeConfig(dir, sandbox, { statusPollMs: 200, statusPollMaxMs: 400 });
      writeFileSync(join(dir, 'other-ca.pem'), otherCa);
      writeFileSync(file, change(readFileSync(file, 'utf8'), dir));
      const g = await gateway(file, dir);
      const s = await waitFor(
        async () => {
          const now = await status(g);
          return now.statusEvents?.state === 'down' ? now : undefined;
        },
        { what: `${name}: refused on the status`, timeoutMs: 30_000 },
      );
      expect(s.statusEvents!.lastError!.code).toBe(code);
      expect(s.healthProblems).toContainEqual(
        expect.objectContaining({ code, severity: 'degraded' }),
      );
      dropFile(dir, name, 3);
      await waitFor(async () => (await status(g)).batches.some((b) => b.state === 'done'), {
        what: `${name}: batch done by polling`,
        timeoutMs: 30_000,
      });
      await g.stop();
    }
    expect(await statusPolls(sandbox)).toBeGreaterThanOrEqual(2);
  });

  it('applies an event that kcat produces on the topic over SASL_SSL', async () => {
    const kcat = spawnSync('sh', ['-c', 'command -v kcat'], { encoding: 'utf8' }).stdout.trim();
    expect(kcat, 'kcat is needed (Debian package kcat; .ci/run installs it)').not.toBe('');
    // The sandbox would take a minute: the outcome comes from kcat first.
    const sandbox = await sandboxWithKafka(60_000);
    const dir = mkdtempSync(join(tmpdir(), 'sg-events-kcat-'));
    const g = await gateway(
      writeConfig(dir, sandbox, { statusPollMs: TEN_MINUTES, statusPollMaxMs: TEN_MINUTES }),
      dir,
    );
    await waitFor(async () => (await status(g)).statusEvents?.state === 'flowing', {
      what: 'events flowing',
      timeoutMs: 30_000,
    });
    dropFile(dir, 'kc', 3);
    const batch = await waitFor(
      async () => (await status(g)).batches.find((b) => b.state === 'uploaded'),
      { what: 'batch uploaded' },
    );
    const info = (await (await fetch(`${sandbox.url}/_sandbox/kafka`)).json()) as {
      bootstrapServers: string;
      topic: string;
      caPem: string;
    };
    writeFileSync(join(dir, 'ca.pem'), info.caPem);
    writeFileSync(
      join(dir, 'kcat.conf'),
      [
        `bootstrap.servers=${info.bootstrapServers}`,
        'security.protocol=SASL_SSL',
        'sasl.mechanisms=SCRAM-SHA-512',
        'sasl.username=demo-client',
        `sasl.password=${SECRET}`,
        `ssl.ca.location=${join(dir, 'ca.pem')}`,
      ].join('\n'),
      { mode: 0o600 },
    );
    const event = {
      state: 'HasFailures',
      requestId: Number(batch.requestId),
      description: 'from kcat',
      processed: 3,
      failed: 1,
      failures: [{ reference: 'kc-1', reason: 'Invalid DCP' }],
    };
    await new Promise<void>((resolve, reject) => {
      const child = execFile(
        kcat,
        ['-F', join(dir, 'kcat.conf'), '-P', '-t', info.topic],
        { timeout: 120_000 },
        (err, _out, stderr) =>
          err ? reject(new Error(`kcat: ${err.message} ${stderr}`)) : resolve(),
      );
      child.stdin!.end(`${JSON.stringify(event)}\n`);
    });
    const done = await waitFor(
      async () => (await status(g)).batches.find((b) => b.id === batch.id && b.state === 'done'),
      { what: "kcat's event applied" },
    );
    expect(done).toMatchObject({ upstreamState: 'HasFailures', processed: 3 });
    expect(await statusPolls(sandbox)).toBe(0);
  });
});
