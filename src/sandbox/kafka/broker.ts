import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { createServer, type Server, type TLSSocket } from 'node:tls';
import { ErrorCodes, GatewayError, isGatewayError } from '../../errors.js';
import { RefusalLog } from '../../listener/refusal-log.js';
import type { Logger } from '../../log.js';
import type { SandboxTls } from './ca.js';
import { decodeMessage, encodeMessage, isFlexible, Reader, Writer, type Message } from './codec.js';
import { DEFAULT_GROUP_LIMITS, GroupCoordinator, type GroupLimits } from './groups.js';
import { ApiKey, KafkaError, Requests, Responses, SUPPORTED, type ApiKeyName } from './messages.js';
import { decodeBatches, encodeBatch, type ProducedRecord } from './records.js';
import { ScramServer, scramCredential, type ScramCredential } from './scram.js';
import { DEFAULT_RETENTION, TopicLog, type Retention } from './topic-log.js';

/**
 * A Kafka broker on the wire, for the sandbox: one node (id 0), TLS only (SASL_SSL), SCRAM-SHA-512
 * users, one single-partition topic per user, records in memory (`topic-log.ts`), the classic
 * consumer group protocol (`groups.ts`). It speaks the APIs and versions of `messages.ts`
 * (`SUPPORTED`), enough for librdkafka 2.0 (kcat) and @platformatic/kafka 1.x as producers and
 * consumers, with and without a group. No transactions, no compression, no replication.
 *
 * A user reaches only its own topic: another user's topic is TOPIC_AUTHORIZATION_FAILED, and group
 * ids are kept apart per user. A frame that cannot be read, a version outside `SUPPORTED` and any
 * request but ApiVersions/SaslHandshake/SaslAuthenticate before authentication close the
 * connection, as a Kafka broker does.
 */

/** Bounds of the broker; every one is a number a test or the sandbox file can set. */
export interface BrokerLimits {
  /** Most open connections; more are closed at once. Default 64. */
  maxConnections: number;
  /** Largest request frame, in bytes (Kafka's socket.request.max.bytes is 100 MiB). Default 2 MiB. */
  maxRequestBytes: number;
  /**
   * Requests read ahead of the one being answered, per connection; beyond it, or beyond
   * `maxRequestBytes` of them, the socket is paused. Default 32.
   */
  maxQueuedRequests: number;
  /** Time from connect to successful SASL authentication, in ms. Default 10 000. */
  authTimeoutMs: number;
  /** An idle connection is closed after this, in ms (Kafka's connections.max.idle.ms is 10 min). Default 600 000. */
  idleTimeoutMs: number;
  /** Longest a Fetch waits for data, whatever its maxWaitMs says, in ms. Default 30 000. */
  maxFetchWaitMs: number;
}

export const DEFAULT_BROKER_LIMITS: BrokerLimits = {
  maxConnections: 64,
  maxRequestBytes: 2 * 1024 * 1024,
  maxQueuedRequests: 32,
  authTimeoutMs: 10_000,
  idleTimeoutMs: 600_000,
  maxFetchWaitMs: 30_000,
};

/** One SASL user and the one topic it reads and writes. */
export interface BrokerUser {
  user: string;
  password: string;
  topic: string;
}

/** The faults the broker obeys, read on every use (the sandbox's fault switch). */
export interface BrokerFaults {
  /** SaslAuthenticate fails for everyone (SASL_AUTHENTICATION_FAILED). */
  saslRefused: boolean;
}

export interface BrokerOptions {
  host: string;
  /** 0 = any free port. */
  port: number;
  /** Host and port put in Metadata and FindCoordinator; default the listening ones (127.0.0.1 for a wildcard host). */
  advertised?: { host?: string; port?: number };
  tls: SandboxTls;
  users: BrokerUser[];
  retention?: Partial<Retention>;
  limits?: Partial<BrokerLimits>;
  groups?: Partial<GroupLimits>;
  faults?: () => BrokerFaults;
  logger: Logger;
}

/** Kafka's "authorized operations not requested" (INT32_MIN). */
const OPS_NOT_REQUESTED = -2147483648;
const CLUSTER_ID = 'scan-gateway-sandbox';
const NODE_ID = 0;
const byKey = new Map<number, ApiKeyName>(Object.entries(ApiKey).map(([name, key]) => [key, name as ApiKeyName]));

interface Connection {
  socket: TLSSocket;
  remote: string;
  user?: BrokerUser;
  mechanism?: string;
  scram?: ScramServer;
  queued: number;
  queuedBytes: number;
  chain: Promise<void>;
  closed: boolean;
}

/** A parsed request header (request header v1/v2). */
export interface RequestHeader {
  apiKey: number;
  apiVersion: number;
  correlationId: number;
  clientId: string | null;
}

/**
 * Reads a request header and body from one frame (without its length prefix). Throws
 * `SANDBOX_KAFKA` for an unknown API, an unsupported version (`header` is on the error's
 * details) or a frame that does not hold the message.
 */
export function parseRequest(frame: Buffer): { header: RequestHeader; api: ApiKeyName; body: Message } {
  const r = new Reader(frame);
  const header: RequestHeader = { apiKey: r.int16(), apiVersion: r.int16(), correlationId: r.int32(), clientId: r.string(false) };
  const api = byKey.get(header.apiKey);
  const range = api === undefined ? undefined : SUPPORTED[api];
  if (api === undefined || !range || header.apiVersion < range.min || header.apiVersion > range.max) {
    throw new GatewayError(ErrorCodes.SANDBOX_KAFKA, `unsupported Kafka API ${header.apiKey} v${header.apiVersion}`, { details: { header } });
  }
  const schema = Requests[api];
  if (isFlexible(schema, header.apiVersion)) r.skipTags();
  const body = decodeMessage(schema, header.apiVersion, r);
  if (r.remaining() !== 0) throw new GatewayError(ErrorCodes.SANDBOX_KAFKA, `${api} v${header.apiVersion} has ${r.remaining()} bytes after its body`);
  return { header, api, body };
}

/** A response frame (with its length prefix). ApiVersions always has response header v0 (KIP-511). */
export function responseFrame(api: ApiKeyName, version: number, correlationId: number, body: Message): Buffer {
  const w = new Writer().int32(correlationId);
  if (api !== 'ApiVersions' && isFlexible(Responses[api], version)) w.uvarint(0);
  encodeMessage(Responses[api], version, body, w);
  const payload = w.finish();
  const size = Buffer.alloc(4);
  size.writeInt32BE(payload.length);
  return Buffer.concat([size, payload]);
}

/** The ApiVersions body: every API and the version range of {@link SUPPORTED}. */
export function apiVersionsBody(errorCode: number = KafkaError.NONE): Message {
  return {
    errorCode,
    apiKeys: Object.entries(SUPPORTED).map(([name, r]) => ({ apiKey: ApiKey[name as ApiKeyName], minVersion: r.min, maxVersion: r.max })),
    throttleTimeMs: 0,
  };
}

export class KafkaBroker {
  private server: Server | undefined;
  private readonly connections = new Set<Connection>();
  private readonly users = new Map<string, { user: BrokerUser; credential: ScramCredential }>();
  private readonly topics = new Map<string, TopicLog>();
  private readonly groups: GroupCoordinator;
  private readonly limits: BrokerLimits;
  private readonly log: Logger;
  private boundPort = 0;
  private stopped = false;
  /** A client retrying a wrong password, or sending garbage, cannot flood the log: one line per 10 s. */
  private readonly authRefusals: RefusalLog;
  private readonly drops: RefusalLog;

  constructor(private readonly options: BrokerOptions) {
    this.limits = { ...DEFAULT_BROKER_LIMITS, ...options.limits };
    this.log = options.logger.child({ component: 'sandbox-kafka' });
    this.authRefusals = new RefusalLog(this.log, 'Kafka SASL authentication refused');
    this.drops = new RefusalLog(this.log, 'Kafka connection closed by the sandbox');
    this.groups = new GroupCoordinator({ ...DEFAULT_GROUP_LIMITS, ...options.groups });
    const retention = { ...DEFAULT_RETENTION, ...options.retention };
    for (const u of options.users) {
      this.users.set(u.user, { user: u, credential: scramCredential(u.password) });
      if (!this.topics.has(u.topic)) this.topics.set(u.topic, new TopicLog(u.topic, retention));
    }
  }

  /** The listening port (the bound one when `port` was 0). */
  get port(): number {
    return this.boundPort;
  }

  /** `host:port` clients bootstrap from. */
  get bootstrapServers(): string {
    return `${this.advertisedHost()}:${this.advertisedPort()}`;
  }

  private advertisedHost(): string {
    const host = this.options.advertised?.host ?? this.options.host;
    return host === '0.0.0.0' || host === '::' || host === '' ? '127.0.0.1' : host;
  }

  private advertisedPort(): number {
    return this.options.advertised?.port ?? this.boundPort;
  }

  /** The topic of a user. */
  topicOf(user: string): TopicLog | undefined {
    const u = this.users.get(user);
    return u ? this.topics.get(u.user.topic) : undefined;
  }

  /** Appends records to a topic; gives the first offset, or undefined for an unknown topic. */
  append(topic: string, records: ProducedRecord[]): number | undefined {
    return this.topics.get(topic)?.append(records);
  }

  /** Open client connections. */
  get connectionCount(): number {
    return this.connections.size;
  }

  /** Whether it is listening (false while "down"). */
  get listening(): boolean {
    return this.server !== undefined;
  }

  /**
   * Listens (again). The first start binds `port` (0 = any); a later one (after {@link down})
   * binds the same port, so clients find the broker where it was. Rejects with `LISTEN` when the
   * address is taken.
   */
  async start(): Promise<void> {
    if (this.server || this.stopped) return;
    const server = createServer({ key: this.options.tls.keyPem, cert: this.options.tls.certPem, minVersion: 'TLSv1.2' });
    server.maxConnections = this.limits.maxConnections;
    server.on('secureConnection', (socket) => this.accept(socket));
    server.on('tlsClientError', (err, socket) => {
      // A client that does not trust the sandbox CA ends here; it is the client's to report.
      this.log.debug({ err: err.message, remote: socket.remoteAddress }, 'Kafka TLS handshake failed');
    });
    const port = this.boundPort || this.options.port;
    server.listen({ host: this.options.host, port });
    try {
      await Promise.race([once(server, 'listening'), once(server, 'error').then(([err]) => Promise.reject(err as Error))]);
    } catch (err) {
      throw new GatewayError(ErrorCodes.LISTEN, `the sandbox's Kafka endpoint cannot listen on ${this.options.host}:${port}: ${(err as Error).message}`, { cause: err });
    }
    this.boundPort = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Stops listening and cuts every connection ("broker down"); {@link start} brings it back. */
  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const c of this.connections) this.drop(c);
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Stops for good. */
  async close(): Promise<void> {
    this.stopped = true;
    this.groups.close();
    await this.down();
    this.authRefusals.flush();
    this.drops.flush();
  }

  private accept(socket: TLSSocket): void {
    const conn: Connection = { socket, remote: `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? 0}`, queued: 0, queuedBytes: 0, chain: Promise.resolve(), closed: false };
    this.connections.add(conn);
    const authTimer = setTimeout(() => {
      if (!conn.user) this.drop(conn, 'not authenticated in time');
    }, this.limits.authTimeoutMs);
    authTimer.unref();
    socket.setTimeout(this.limits.idleTimeoutMs, () => this.drop(conn, 'idle'));
    socket.on('close', () => {
      clearTimeout(authTimer);
      conn.closed = true;
      this.connections.delete(conn);
    });
    socket.on('error', (err) => this.log.debug({ err: err.message, remote: conn.remote }, 'Kafka connection error'));
    let pending: Buffer = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      while (pending.length >= 4 && !conn.closed) {
        const size = pending.readInt32BE(0);
        if (size < 8 || size > this.limits.maxRequestBytes) {
          this.drop(conn, `request frame of ${size} bytes (bound ${this.limits.maxRequestBytes})`);
          return;
        }
        if (pending.length < 4 + size) break;
        const frame = Buffer.from(pending.subarray(4, 4 + size));
        pending = pending.subarray(4 + size);
        this.enqueue(conn, frame);
      }
    });
  }

  /** Answers requests in order, one at a time, as a broker does per connection. */
  private enqueue(conn: Connection, frame: Buffer): void {
    conn.queued += 1;
    conn.queuedBytes += frame.length;
    if (conn.queued >= this.limits.maxQueuedRequests || conn.queuedBytes >= this.limits.maxRequestBytes) conn.socket.pause();
    conn.chain = conn.chain.then(async () => {
      try {
        if (!conn.closed) await this.handle(conn, frame);
      } catch (err) {
        this.drop(conn, isGatewayError(err) ? err.message : `failed: ${(err as Error).message}`);
        if (!isGatewayError(err)) this.log.error({ err }, 'Kafka request handling failed');
      } finally {
        conn.queued -= 1;
        conn.queuedBytes -= frame.length;
        if (conn.queued < this.limits.maxQueuedRequests && conn.queuedBytes < this.limits.maxRequestBytes && !conn.closed) conn.socket.resume();
      }
    });
  }

  private drop(conn: Connection, why?: string): void {
    if (why !== undefined && !conn.closed) this.drops.note({ remote: conn.remote, user: conn.user?.user, reason: why });
    conn.closed = true;
    conn.socket.destroy();
  }

  private send(conn: Connection, api: ApiKeyName, version: number, correlationId: number, body: Message): void {
    if (!conn.closed) conn.socket.write(responseFrame(api, version, correlationId, body));
  }

  private async handle(conn: Connection, frame: Buffer): Promise<void> {
    let parsed: ReturnType<typeof parseRequest>;
    try {
      parsed = parseRequest(frame);
    } catch (err) {
      const header = isGatewayError(err) ? (err.details.header as RequestHeader | undefined) : undefined;
      // An ApiVersions of a version unknown here is answered in v0 with the versions spoken (KIP-511).
      if (header?.apiKey === ApiKey.ApiVersions) {
        this.send(conn, 'ApiVersions', 0, header.correlationId, apiVersionsBody(KafkaError.UNSUPPORTED_VERSION));
        return;
      }
      throw err;
    }
    const { header, api, body } = parsed;
    const v = header.apiVersion;
    const answer = (b: Message) => this.send(conn, api, v, header.correlationId, b);
    if (!conn.user && api !== 'ApiVersions' && api !== 'SaslHandshake' && api !== 'SaslAuthenticate') {
      this.drop(conn, `${api} before SASL authentication`);
      return;
    }
    switch (api) {
      case 'ApiVersions':
        return answer(apiVersionsBody());
      case 'SaslHandshake': {
        const mechanism = body.mechanism as string;
        const ok = mechanism === 'SCRAM-SHA-512' && !conn.user;
        if (ok) {
          conn.mechanism = mechanism;
          conn.scram = new ScramServer((user) => this.users.get(user)?.credential);
        }
        answer({ errorCode: ok ? KafkaError.NONE : conn.user ? KafkaError.ILLEGAL_SASL_STATE : KafkaError.UNSUPPORTED_SASL_MECHANISM, mechanisms: ['SCRAM-SHA-512'] });
        if (!ok) this.drop(conn, `SASL mechanism ${mechanism} refused`);
        return;
      }
      case 'SaslAuthenticate':
        return this.authenticate(conn, body, answer);
      case 'Metadata':
        return answer(this.metadata(conn, body, v));
      case 'Produce':
        return this.produce(conn, body, answer);
      case 'ListOffsets':
        return answer(this.listOffsets(conn, body));
      case 'Fetch':
        return answer(await this.fetch(conn, body));
      case 'FindCoordinator':
        return answer(this.findCoordinator(body, v));
      case 'JoinGroup':
        return answer(await this.joinGroup(conn, body, v));
      case 'SyncGroup': {
        const a = await this.groups.sync({
          groupId: this.groupKey(conn, body.groupId),
          generationId: body.generationId as number,
          memberId: body.memberId as string,
          assignments: ((body.assignments as Message[] | null) ?? []).map((x) => ({ memberId: x.memberId as string, assignment: (x.assignment as Buffer | null) ?? Buffer.alloc(0) })),
        });
        return answer({ throttleTimeMs: 0, ...a });
      }
      case 'Heartbeat':
        return answer({
          throttleTimeMs: 0,
          errorCode: this.groups.heartbeat({ groupId: this.groupKey(conn, body.groupId), generationId: body.generationId as number, memberId: body.memberId as string }),
        });
      case 'LeaveGroup': {
        const groupId = this.groupKey(conn, body.groupId);
        if (v < 3) return answer({ throttleTimeMs: 0, errorCode: this.groups.leave(groupId, body.memberId as string) });
        const members = ((body.members as Message[] | null) ?? []).map((m) => ({
          memberId: m.memberId,
          groupInstanceId: m.groupInstanceId,
          errorCode: this.groups.leave(groupId, m.memberId as string),
        }));
        return answer({ throttleTimeMs: 0, errorCode: KafkaError.NONE, members });
      }
      case 'OffsetCommit':
        return answer(this.offsetCommit(conn, body));
      case 'OffsetFetch':
        return answer(this.offsetFetch(conn, body, v));
    }
  }

  private authenticate(conn: Connection, body: Message, answer: (b: Message) => void): void {
    const fail = (why: string) => {
      answer({ errorCode: KafkaError.SASL_AUTHENTICATION_FAILED, errorMessage: `Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (${why})`, authBytes: Buffer.alloc(0), sessionLifetimeMs: 0 });
      // Kafka closes the connection after a failed authentication, once the answer is out.
      conn.closed = true;
      conn.socket.end();
      this.authRefusals.note({ remote: conn.remote, reason: why });
    };
    if (!conn.scram || conn.user) {
      answer({ errorCode: KafkaError.ILLEGAL_SASL_STATE, errorMessage: 'SaslAuthenticate without SaslHandshake', authBytes: Buffer.alloc(0), sessionLifetimeMs: 0 });
      this.drop(conn);
      return;
    }
    if (this.options.faults?.().saslRefused === true) return fail('refused: injected fault');
    const step = conn.scram.step((body.authBytes as Buffer | null) ?? Buffer.alloc(0));
    if ('failed' in step) return fail(step.failed);
    if (step.done) {
      const known = this.users.get(step.done.user);
      if (!known) return fail('unknown user');
      conn.user = known.user;
      conn.scram = undefined;
      this.log.debug({ remote: conn.remote, user: known.user.user }, 'Kafka client authenticated');
    }
    answer({ errorCode: KafkaError.NONE, errorMessage: null, authBytes: step.reply, sessionLifetimeMs: 0 });
  }

  /** The topic a user may use by this name, or the error for it. */
  private topicFor(conn: Connection, name: unknown): { log: TopicLog } | { errorCode: number } {
    const log = typeof name === 'string' ? this.topics.get(name) : undefined;
    if (!log) return { errorCode: KafkaError.UNKNOWN_TOPIC_OR_PARTITION };
    if (conn.user?.topic !== name) return { errorCode: KafkaError.TOPIC_AUTHORIZATION_FAILED };
    return { log };
  }

  private metadata(conn: Connection, body: Message, v: number): Message {
    const requested = body.topics as Message[] | null;
    // Null topics (v1+), or an empty list in v0, means every topic the user may see.
    const names = requested === null || (v === 0 && requested.length === 0) ? [conn.user?.topic ?? ''] : requested.map((t) => t.name as string);
    return {
      throttleTimeMs: 0,
      brokers: [{ nodeId: NODE_ID, host: this.advertisedHost(), port: this.advertisedPort(), rack: null }],
      clusterId: CLUSTER_ID,
      controllerId: NODE_ID,
      topics: names.map((name) => {
        const found = this.topicFor(conn, name);
        const errorCode = 'errorCode' in found ? found.errorCode : KafkaError.NONE;
        return {
          errorCode,
          name,
          isInternal: false,
          partitions:
            errorCode === KafkaError.NONE
              ? [{ errorCode: 0, partitionIndex: 0, leaderId: NODE_ID, leaderEpoch: 0, replicaNodes: [NODE_ID], isrNodes: [NODE_ID], offlineReplicas: [] }]
              : [],
          topicAuthorizedOperations: OPS_NOT_REQUESTED,
        };
      }),
      clusterAuthorizedOperations: OPS_NOT_REQUESTED,
    };
  }

  private produce(conn: Connection, body: Message, answer: (b: Message) => void): void {
    const acks = body.acks as number;
    const responses = ((body.topicData as Message[] | null) ?? []).map((t) => {
      const found = this.topicFor(conn, t.name);
      return {
        name: t.name,
        partitionResponses: ((t.partitionData as Message[] | null) ?? []).map((p) => {
          const result = { index: p.index, errorCode: KafkaError.NONE, baseOffset: -1, logAppendTimeMs: -1, logStartOffset: -1, recordErrors: [], errorMessage: null as string | null };
          if (acks !== 0 && acks !== 1 && acks !== -1) return { ...result, errorCode: KafkaError.INVALID_REQUIRED_ACKS };
          if ('errorCode' in found) return { ...result, errorCode: found.errorCode };
          if (p.index !== 0) return { ...result, errorCode: KafkaError.UNKNOWN_TOPIC_OR_PARTITION };
          let decoded: ReturnType<typeof decodeBatches>;
          try {
            decoded = decodeBatches((p.records as Buffer | null) ?? Buffer.alloc(0));
          } catch (err) {
            return { ...result, errorCode: KafkaError.CORRUPT_MESSAGE, errorMessage: (err as Error).message };
          }
          if ('compressed' in decoded) return { ...result, errorCode: KafkaError.UNSUPPORTED_COMPRESSION_TYPE, errorMessage: 'the sandbox stores uncompressed batches only' };
          const baseOffset = found.log.append(decoded.records);
          return { ...result, baseOffset, logStartOffset: found.log.logStartOffset };
        }),
      };
    });
    // acks=0: the producer expects no answer at all.
    if (acks !== 0) answer({ responses, throttleTimeMs: 0 });
  }

  private listOffsets(conn: Connection, body: Message): Message {
    return {
      throttleTimeMs: 0,
      topics: ((body.topics as Message[] | null) ?? []).map((t) => {
        const found = this.topicFor(conn, t.name);
        return {
          name: t.name,
          partitions: ((t.partitions as Message[] | null) ?? []).map((p) => {
            const base = { partitionIndex: p.partitionIndex, errorCode: KafkaError.NONE, timestamp: -1, offset: -1, leaderEpoch: 0 };
            if ('errorCode' in found) return { ...base, errorCode: found.errorCode };
            if (p.partitionIndex !== 0) return { ...base, errorCode: KafkaError.UNKNOWN_TOPIC_OR_PARTITION };
            const ts = p.timestamp as number;
            if (ts === -1) return { ...base, offset: found.log.highWatermark };
            if (ts === -2) return { ...base, offset: found.log.logStartOffset };
            const hit = found.log.offsetForTime(ts);
            return { ...base, offset: hit.offset, timestamp: hit.timestamp };
          }),
        };
      }),
    };
  }

  private async fetch(conn: Connection, body: Message): Promise<Message> {
    const topics = (body.topics as Message[] | null) ?? [];
    const maxBytes = Math.max(1, (body.maxBytes as number | undefined) ?? 50 * 1024 * 1024);
    const build = () => {
      let any = false;
      const responses = topics.map((t) => {
        const found = this.topicFor(conn, t.topic);
        return {
          topic: t.topic,
          partitions: ((t.partitions as Message[] | null) ?? []).map((p) => {
            const base = { partitionIndex: p.partition, errorCode: KafkaError.NONE, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1, abortedTransactions: null, preferredReadReplica: -1, records: null as Buffer | null };
            if ('errorCode' in found) {
              any = true;
              return { ...base, errorCode: found.errorCode };
            }
            const log = found.log;
            const marks = { highWatermark: log.highWatermark, lastStableOffset: log.highWatermark, logStartOffset: log.logStartOffset };
            const offset = p.fetchOffset as number;
            if (p.partition !== 0) {
              any = true;
              return { ...base, errorCode: KafkaError.UNKNOWN_TOPIC_OR_PARTITION };
            }
            if (offset < marks.logStartOffset || offset > marks.highWatermark) {
              any = true;
              return { ...base, ...marks, errorCode: KafkaError.OFFSET_OUT_OF_RANGE };
            }
            const records = log.read(offset, Math.min(maxBytes, Math.max(1, p.partitionMaxBytes as number)));
            if (records.length > 0) any = true;
            return { ...base, ...marks, records: encodeBatch(records) };
          }),
        };
      });
      return { any, body: { throttleTimeMs: 0, errorCode: KafkaError.NONE, sessionId: 0, responses } };
    };
    let result = build();
    const wait = Math.min(Math.max(0, body.maxWaitMs as number), this.limits.maxFetchWaitMs);
    if (!result.any && wait > 0 && topics.length > 0) {
      // Long poll: answer when a record arrives on a topic of the request, or at maxWaitMs.
      const logs = topics.map((t) => this.topicFor(conn, t.topic)).flatMap((f) => ('log' in f ? [f.log] : []));
      await new Promise<void>((resolve) => {
        const cancels: Array<() => void> = [];
        const done = () => {
          clearTimeout(timer);
          conn.socket.off('close', done);
          for (const c of cancels) c();
          resolve();
        };
        const timer = setTimeout(done, wait);
        conn.socket.once('close', done);
        for (const log of logs) cancels.push(log.onAppend(done));
      });
      result = build();
    }
    return result.body;
  }

  private findCoordinator(body: Message, v: number): Message {
    const node = { nodeId: NODE_ID, host: this.advertisedHost(), port: this.advertisedPort(), errorCode: KafkaError.NONE, errorMessage: null };
    if (v >= 4) return { throttleTimeMs: 0, coordinators: ((body.coordinatorKeys as string[] | null) ?? []).map((key) => ({ key, ...node })) };
    return { throttleTimeMs: 0, ...node };
  }

  /** Group ids are kept apart per user: two clients may both use group "g". */
  private groupKey(conn: Connection, groupId: unknown): string {
    return typeof groupId === 'string' && groupId !== '' ? `${conn.user?.user ?? ''}\u0000${groupId}` : '';
  }

  private async joinGroup(conn: Connection, body: Message, v: number): Promise<Message> {
    const a = await this.groups.join({
      groupId: this.groupKey(conn, body.groupId),
      memberId: (body.memberId as string | null) ?? '',
      groupInstanceId: (body.groupInstanceId as string | null | undefined) ?? null,
      sessionTimeoutMs: body.sessionTimeoutMs as number,
      // v0 has no rebalance timeout: it is the session timeout.
      rebalanceTimeoutMs: (body.rebalanceTimeoutMs as number | undefined) ?? (body.sessionTimeoutMs as number),
      protocolType: (body.protocolType as string | null) ?? '',
      protocols: ((body.protocols as Message[] | null) ?? []).map((p) => ({ name: p.name as string, metadata: (p.metadata as Buffer | null) ?? Buffer.alloc(0) })),
      requireKnownMemberId: v >= 4,
    });
    return { throttleTimeMs: 0, ...a, skipAssignment: false };
  }

  private offsetCommit(conn: Connection, body: Message): Message {
    const groupId = this.groupKey(conn, body.groupId);
    return {
      throttleTimeMs: 0,
      topics: ((body.topics as Message[] | null) ?? []).map((t) => {
        const found = this.topicFor(conn, t.name);
        return {
          name: t.name,
          partitions: ((t.partitions as Message[] | null) ?? []).map((p) => {
            if ('errorCode' in found) return { partitionIndex: p.partitionIndex, errorCode: found.errorCode };
            if (groupId === '') return { partitionIndex: p.partitionIndex, errorCode: KafkaError.INVALID_GROUP_ID };
            const errorCode = this.groups.commit(
              { groupId, generationId: (body.generationId as number | undefined) ?? -1, memberId: (body.memberId as string | null | undefined) ?? '' },
              [{ topic: t.name as string, partition: p.partitionIndex as number, offset: p.committedOffset as number, metadata: (p.committedMetadata as string | null) ?? null }],
            );
            return { partitionIndex: p.partitionIndex, errorCode };
          }),
        };
      }),
    };
  }

  private offsetFetch(conn: Connection, body: Message, v: number): Message {
    const topicsOf = (groupId: string, topics: Message[] | null) => {
      const wanted = topics ?? [{ name: conn.user?.topic, partitionIndexes: [0] }];
      return wanted.map((t) => {
        const found = this.topicFor(conn, t.name);
        return {
          name: t.name,
          partitions: ((t.partitionIndexes as number[] | null) ?? []).map((partitionIndex) => {
            const c = this.groups.committed(groupId, t.name as string, partitionIndex);
            return {
              partitionIndex,
              committedOffset: 'errorCode' in found ? -1 : c.offset,
              committedLeaderEpoch: -1,
              metadata: c.metadata ?? '',
              errorCode: 'errorCode' in found ? found.errorCode : KafkaError.NONE,
            };
          }),
        };
      });
    };
    if (v >= 8) {
      return {
        throttleTimeMs: 0,
        groups: ((body.groups as Message[] | null) ?? []).map((g) => ({
          groupId: g.groupId,
          topics: topicsOf(this.groupKey(conn, g.groupId), g.topics as Message[] | null),
          errorCode: KafkaError.NONE,
        })),
      };
    }
    return { throttleTimeMs: 0, topics: topicsOf(this.groupKey(conn, body.groupId), body.topics as Message[] | null), errorCode: KafkaError.NONE };
  }
}
