import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import {
  loadSandboxConfig,
  startSandbox,
  type RunningSandbox,
  type SandboxKafkaInfo,
} from '@scan-gateway/sandbox';
import { makeSandboxTls } from '@scan-gateway/sandbox/kafka';
import { kcat, kcatSasl } from '../helpers/kcat.js';
import { waitFor } from '../helpers/wait.js';

// Interop of the sandbox's Kafka endpoint with the reference client, librdkafka through Debian's
// kcat: SASL_SSL with SCRAM-SHA-512 and the sandbox's own CA, consuming with and without a
// consumer group, producing, and the refusals (wrong password, wrong CA, injected faults).

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const SCAN = {
  reference: 'R-1',
  timeStamp: '2025-01-02T03:04:05',
  dcpKey: 'GI-01',
  productModelKey: 'PACK-A',
  parents: [],
  attributes: [],
};

let sandbox: RunningSandbox;
let info: SandboxKafkaInfo;
let dir: string;
let caFile: string;
let token: string;

async function call(method: string, path: string, body?: unknown) {
  const res = await request(`${sandbox.url}${path}`, {
    method: method as 'GET',
    headers: {
      authorization: `Bearer ${token}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.statusCode, json: (await res.body.json()) as Record<string, unknown> };
}

/** Uploads one batch directly and waits for its terminal state; gives the final status answer. */
async function batchToTheEnd(scans: unknown[] = [SCAN]): Promise<Record<string, unknown>> {
  const upload = await call('POST', '/api/trace/v3/scans', scans);
  expect(upload.status).toBe(202);
  const requestId = String(upload.json.requestId);
  return waitFor(async () => {
    const status = (await call('GET', `/api/trace/v3/scans/${requestId}/status`)).json;
    return status.state === 'Received' || status.state === 'InProgress' ? undefined : status;
  });
}

const sasl = (password = SECRET, ca = caFile) =>
  kcatSasl(info.bootstrapServers, 'demo-client', password, ca);

/** Every event of the topic from the beginning, as [key, value] pairs (kcat without a group). */
async function readAll(): Promise<Array<[string, string]>> {
  const run = await kcat([
    ...sasl(),
    '-C',
    '-t',
    info.topic,
    '-o',
    'beginning',
    '-e',
    '-q',
    '-f',
    '%k\\t%s\\n',
  ]);
  expect(run.code, run.stderr).toBe(0);
  return run.stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.split('\t') as [string, string]);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sandbox-kafka-'));
  sandbox = await startSandbox({ port: 0, processingDelayMs: 300 });
  const res = await request(`${sandbox.url}/_sandbox/kafka`);
  info = (await res.body.json()) as SandboxKafkaInfo;
  caFile = join(dir, 'sandbox-ca.pem');
  writeFileSync(caFile, info.caPem);
  const form = new URLSearchParams({
    client_id: 'demo-client',
    client_secret: SECRET,
    grant_type: 'client_credentials',
  }).toString();
  const t = await request(`${sandbox.url}/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: form,
  });
  token = ((await t.body.json()) as { access_token: string }).access_token;
});
afterAll(async () => {
  await sandbox?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('GET /_sandbox/kafka', () => {
  it('tells a client where and how to connect, with the CA the sandbox made at start', async () => {
    expect(Object.keys(info).sort()).toEqual([
      'bootstrapServers',
      'caPem',
      'saslMechanism',
      'securityProtocol',
      'topic',
    ]);
    expect(info).toMatchObject({
      topic: 'sandbox-demo-client-status-event',
      securityProtocol: 'SASL_SSL',
      saslMechanism: 'SCRAM-SHA-512',
    });
    expect(info.bootstrapServers).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(info.bootstrapServers).toBe(sandbox.kafka?.bootstrapServers);
    expect(info.caPem).toMatch(/^-----BEGIN CERTIFICATE-----/);
    const unknown = await request(`${sandbox.url}/_sandbox/kafka?clientId=nobody`);
    expect(unknown.statusCode).toBe(404);
    await unknown.body.dump();
  });
});

describe('kcat against the sandbox (SASL_SSL, SCRAM-SHA-512, the sandbox CA)', () => {
  it("lists the one broker and the client's one topic", async () => {
    const run = await kcat([...sasl(), '-L', '-J']);
    expect(run.code, run.stderr).toBe(0);
    const meta = JSON.parse(run.stdout) as {
      brokers: Array<{ name: string }>;
      topics: Array<{ topic: string; partitions: unknown[] }>;
    };
    expect(meta.brokers.map((b) => b.name)).toEqual([info.bootstrapServers]);
    expect(meta.topics.map((t) => [t.topic, t.partitions.length])).toEqual([[info.topic, 1]]);
  });

  it('consumes one event per state change of a direct batch, key = requestId, value = the status answer', async () => {
    const final = await batchToTheEnd();
    const requestId = String(final.requestId);
    const events = await waitFor(async () => {
      const mine = (await readAll()).filter(([k]) => k === requestId);
      return mine.length >= 3 ? mine : undefined;
    });
    const payloads = events.map(([, v]) => JSON.parse(v) as Record<string, unknown>);
    expect(payloads.map((p) => p.state)).toEqual(['Received', 'InProgress', 'Success']);
    expect(payloads[2]).toEqual(final);
    expect(payloads[0]).toEqual({
      state: 'Received',
      requestId: Number(requestId),
      description: 'Upload received, waiting to be processed',
      processed: 0,
    });
  });

  it('publishes the batches of pre-signed uploads too, failures included', async () => {
    const presigned = await call('POST', '/api/trace/v3/scans/preSignedUrl');
    const requestId = String(presigned.json.requestId);
    const put = await request(String(presigned.json.url), {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([{ ...SCAN, dcpKey: 'XX-99' }]),
    });
    expect(put.statusCode).toBe(200);
    await put.body.dump();
    const last = await waitFor(async () => {
      const mine = (await readAll())
        .filter(([k]) => k === requestId)
        .map(([, v]) => JSON.parse(v) as Record<string, unknown>);
      return mine.at(-1)?.state === 'Failed' ? mine.at(-1) : undefined;
    });
    const status = (await call('GET', `/api/trace/v3/scans/${requestId}/status`)).json;
    expect(last).toEqual(status);
    expect(last).toMatchObject({
      failed: 1,
      failures: [{ reference: 'R-1', reason: 'Invalid DCP' }],
    });
  });

  it('consumes with a consumer group (-G): committed offsets carry over to the next run of the group', async () => {
    await batchToTheEnd();
    const group = [
      '-G',
      'kcat-group',
      '-X',
      'auto.offset.reset=earliest',
      '-e',
      '-q',
      '-f',
      '%k\\t%s\\n',
      info.topic,
    ];
    const first = await kcat([...sasl(), ...group]);
    expect(first.code, first.stderr).toBe(0);
    const all = await readAll();
    expect(first.stdout.trim().split('\n')).toHaveLength(all.length);

    // Offsets were committed at the end of the first run: the second run starts after them.
    const fresh = await batchToTheEnd();
    const second = await waitFor(async () => {
      const run = await kcat([...sasl(), ...group]);
      expect(run.code, run.stderr).toBe(0);
      return run.stdout.includes(`"state":"${String(fresh.state)}"`) ? run : undefined;
    });
    const keys = new Set(
      second.stdout
        .trim()
        .split('\n')
        .map((l) => l.split('\t')[0]),
    );
    expect([...keys]).toEqual([String(fresh.requestId)]);
  });

  it('takes an event kcat produces, which a consumer then reads back', async () => {
    const event = JSON.stringify({
      state: 'Success',
      requestId: 4242,
      description: 'produced by kcat',
      processed: 1,
    });
    const produce = await kcat([...sasl(), '-P', '-t', info.topic, '-k', '4242'], {
      input: `${event}\n`,
    });
    expect(produce.code, produce.stderr).toBe(0);
    expect((await readAll()).at(-1)).toEqual(['4242', event]);
  });

  it('appendRaw puts records on the topic as they are', async () => {
    const offset = sandbox.kafka?.appendRaw('demo-client', [{ key: 'k', value: 'not json' }]);
    expect(offset).toBeGreaterThan(0);
    expect(sandbox.kafka?.appendRaw('nobody', [{ key: null, value: null }])).toBeUndefined();
    expect((await readAll()).at(-1)).toEqual(['k', 'not json']);
  });

  it('refuses a wrong password', async () => {
    const run = await kcat([...sasl('not-the-secret'), '-L', '-m', '3']);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/SASL authentication error: Authentication failed/);
  });

  it('is refused by a client that trusts another CA', async () => {
    const otherCa = join(dir, 'other-ca.pem');
    writeFileSync(otherCa, (await makeSandboxTls()).caPem);
    const run = await kcat([...sasl(SECRET, otherCa), '-L', '-m', '3']);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/certificate verify failed/);
  });
});

describe('Kafka faults', () => {
  it('SASL refused: a right password fails until the fault is cleared', async () => {
    sandbox.setFaults({ kafkaSaslRefused: true });
    const refused = await kcat([...sasl(), '-L', '-m', '3']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/Authentication failed/);
    sandbox.setFaults({ kafkaSaslRefused: null });
    expect((await kcat([...sasl(), '-L', '-m', '5'])).code).toBe(0);
  });

  it('broker down: connections are refused, events published meanwhile are there once it is back', async () => {
    sandbox.setFaults({ kafkaDown: true });
    const down = await waitFor(async () => {
      const run = await kcat([...sasl(), '-L', '-m', '2']);
      return run.code !== 0 ? run : undefined;
    });
    expect(down.stderr).toMatch(/Connection refused/);
    const final = await batchToTheEnd();
    sandbox.setFaults({ kafkaDown: null });
    // 20 s, not the default 5: kcat reconnects with its own backoff after the refusals above, and
    // in a full parallel run its first metadata query once failed for the whole 5 s.
    const mine = await waitFor(
      async () => {
        const events = (await readAll()).filter(([k]) => k === String(final.requestId));
        return events.length === 3 ? events : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(mine.map(([, v]) => (JSON.parse(v) as { state: string }).state)).toEqual([
      'Received',
      'InProgress',
      'Success',
    ]);
  });

  it('duplicated and delayed events', async () => {
    sandbox.setFaults({ kafkaDuplicateRate: 1, kafkaEventDelayMs: 400 });
    try {
      const final = await batchToTheEnd();
      const events = await waitFor(async () => {
        const mine = (await readAll()).filter(([k]) => k === String(final.requestId));
        return mine.length >= 6 ? mine : undefined;
      });
      expect(events.map(([, v]) => (JSON.parse(v) as { state: string }).state)).toEqual([
        'Received',
        'Received',
        'InProgress',
        'InProgress',
        'Success',
        'Success',
      ]);
    } finally {
      sandbox.setFaults({ kafkaDuplicateRate: null, kafkaEventDelayMs: null });
    }
  });
});

describe('clients of a sandbox file: own topics, internal names, retention', () => {
  let two: RunningSandbox;
  let twoCa: string;
  beforeAll(async () => {
    const file = join(dir, 'sandbox.yaml');
    writeFileSync(
      file,
      [
        'clients:',
        '  - { clientId: plant-1-gateway, clientSecret: secret-1, dcps: [GI-01], internalName: plant-1 }',
        '  - { clientId: plant-2-gateway, clientSecret: secret-2, dcps: [GI-01] }',
        'kafka: { maxEvents: 2 }',
        '',
      ].join('\n'),
    );
    two = await startSandbox({ ...loadSandboxConfig(file, { baseDir: dir }), port: 0 });
    twoCa = join(dir, 'two-ca.pem');
    writeFileSync(twoCa, two.kafka?.caPem ?? '');
  });
  afterAll(async () => two?.close());

  it('names each topic after the internal name (default the client id); a client sees and reads only its own', async () => {
    const one = two.kafka?.info('plant-1-gateway');
    const other = two.kafka?.info('plant-2-gateway');
    expect([one?.topic, other?.topic]).toEqual([
      'sandbox-plant-1-status-event',
      'sandbox-plant-2-gateway-status-event',
    ]);
    const as1 = kcatSasl(two.kafka?.bootstrapServers ?? '', 'plant-1-gateway', 'secret-1', twoCa);
    const list = await kcat([...as1, '-L', '-J']);
    expect(
      (JSON.parse(list.stdout) as { topics: Array<{ topic: string }> }).topics.map((t) => t.topic),
    ).toEqual(['sandbox-plant-1-status-event']);
    const foreign = await kcat([
      ...as1,
      '-C',
      '-t',
      'sandbox-plant-2-gateway-status-event',
      '-o',
      'beginning',
      '-e',
    ]);
    expect(foreign.code).not.toBe(0);
    expect(foreign.stderr).toMatch(/Topic authorization failed/i);
    // plant-2's secret is not plant-1's password.
    const swapped = await kcat([
      ...kcatSasl(two.kafka?.bootstrapServers ?? '', 'plant-1-gateway', 'secret-2', twoCa),
      '-L',
      '-m',
      '3',
    ]);
    expect(swapped.stderr).toMatch(/Authentication failed/);
  });

  it('keeps the newest maxEvents events; reading from the beginning starts after the dropped ones', async () => {
    const as2 = kcatSasl(two.kafka?.bootstrapServers ?? '', 'plant-2-gateway', 'secret-2', twoCa);
    const topic = 'sandbox-plant-2-gateway-status-event';
    const produce = await kcat([...as2, '-P', '-t', topic, '-K', ':'], {
      input: '1:a\n2:b\n3:c\n',
    });
    expect(produce.code, produce.stderr).toBe(0);
    const read = await kcat([
      ...as2,
      '-C',
      '-t',
      topic,
      '-o',
      'beginning',
      '-e',
      '-q',
      '-f',
      '%o %k %s\\n',
    ]);
    expect(read.stdout.trim().split('\n')).toEqual(['1 2 b', '2 3 c']);
  });
});
