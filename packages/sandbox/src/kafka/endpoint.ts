import type { ScanStatusWire } from '@scan-gateway/contract';
import type { Logger } from '../log.js';
import type { FaultSwitch } from '../faults.js';
import type { SandboxClient, SandboxKafkaInfo, SandboxKafkaOptions } from '../types.js';
import { KafkaBroker } from './broker.js';
import { makeSandboxTls } from './ca.js';

/** Default port of the sandbox's Kafka endpoint (the usual port of a Kafka SSL listener). */
export const DEFAULT_KAFKA_PORT = 9093;

/** Most status events held back by `kafkaEventDelayMs` at once; beyond it they are published at once. */
export const MAX_DELAYED_EVENTS = 10_000;

/** The status topic of a client (contract §6, `{env}-{client_internal_name}-status-event` with env `sandbox`). */
export function statusTopic(client: Pick<SandboxClient, 'clientId' | 'internalName'>): string {
  return `sandbox-${client.internalName ?? client.clientId}-status-event`;
}

/**
 * The sandbox's Kafka endpoint (contract §5, §6): a {@link KafkaBroker} whose users are the
 * sandbox's OAuth clients (user = client id, password = client secret), each with its status
 * topic, and the publisher of status events: key = requestId (decimal text), value = the status
 * object as JSON, exactly as `GET …/status` answers it. Obeys the `kafka*` faults.
 */
export class SandboxKafka {
  private readonly delayed = new Set<NodeJS.Timeout>();
  private published = 0;

  private constructor(
    private readonly broker: KafkaBroker,
    private readonly clients: SandboxClient[],
    readonly caPem: string,
    private readonly faults: FaultSwitch,
    private readonly log: Logger,
  ) {}

  /**
   * Makes the CA and certificates and listens. Rejects with `LISTEN` when the address is taken,
   * `SANDBOX_KAFKA` when the certificates cannot be made.
   */
  static async start(
    clients: SandboxClient[],
    options: SandboxKafkaOptions & { host: string; port: number },
    faults: FaultSwitch,
    logger: Logger,
  ): Promise<SandboxKafka> {
    const tls = await makeSandboxTls([options.host]);
    const broker = new KafkaBroker({
      host: options.host,
      port: options.port,
      tls,
      users: clients.map((c) => ({
        user: c.clientId,
        password: c.clientSecret,
        topic: statusTopic(c),
      })),
      retention: {
        ...(options.maxEvents !== undefined ? { maxEvents: options.maxEvents } : {}),
        ...(options.maxAgeMs !== undefined ? { maxAgeMs: options.maxAgeMs } : {}),
      },
      limits: {
        ...(options.maxConnections !== undefined ? { maxConnections: options.maxConnections } : {}),
        ...(options.maxRequestBytes !== undefined
          ? { maxRequestBytes: options.maxRequestBytes }
          : {}),
      },
      groups: {
        ...(options.maxGroups !== undefined ? { maxGroups: options.maxGroups } : {}),
        ...(options.maxGroupMembers !== undefined ? { maxMembers: options.maxGroupMembers } : {}),
      },
      faults: () => ({ saslRefused: faults.current().kafkaSaslRefused === true }),
      logger,
    });
    const endpoint = new SandboxKafka(
      broker,
      clients,
      tls.caPem,
      faults,
      logger.child({ component: 'sandbox-kafka' }),
    );
    if (faults.current().kafkaDown !== true) await broker.start();
    else await broker.start().then(() => broker.down());
    faults.onChange((f) => endpoint.followDown(f.kafkaDown === true));
    return endpoint;
  }

  private followDown(down: boolean): void {
    if (down === !this.broker.listening) return;
    const change = down ? this.broker.down() : this.broker.start();
    change.then(
      () =>
        this.log.info({ down }, down ? 'Kafka endpoint down (fault)' : 'Kafka endpoint up again'),
      (err: unknown) => this.log.error({ err }, 'Kafka endpoint could not come back up'),
    );
  }

  /** `host:port` of the broker. */
  get bootstrapServers(): string {
    return this.broker.bootstrapServers;
  }

  /** What `GET /_sandbox/kafka` answers for `clientId` (default the first client); undefined for an unknown one. */
  info(clientId?: string): SandboxKafkaInfo | undefined {
    const client =
      clientId === undefined ? this.clients[0] : this.clients.find((c) => c.clientId === clientId);
    if (!client) return undefined;
    return {
      bootstrapServers: this.bootstrapServers,
      topic: statusTopic(client),
      securityProtocol: 'SASL_SSL',
      saslMechanism: 'SCRAM-SHA-512',
      caPem: this.caPem,
    };
  }

  /** Publishes one status event of `clientId`'s batch (after `kafkaEventDelayMs`, twice at `kafkaDuplicateRate`). */
  publish(clientId: string, status: ScanStatusWire): void {
    const client = this.clients.find((c) => c.clientId === clientId);
    if (!client) return;
    const f = this.faults.current();
    const copies =
      (f.kafkaDuplicateRate ?? 0) > 0 && Math.random() < (f.kafkaDuplicateRate ?? 0) ? 2 : 1;
    const record = {
      timestamp: Date.now(),
      key: Buffer.from(String(status.requestId)),
      value: Buffer.from(JSON.stringify(status)),
      headers: [],
    };
    const write = () => {
      this.broker.append(
        statusTopic(client),
        Array.from({ length: copies }, () => ({ ...record, timestamp: Date.now() })),
      );
      this.published += copies;
    };
    const delay = f.kafkaEventDelayMs ?? 0;
    if (delay <= 0 || this.delayed.size >= MAX_DELAYED_EVENTS) {
      write();
      return;
    }
    const timer = setTimeout(() => {
      this.delayed.delete(timer);
      write();
    }, delay);
    timer.unref();
    this.delayed.add(timer);
  }

  /**
   * Appends records as they are to `clientId`'s topic, past the faults: for tests of a consumer's
   * handling of events the sandbox itself would never publish (invalid JSON, foreign requestIds).
   * Gives the offset of the first, undefined for an unknown client.
   */
  appendRaw(
    clientId: string,
    records: Array<{ key: string | null; value: string | null }>,
  ): number | undefined {
    const client = this.clients.find((c) => c.clientId === clientId);
    if (!client) return undefined;
    const now = Date.now();
    return this.broker.append(
      statusTopic(client),
      records.map((r) => ({
        timestamp: now,
        key: r.key === null ? null : Buffer.from(r.key),
        value: r.value === null ? null : Buffer.from(r.value),
        headers: [],
      })),
    );
  }

  /** Events written to the topics since start (duplicates count twice). */
  get publishedCount(): number {
    return this.published;
  }

  async close(): Promise<void> {
    for (const t of this.delayed) clearTimeout(t);
    this.delayed.clear();
    await this.broker.close();
  }
}
