import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { createServer, type Server, type TLSSocket } from 'node:tls';
import { ErrorCodes, GatewayError, isGatewayError } from '@scan-gateway/service-kit/errors';
import { RefusalLog } from '@scan-gateway/service-kit/refusal-log';
import type { Logger } from '../log.js';
import {
  DEFAULT_BROKER_LIMITS,
  type BrokerLimits,
  type BrokerOptions,
  type BrokerUser,
} from './broker-options.js';
import type { Message } from './codec.js';
import { apiVersionsBody, parseRequest, responseFrame, type RequestHeader } from './frames.js';
import { DEFAULT_GROUP_LIMITS, GroupCoordinator } from './groups.js';
import { ApiKey, KafkaError, type ApiKeyName } from './messages.js';
import type { ProducedRecord } from './records.js';
import { ScramServer, scramCredential, type ScramCredential } from './scram.js';
import { TopicApis } from './topic-apis.js';
import { DEFAULT_RETENTION, TopicLog } from './topic-log.js';

export {
  DEFAULT_BROKER_LIMITS,
  type BrokerFaults,
  type BrokerLimits,
  type BrokerOptions,
  type BrokerUser,
} from './broker-options.js';

/** One client connection: its socket, its SASL state and the requests read ahead of the answer. */
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
 *
 * This file holds listening, connections (framing, order, back-pressure, bounds), SASL and the
 * dispatch; the frames are read and written in `frames.ts`, and the APIs past authentication
 * answered in `topic-apis.ts`.
 */
export class KafkaBroker {
  private server: Server | undefined;
  private readonly connections = new Set<Connection>();
  private readonly users = new Map<string, { user: BrokerUser; credential: ScramCredential }>();
  private readonly topics = new Map<string, TopicLog>();
  private readonly groups: GroupCoordinator;
  private readonly apis: TopicApis;
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
    this.apis = new TopicApis({
      topics: this.topics,
      groups: this.groups,
      advertised: () => ({ host: this.advertisedHost(), port: this.advertisedPort() }),
      maxFetchWaitMs: this.limits.maxFetchWaitMs,
    });
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
    const server = createServer({
      key: this.options.tls.keyPem,
      cert: this.options.tls.certPem,
      minVersion: 'TLSv1.2',
    });
    server.maxConnections = this.limits.maxConnections;
    server.on('secureConnection', (socket) => this.accept(socket));
    server.on('tlsClientError', (err, socket) => {
      // A client that does not trust the sandbox CA ends here; it is the client's to report.
      this.log.debug(
        { err: err.message, remote: socket.remoteAddress },
        'Kafka TLS handshake failed',
      );
    });
    const port = this.boundPort || this.options.port;
    server.listen({ host: this.options.host, port });
    try {
      await Promise.race([
        once(server, 'listening'),
        once(server, 'error').then(([err]) => Promise.reject(err as Error)),
      ]);
    } catch (err) {
      throw new GatewayError(
        ErrorCodes.LISTEN,
        `the sandbox's Kafka endpoint cannot listen on ${this.options.host}:${port}: ${(err as Error).message}`,
        { cause: err },
      );
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
    const conn: Connection = {
      socket,
      remote: `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? 0}`,
      queued: 0,
      queuedBytes: 0,
      chain: Promise.resolve(),
      closed: false,
    };
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
    socket.on('error', (err) =>
      this.log.debug({ err: err.message, remote: conn.remote }, 'Kafka connection error'),
    );
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
    if (
      conn.queued >= this.limits.maxQueuedRequests ||
      conn.queuedBytes >= this.limits.maxRequestBytes
    )
      conn.socket.pause();
    conn.chain = conn.chain.then(async () => {
      try {
        if (!conn.closed) await this.handle(conn, frame);
      } catch (err) {
        this.drop(conn, isGatewayError(err) ? err.message : `failed: ${(err as Error).message}`);
        if (!isGatewayError(err)) this.log.error({ err }, 'Kafka request handling failed');
      } finally {
        conn.queued -= 1;
        conn.queuedBytes -= frame.length;
        if (
          conn.queued < this.limits.maxQueuedRequests &&
          conn.queuedBytes < this.limits.maxRequestBytes &&
          !conn.closed
        )
          conn.socket.resume();
      }
    });
  }

  private drop(conn: Connection, why?: string): void {
    if (why !== undefined && !conn.closed)
      this.drops.note({ remote: conn.remote, user: conn.user?.user, reason: why });
    conn.closed = true;
    conn.socket.destroy();
  }

  private send(
    conn: Connection,
    api: ApiKeyName,
    version: number,
    correlationId: number,
    body: Message,
  ): void {
    if (!conn.closed) conn.socket.write(responseFrame(api, version, correlationId, body));
  }

  private async handle(conn: Connection, frame: Buffer): Promise<void> {
    let parsed: ReturnType<typeof parseRequest>;
    try {
      parsed = parseRequest(frame);
    } catch (err) {
      const header = isGatewayError(err)
        ? (err.details.header as RequestHeader | undefined)
        : undefined;
      // An ApiVersions of a version unknown here is answered in v0 with the versions spoken (KIP-511).
      if (header?.apiKey === ApiKey.ApiVersions) {
        this.send(
          conn,
          'ApiVersions',
          0,
          header.correlationId,
          apiVersionsBody(KafkaError.UNSUPPORTED_VERSION),
        );
        return;
      }
      throw err;
    }
    const { header, api, body } = parsed;
    const v = header.apiVersion;
    const answer = (b: Message) => this.send(conn, api, v, header.correlationId, b);
    if (
      !conn.user &&
      api !== 'ApiVersions' &&
      api !== 'SaslHandshake' &&
      api !== 'SaslAuthenticate'
    ) {
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
        answer({
          errorCode: ok
            ? KafkaError.NONE
            : conn.user
              ? KafkaError.ILLEGAL_SASL_STATE
              : KafkaError.UNSUPPORTED_SASL_MECHANISM,
          mechanisms: ['SCRAM-SHA-512'],
        });
        if (!ok) this.drop(conn, `SASL mechanism ${mechanism} refused`);
        return;
      }
      case 'SaslAuthenticate':
        return this.authenticate(conn, body, answer);
      case 'Metadata':
        return answer(this.apis.metadata(conn, body, v));
      case 'Produce':
        return this.apis.produce(conn, body, answer);
      case 'ListOffsets':
        return answer(this.apis.listOffsets(conn, body));
      case 'Fetch':
        return answer(await this.apis.fetch(conn, body));
      case 'FindCoordinator':
        return answer(this.apis.findCoordinator(body, v));
      case 'JoinGroup':
        return answer(await this.apis.joinGroup(conn, body, v));
      case 'SyncGroup':
        return answer(await this.apis.syncGroup(conn, body));
      case 'Heartbeat':
        return answer(this.apis.heartbeat(conn, body));
      case 'LeaveGroup':
        return answer(this.apis.leaveGroup(conn, body, v));
      case 'OffsetCommit':
        return answer(this.apis.offsetCommit(conn, body));
      case 'OffsetFetch':
        return answer(this.apis.offsetFetch(conn, body, v));
    }
  }

  private authenticate(conn: Connection, body: Message, answer: (b: Message) => void): void {
    const fail = (why: string) => {
      answer({
        errorCode: KafkaError.SASL_AUTHENTICATION_FAILED,
        errorMessage: `Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (${why})`,
        authBytes: Buffer.alloc(0),
        sessionLifetimeMs: 0,
      });
      // Kafka closes the connection after a failed authentication, once the answer is out.
      conn.closed = true;
      conn.socket.end();
      this.authRefusals.note({ remote: conn.remote, reason: why });
    };
    if (!conn.scram || conn.user) {
      answer({
        errorCode: KafkaError.ILLEGAL_SASL_STATE,
        errorMessage: 'SaslAuthenticate without SaslHandshake',
        authBytes: Buffer.alloc(0),
        sessionLifetimeMs: 0,
      });
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
    answer({
      errorCode: KafkaError.NONE,
      errorMessage: null,
      authBytes: step.reply,
      sessionLifetimeMs: 0,
    });
  }
}
