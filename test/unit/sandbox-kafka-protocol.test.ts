import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCodes, isGatewayError } from '../../src/errors.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import {
  apiVersionsBody,
  parseRequest,
  responseFrame,
  decodeMessage,
  Reader,
  Writer,
  GroupCoordinator,
  KafkaError,
  Responses,
  crc32c,
  decodeBatches,
  encodeBatch,
  ScramServer,
  scramCredential,
  TopicLog,
} from '@scan-gateway/sandbox/kafka';

// The protocol pieces of the sandbox's Kafka broker against byte captures of real clients:
// librdkafka 2.0.2 (Debian's kcat) and @platformatic/kafka 1.35.0. How the captures were made:
// test/fixtures/kafka/README.md.

interface Captured {
  connection: number;
  direction: 'request' | 'response';
  apiKey?: number;
  apiVersion?: number;
  correlationId?: number;
  hex: string;
}

function load(name: string): Captured[] {
  return readFileSync(join(PACKAGE_ROOT, 'test/fixtures/kafka', name), 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Captured);
}

const CAPTURES = {
  kcat: load('kcat-2.0.2.jsonl'),
  platformatic: load('platformatic-kafka-1.35.0.jsonl'),
};
const requests = (c: Captured[]) =>
  c
    .filter((f) => f.direction === 'request')
    .map((f) => ({ ...f, frame: Buffer.from(f.hex, 'hex') }));
const first = (c: Captured[], apiKey: number) => {
  const hit = requests(c).find((f) => f.apiKey === apiKey);
  if (!hit) throw new Error(`no captured request of API ${apiKey}`);
  return parseRequest(hit.frame);
};
/** The body of a captured response frame (after the correlation id and, when flexible, the header tags). */
function responseBody(c: Captured[], connection: number, correlationId: number): Buffer {
  const hit = c.find(
    (f) =>
      f.direction === 'response' &&
      f.connection === connection &&
      f.correlationId === correlationId,
  );
  if (!hit) throw new Error(`no captured response ${connection}/${correlationId}`);
  return Buffer.from(hit.hex, 'hex');
}

describe('CRC-32C', () => {
  it('gives the check value of RFC 3720 (B.4) for "123456789"', () => {
    expect(crc32c(Buffer.from('123456789'))).toBe(0xe3069283);
    expect(crc32c(Buffer.alloc(32))).toBe(0x8a9136aa); // RFC 3720 B.4: 32 bytes of zeroes
  });
});

describe('requests of real clients', () => {
  it.each([
    [
      'kcat',
      {
        0: 7,
        1: 11,
        2: 2,
        3: 4,
        8: 7,
        9: 7,
        10: 2,
        11: 5,
        12: 3,
        13: 1,
        14: 3,
        17: 1,
        18: 3,
        36: 0,
      },
    ],
    [
      'platformatic',
      { 1: 12, 2: 5, 3: 9, 8: 8, 9: 8, 10: 4, 11: 6, 12: 4, 13: 4, 14: 4, 17: 1, 18: 3, 36: 2 },
    ],
  ] as const)(
    '%s: every captured request parses to its last byte, at the versions it picked',
    (client, versions) => {
      const seen: Record<number, number> = {};
      for (const r of requests(CAPTURES[client])) {
        const parsed = parseRequest(r.frame); // throws on bytes left over or missing
        seen[parsed.header.apiKey] = parsed.header.apiVersion;
      }
      expect(seen).toEqual(versions);
    },
  );

  it('kcat: ApiVersions v3 names the client software; the header carries the client id', () => {
    const { header, body } = first(CAPTURES.kcat, 18);
    expect(header).toMatchObject({ apiVersion: 3, clientId: 'rdkafka' });
    expect(body).toEqual({ clientSoftwareName: 'librdkafka', clientSoftwareVersion: '2.0.2' });
  });

  it('kcat: the Produce v7 record batch passes its CRC-32C and holds the produced event', () => {
    const { body } = first(CAPTURES.kcat, 0);
    expect(body).toMatchObject({ transactionalId: null, acks: -1 });
    const topic = (
      body.topicData as Array<{
        name: string;
        partitionData: Array<{ index: number; records: Buffer }>;
      }>
    )[0];
    expect(topic?.name).toBe('sandbox-demo-client-status-event');
    const decoded = decodeBatches(topic?.partitionData[0]?.records ?? Buffer.alloc(0));
    if (!('records' in decoded)) throw new Error('compressed');
    expect(decoded.records.map((r) => [r.key?.toString(), r.value?.toString()])).toEqual([
      ['7', '{"state":"Received","requestId":7,"description":"x","processed":0}'],
    ]);
  });

  it('kcat Fetch v11 and @platformatic/kafka Fetch v12 (flexible) name the topic, partition 0 and an offset', () => {
    for (const capture of [CAPTURES.kcat, CAPTURES.platformatic]) {
      const { body } = first(capture, 1);
      const topics = body.topics as Array<{
        topic: string;
        partitions: Array<{ partition: number; fetchOffset: number }>;
      }>;
      expect(topics[0]?.topic).toBe('sandbox-demo-client-status-event');
      expect(topics[0]?.partitions[0]?.partition).toBe(0);
      expect(topics[0]?.partitions[0]?.fetchOffset).toBeGreaterThanOrEqual(0);
      expect(body.maxWaitMs).toBeGreaterThan(0);
    }
  });

  it('JoinGroup: kcat v5 offers range and roundrobin, @platformatic/kafka v6 its own assignor, both of type "consumer"', () => {
    const kcat = first(CAPTURES.kcat, 11).body;
    expect(kcat).toMatchObject({
      groupId: 'capture-group',
      protocolType: 'consumer',
      memberId: '',
    });
    expect((kcat.protocols as Array<{ name: string }>).map((p) => p.name)).toEqual([
      'range',
      'roundrobin',
    ]);
    const pk = first(CAPTURES.platformatic, 11).body;
    expect(pk).toMatchObject({ groupId: 'capture-group-3', protocolType: 'consumer' });
    expect((pk.protocols as unknown[]).length).toBeGreaterThan(0);
  });

  it('@platformatic/kafka OffsetFetch v8 asks per group (the v8 layout)', () => {
    const { body } = first(CAPTURES.platformatic, 9);
    expect(body.groups).toMatchObject([
      {
        groupId: 'capture-group-3',
        topics: [{ name: 'sandbox-demo-client-status-event', partitionIndexes: [0] }],
      },
    ]);
  });
});

describe('SCRAM-SHA-512 (RFC 5802, RFC 7677)', () => {
  // kcat's first connection: handshake, then SaslAuthenticate v0 with client-first and client-final.
  const auth = requests(CAPTURES.kcat).filter((f) => f.connection === 1 && f.apiKey === 36);
  const clientFirst = parseRequest(auth[0]?.frame ?? Buffer.alloc(0));
  const clientFinal = parseRequest(auth[1]?.frame ?? Buffer.alloc(0));
  const answer = (correlationId: number) => {
    const r = new Reader(responseBody(CAPTURES.kcat, 1, correlationId));
    r.int32();
    return decodeMessage(Responses.SaslAuthenticate, 0, r);
  };
  const serverFirst = (answer(clientFirst.header.correlationId).authBytes as Buffer).toString();
  const serverFinal = (answer(clientFinal.header.correlationId).authBytes as Buffer).toString();
  const attrs = new Map(serverFirst.split(',').map((p) => [p.slice(0, 1), p.slice(2)]));
  const clientNonce = /,r=(.*)$/.exec((clientFirst.body.authBytes as Buffer).toString())?.[1] ?? '';
  const serverPart = (attrs.get('r') ?? '').slice(clientNonce.length);
  const salt = Buffer.from(attrs.get('s') ?? '', 'base64');

  it("replays kcat's exchange: the same server-first, the proof accepted, the same server signature", () => {
    const server = new ScramServer(
      () => scramCredential('capture-password', 4096, salt),
      () => serverPart,
    );
    const step1 = server.step(clientFirst.body.authBytes as Buffer);
    expect('reply' in step1 && step1.reply.toString()).toBe(serverFirst);
    const step2 = server.step(clientFinal.body.authBytes as Buffer);
    expect(step2).toEqual({ reply: Buffer.from(serverFinal), done: { user: 'demo-client' } });
  });

  it('refuses the same exchange with another password, and an unknown user alike', () => {
    const wrong = new ScramServer(
      () => scramCredential('another-password', 4096, salt),
      () => serverPart,
    );
    wrong.step(clientFirst.body.authBytes as Buffer);
    expect(wrong.step(clientFinal.body.authBytes as Buffer)).toEqual({
      failed: 'invalid credentials',
    });
    const nobody = new ScramServer(
      () => undefined,
      () => serverPart,
    );
    expect('reply' in nobody.step(clientFirst.body.authBytes as Buffer)).toBe(true);
    expect(nobody.step(clientFinal.body.authBytes as Buffer)).toEqual({
      failed: 'invalid credentials',
    });
  });

  it('refuses what is not SCRAM', () => {
    expect(new ScramServer(() => undefined).step(Buffer.from('hello'))).toHaveProperty('failed');
  });
});

describe('responses', () => {
  it('ApiVersions v3: the bytes both clients accepted (response header v0, flexible body)', () => {
    const req = first(CAPTURES.kcat, 18);
    const frame = responseFrame('ApiVersions', 3, req.header.correlationId, apiVersionsBody());
    expect(frame.subarray(4).toString('hex')).toBe(
      responseBody(CAPTURES.kcat, 1, req.header.correlationId).toString('hex'),
    );
  });

  it('closes on what it cannot read: unknown API, unsupported version, bytes left over, lying array counts', () => {
    const header = (apiKey: number, version: number) =>
      new Writer().int16(apiKey).int16(version).int32(1).string('t', false);
    const refused = (frame: Buffer) => {
      try {
        parseRequest(frame);
      } catch (err) {
        return isGatewayError(err, ErrorCodes.SANDBOX_KAFKA);
      }
      return false;
    };
    expect(refused(header(99, 0).finish())).toBe(true);
    expect(refused(header(1, 3).int32(-1).int32(0).int32(0).int32(0).int32(0).finish())).toBe(true); // Fetch v3: no record batch v2
    expect(refused(header(17, 1).string('SCRAM-SHA-512', false).int8(0).finish())).toBe(true);
    expect(refused(header(3, 1).int32(1_000_000).finish())).toBe(true);
    expect(parseRequest(header(17, 1).string('SCRAM-SHA-512', false).finish()).body).toEqual({
      mechanism: 'SCRAM-SHA-512',
    });
  });
});

describe('record batch v2', () => {
  const records = [
    {
      offset: 40,
      timestamp: 1_700_000_000_000,
      key: Buffer.from('17'),
      value: Buffer.from('{"state":"Success"}'),
      headers: [],
    },
    {
      offset: 41,
      timestamp: 1_700_000_000_250,
      key: null,
      value: Buffer.from('x'),
      headers: [{ key: 'h', value: Buffer.from('v') }],
    },
  ];

  it('round-trips keys, values, headers and timestamps', () => {
    const decoded = decodeBatches(encodeBatch(records));
    expect(decoded).toEqual({ records: records.map(({ offset: _offset, ...r }) => r) });
    expect(encodeBatch([])).toHaveLength(0);
  });

  it('refuses a batch whose CRC-32C does not match, and reports a compressed one', () => {
    const batch = encodeBatch(records);
    const corrupt = Buffer.from(batch);
    corrupt[corrupt.length - 1] = (corrupt[corrupt.length - 1] ?? 0) ^ 0xff;
    expect(() => decodeBatches(corrupt)).toThrow(/CRC-32C/);
    const gzip = Buffer.from(batch);
    gzip.writeInt16BE(1, 21); // attributes: compression gzip…
    gzip.writeUInt32BE(crc32c(gzip.subarray(21)), 17); // …with a right CRC
    expect(decodeBatches(gzip)).toEqual({ compressed: true });
  });
});

describe('topic retention', () => {
  it('drops the oldest events by count and by age; the log start offset follows', () => {
    let now = 0;
    const log = new TopicLog('t', { maxEvents: 3, maxAgeMs: 1000 }, () => now);
    const event = (v: string) => ({
      timestamp: now,
      key: null,
      value: Buffer.from(v),
      headers: [],
    });
    for (const v of ['a', 'b', 'c', 'd']) log.append([event(v)]);
    expect([log.logStartOffset, log.highWatermark]).toEqual([1, 4]);
    expect(log.read(1, 1 << 20).map((r) => r.value?.toString())).toEqual(['b', 'c', 'd']);
    now = 1500;
    log.append([event('e')]);
    expect([log.logStartOffset, log.highWatermark]).toEqual([4, 5]);
    expect(log.read(4, 1 << 20).map((r) => r.offset)).toEqual([4]);
    // ListOffsets by time: the first record at or after it; -1 (as Kafka) when none is that recent.
    expect(log.offsetForTime(1000)).toEqual({ offset: 4, timestamp: 1500 });
    expect(log.offsetForTime(1501)).toEqual({ offset: -1, timestamp: -1 });
  });
});

describe('group coordinator', () => {
  const join = (g: GroupCoordinator, memberId: string) =>
    g.join({
      groupId: 'g',
      memberId,
      groupInstanceId: null,
      sessionTimeoutMs: 10_000,
      rebalanceTimeoutMs: 1000,
      protocolType: 'consumer',
      protocols: [{ name: 'range', metadata: Buffer.from(memberId) }],
      requireKnownMemberId: true,
    });

  it("hands out member ids, makes the first member leader, and passes the leader's assignment on", async () => {
    const g = new GroupCoordinator({ maxGroups: 2, maxMembers: 2, joinDelayMs: 20 });
    try {
      const idA = (await join(g, '')).memberId;
      const idB = (await join(g, '')).memberId;
      const [a, b] = await Promise.all([join(g, idA), join(g, idB)]);
      expect([a.errorCode, b.errorCode, a.generationId, a.leader, a.protocolName]).toEqual([
        0,
        0,
        1,
        idA,
        'range',
      ]);
      expect(a.members.map((m) => m.memberId)).toEqual([idA, idB]);
      expect(b.members).toEqual([]);
      const syncB = g.sync({ groupId: 'g', generationId: 1, memberId: idB, assignments: [] });
      const syncA = await g.sync({
        groupId: 'g',
        generationId: 1,
        memberId: idA,
        assignments: [{ memberId: idB, assignment: Buffer.from('for-b') }],
      });
      expect(syncA.errorCode).toBe(0);
      expect((await syncB).assignment.toString()).toBe('for-b');
      expect(g.heartbeat({ groupId: 'g', generationId: 1, memberId: idA })).toBe(KafkaError.NONE);
      expect(
        g.commit({ groupId: 'g', generationId: 1, memberId: idA }, [
          { topic: 't', partition: 0, offset: 7, metadata: null },
        ]),
      ).toBe(KafkaError.NONE);
      expect(g.committed('g', 't', 0).offset).toBe(7);
      // B leaves: A learns of the rebalance at its next heartbeat.
      expect(g.leave('g', idB)).toBe(KafkaError.NONE);
      expect(g.heartbeat({ groupId: 'g', generationId: 1, memberId: idA })).toBe(
        KafkaError.REBALANCE_IN_PROGRESS,
      );
      expect(g.heartbeat({ groupId: 'g', generationId: 1, memberId: 'nobody' })).toBe(
        KafkaError.UNKNOWN_MEMBER_ID,
      );
    } finally {
      g.close();
    }
  });

  it('keeps its bounds: members per group, groups', async () => {
    const g = new GroupCoordinator({ maxGroups: 1, maxMembers: 1, joinDelayMs: 20 });
    try {
      const idA = (await join(g, '')).memberId;
      const a = join(g, idA);
      const idB = (await join(g, '')).memberId;
      expect((await join(g, idB)).errorCode).toBe(KafkaError.GROUP_MAX_SIZE_REACHED);
      expect((await a).errorCode).toBe(0);
      const other = await g.join({
        groupId: 'h',
        memberId: 'x',
        groupInstanceId: null,
        sessionTimeoutMs: 10_000,
        rebalanceTimeoutMs: 1000,
        protocolType: 'consumer',
        protocols: [],
        requireKnownMemberId: true,
      });
      expect(other.errorCode).toBe(KafkaError.COORDINATOR_NOT_AVAILABLE);
    } finally {
      g.close();
    }
  });
});
