import * as tls from 'node:tls';
import { Consumer, type ClusterMetadata } from '@platformatic/kafka';
import { ErrorCodes, GatewayError, isGatewayError } from '../errors.js';
import type { Logger } from '../log.js';

/**
 * The wire side of status events (contract §5, §6): a reader of the status topic over SASL_SSL
 * with SCRAM-SHA-512 (username the client id, password the client secret), TLS verification
 * always on. It reads assigned partitions (no consumer group): Metadata, ListOffsets and Fetch
 * only, so the operator grants READ and DESCRIBE on the topic and nothing on groups, and every
 * gateway of a client sees every event (docs/upstream.md, "Status events"). Where to read from and
 * what an event does is decided by delivery (src/delivery/status-events.ts), which keeps the
 * positions in SQLite; this file only speaks Kafka, through @platformatic/kafka.
 *
 * Every failure is a `GatewayError` with one of the `SCANGW_E_EVENTS_*` codes, so health can say
 * why events do not flow: {@link classifyTopicError}.
 */

/** Options of {@link StatusTopicReader}. */
export interface StatusTopicReaderOptions {
  /** `host:port` of each bootstrap broker. */
  bootstrapServers: readonly string[];
  topic: string;
  /** SASL username: `upstream.clientId` (§5). */
  username: string;
  /** SASL password: the client secret (§5), asked for at each connection; never logged. */
  password: () => string;
  /** PEM certificates trusted besides the default store (the `caFile`, read by status-topic-ca.ts; the embedded sandbox's CA). */
  extraCaPems?: readonly string[];
  /** Deadline of a TCP+TLS+SASL connect, in ms. */
  connectTimeoutMs: number;
  /** Deadline of one request, in ms; above `maxWaitMs`. */
  requestTimeoutMs: number;
  /** How long a fetch waits at the broker for a new event before it answers empty, in ms. */
  maxWaitMs: number;
  logger: Logger;
}

/** One record of the topic. */
export interface TopicRecord {
  partition: number;
  offset: bigint;
  /** The payload (a status object, §2.8), or null for a record without value. */
  value: Buffer | null;
}

/** What one fetch brought: records in offset order per partition, the end of each partition, and the next position of each. */
export interface FetchResult {
  records: TopicRecord[];
  /** Offset after the last record of each partition fetched (the high watermark). */
  ends: Map<number, bigint>;
  /** The position after this fetch, by partition (unchanged for a partition without records). */
  next: Map<number, bigint>;
  /** Partitions whose position lies outside the retained log (retention removed it, or the topic was made again). */
  outOfRange: number[];
}

/** Bytes one fetch may bring at most: thousands of status events. */
const MAX_FETCH_BYTES = 4 * 1024 * 1024;
/** A record batch of the Kafka protocol carries this attribute bit when it holds control records (transactions). */
const IS_CONTROL = 0b10_0000;

/** Reads the status topic; one instance is one connection's life: on a failure the caller closes it and makes a new one. */
export class StatusTopicReader {
  private readonly consumer: Consumer;
  private metadata: ClusterMetadata | undefined;

  constructor(private readonly options: StatusTopicReaderOptions) {
    const ca =
      options.extraCaPems && options.extraCaPems.length > 0
        ? [...defaultCas(), ...options.extraCaPems]
        : undefined;
    this.consumer = new Consumer({
      clientId: `scan-gateway`,
      // Required by the library's constructor; no group is ever joined (no JoinGroup, no OffsetCommit).
      groupId: `scan-gateway-unused`,
      bootstrapBrokers: [...options.bootstrapServers],
      tls: { rejectUnauthorized: true, ...(ca ? { ca } : {}) },
      sasl: { mechanism: 'SCRAM-SHA-512', username: options.username, password: options.password },
      connectTimeout: options.connectTimeoutMs,
      requestTimeout: options.requestTimeoutMs,
      timeout: options.requestTimeoutMs,
      // Reconnecting and backing off is the caller's (src/delivery/status-events.ts): one failure, one answer.
      retries: 0,
      autocreateTopics: false,
      maxWaitTime: options.maxWaitMs,
      minBytes: 1,
      maxBytes: MAX_FETCH_BYTES,
    });
  }

  /**
   * The partitions of the topic (Metadata). Also the first contact: TLS, SASL and the topic's
   * existence are checked here.
   *
   * @throws GatewayError `SCANGW_E_EVENTS_*` ({@link classifyTopicError}).
   */
  async partitions(): Promise<number[]> {
    const topic = this.options.topic;
    const metadata = await this.call(() =>
      this.consumer.metadata({ topics: [topic], autocreateTopics: false, forceUpdate: true }),
    );
    const found = metadata.topics.get(topic);
    if (!found || found.partitionsCount === 0) {
      throw new GatewayError(
        ErrorCodes.EVENTS_TOPIC,
        `the status topic ${topic} is not in the brokers' metadata (missing, or not described to this client)`,
      );
    }
    this.metadata = metadata;
    return found.partitions.map((_, i) => i);
  }

  /**
   * The offset of each partition (ListOffsets): the first retained (`earliest`), the next to be
   * written (`latest`), or the first whose record was written at or after `since` (ms since the
   * epoch; `latest` where there is none).
   *
   * @throws GatewayError `SCANGW_E_EVENTS_*`.
   */
  async offsets(which: 'earliest' | 'latest' | { since: number }): Promise<Map<number, bigint>> {
    const topic = this.options.topic;
    const timestamp =
      which === 'earliest'
        ? -2n
        : which === 'latest'
          ? -1n
          : BigInt(Math.max(0, Math.floor(which.since)));
    const answer = await this.call(() => this.consumer.listOffsets({ topics: [topic], timestamp }));
    const found = new Map(
      (answer.get(topic) ?? []).map((offset, partition) => [partition, offset]),
    );
    if (typeof which === 'object' && [...found.values()].some((o) => o < 0n)) {
      // Kafka answers -1 where no record is that recent: read from the end there.
      const latest = await this.offsets('latest');
      for (const [p, o] of found) if (o < 0n) found.set(p, latest.get(p) ?? 0n);
    }
    return found;
  }

  /**
   * One fetch of every partition from `positions` (Fetch, long-polling up to `maxWaitMs`).
   *
   * @throws GatewayError `SCANGW_E_EVENTS_*`; a position out of range is no error, it is in {@link FetchResult.outOfRange}.
   */
  async fetch(positions: ReadonlyMap<number, bigint>): Promise<FetchResult> {
    const metadata = this.metadata;
    const topicMeta = metadata?.topics.get(this.options.topic);
    if (!metadata || !topicMeta)
      throw new GatewayError(ErrorCodes.INTERNAL, 'fetch before partitions()');
    const byLeader = new Map<
      number,
      {
        partition: number;
        currentLeaderEpoch: number;
        fetchOffset: bigint;
        lastFetchedEpoch: number;
        partitionMaxBytes: number;
      }[]
    >();
    for (const [partition, fetchOffset] of positions) {
      const leader = topicMeta.partitions[partition]?.leader ?? -1;
      const list = byLeader.get(leader) ?? [];
      list.push({
        partition,
        fetchOffset,
        currentLeaderEpoch: -1,
        lastFetchedEpoch: -1,
        partitionMaxBytes: MAX_FETCH_BYTES,
      });
      byLeader.set(leader, list);
    }
    const result: FetchResult = {
      records: [],
      ends: new Map(),
      next: new Map(positions),
      outOfRange: [],
    };
    await Promise.all(
      [...byLeader].map(async ([node, partitions]) => {
        let response;
        try {
          response = await this.consumer.fetch({
            node,
            topics: [{ topicId: topicMeta.id, partitions }],
          });
        } catch (err) {
          // A partition answered OFFSET_OUT_OF_RANGE: the others' records are still in the response.
          const partial = (err as { response?: typeof response }).response;
          if (
            !partial ||
            !(err as { findBy?: (k: string, v: unknown) => unknown }).findBy?.(
              'apiId',
              'OFFSET_OUT_OF_RANGE',
            )
          )
            throw classifyTopicError(err, this.options.topic);
          response = partial;
        }
        for (const topicAnswer of response.responses) {
          for (const p of topicAnswer.partitions) {
            if (p.errorCode === 1) {
              result.outOfRange.push(p.partitionIndex);
              continue;
            }
            result.ends.set(p.partitionIndex, p.highWatermark);
            const from = positions.get(p.partitionIndex) ?? 0n;
            for (const batch of p.records ?? []) {
              const last = batch.firstOffset + BigInt(batch.lastOffsetDelta);
              if (last + 1n > (result.next.get(p.partitionIndex) ?? 0n))
                result.next.set(p.partitionIndex, last + 1n);
              if (batch.attributes & IS_CONTROL) continue;
              for (const record of batch.records) {
                const offset = batch.firstOffset + BigInt(record.offsetDelta);
                // A fetch may start at the beginning of a batch before the position asked for.
                if (offset < from) continue;
                result.records.push({ partition: p.partitionIndex, offset, value: record.value });
              }
            }
          }
        }
      }),
    ).catch((err: unknown) => {
      throw classifyTopicError(err, this.options.topic);
    });
    return result;
  }

  /** Closes the connections. Safe to call more than once. */
  async close(): Promise<void> {
    // Forced: a fetch waiting at the broker is abandoned (its events are read again later).
    await new Promise<void>((resolve) => {
      this.consumer.close(true, (err) => {
        if (err)
          this.options.logger.debug({ err: String(err) }, 'closing the status topic reader failed');
        resolve();
      });
    });
  }

  private async call<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      throw classifyTopicError(err, this.options.topic);
    }
  }
}

/** The default trust store: listed because passing `ca` to TLS replaces it (see upstream/dispatcher.ts). */
function defaultCas(): string[] {
  const getCa = (tls as { getCACertificates?: (kind: string) => string[] }).getCACertificates;
  return typeof getCa === 'function' ? getCa('default') : [...tls.rootCertificates];
}

/** Node's and OpenSSL's codes of a certificate that is not trusted or does not fit. */
const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|UNABLE_TO_|SELF_SIGNED|DEPTH_ZERO|CERT_|HOSTNAME_MISMATCH)/;
const TOPIC_ERRORS = [
  'UNKNOWN_TOPIC_OR_PARTITION',
  'TOPIC_AUTHORIZATION_FAILED',
  'UNKNOWN_TOPIC_ID',
];

/** Every error inside `err`: itself, its causes, and the members of aggregate errors (the library nests them). */
function* nested(err: unknown, depth = 0): Generator<Record<string, unknown>> {
  if (err === null || typeof err !== 'object' || depth > 6) return;
  const e = err as Record<string, unknown>;
  yield e;
  if (Array.isArray(e.errors)) for (const inner of e.errors) yield* nested(inner, depth + 1);
  if (e.cause !== undefined) yield* nested(e.cause, depth + 1);
}

/**
 * The gateway's error for a failure of the Kafka client: `SCANGW_E_EVENTS_TLS` (a certificate
 * problem), `SCANGW_E_EVENTS_AUTH` (SASL refused), `SCANGW_E_EVENTS_TOPIC` (no such topic, or not
 * authorized on it), else `SCANGW_E_EVENTS_NETWORK`. The message says what happened in words, with
 * the library's own text after it; it never holds the secret (SCRAM never sends it).
 */
export function classifyTopicError(err: unknown, topic: string): GatewayError {
  if (isGatewayError(err)) return err;
  const all = [...nested(err)];
  const text = (e: Record<string, unknown>) => `${typeof e.message === 'string' ? e.message : ''}`;
  const detail = all
    .map(text)
    .filter((m, i, a) => m !== '' && a.indexOf(m) === i)
    .slice(0, 3)
    .join(': ');
  const tlsError = all.find((e) => typeof e.code === 'string' && TLS_CODES.test(e.code));
  if (tlsError) {
    return new GatewayError(
      ErrorCodes.EVENTS_TLS,
      `the brokers' TLS certificate is refused (${String(tlsError.code)}): ${text(tlsError)}`,
      { cause: err, details: { notSent: true } },
    );
  }
  if (
    all.some(
      (e) =>
        e.code === 'PLT_KFK_AUTHENTICATION' ||
        e.apiId === 'SASL_AUTHENTICATION_FAILED' ||
        e.apiId === 'ILLEGAL_SASL_STATE' ||
        e.apiId === 'UNSUPPORTED_SASL_MECHANISM',
    )
  ) {
    return new GatewayError(
      ErrorCodes.EVENTS_AUTH,
      `the brokers refused SASL SCRAM-SHA-512 authentication of the client id: ${detail}`,
      { cause: err },
    );
  }
  const topicError = all.find((e) => typeof e.apiId === 'string' && TOPIC_ERRORS.includes(e.apiId));
  if (topicError) {
    return new GatewayError(
      ErrorCodes.EVENTS_TOPIC,
      `the status topic ${topic} cannot be read (${String(topicError.apiId)})`,
      { cause: err },
    );
  }
  // The library turns UNKNOWN_TOPIC_OR_PARTITION in Metadata into a UserError of its own words.
  if (all.some((e) => e.code === 'PLT_KFK_USER' && text(e).startsWith('Unknown topic'))) {
    return new GatewayError(
      ErrorCodes.EVENTS_TOPIC,
      `the status topic ${topic} cannot be read (UNKNOWN_TOPIC_OR_PARTITION)`,
      { cause: err },
    );
  }
  return new GatewayError(
    ErrorCodes.EVENTS_NETWORK,
    `the brokers cannot be reached or did not answer: ${detail || String(err)}`,
    { cause: err, retryable: true },
  );
}
