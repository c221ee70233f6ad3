import type { TLSSocket } from 'node:tls';
import type { BrokerUser } from './broker-options.js';
import type { Message } from './codec.js';
import type { GroupCoordinator } from './groups.js';
import { KafkaError } from './messages.js';
import { decodeBatches, encodeBatch } from './records.js';
import type { TopicLog } from './topic-log.js';

/** Kafka's "authorized operations not requested" (INT32_MIN). */
const OPS_NOT_REQUESTED = -2147483648;
const CLUSTER_ID = 'scan-gateway-sandbox';
/** The one node of the cluster: leader of every partition and coordinator of every group. */
const NODE_ID = 0;

/** The client a request came on: its SASL user once authenticated, and its socket (a long poll ends when it closes). */
export interface ApiClient {
  user?: BrokerUser | undefined;
  socket: TLSSocket;
}

/** What the APIs read and change: the broker's topics and groups, and where clients find it. */
export interface ApiContext {
  /** Topic name → its log. */
  topics: ReadonlyMap<string, TopicLog>;
  groups: GroupCoordinator;
  /** Host and port put in Metadata and FindCoordinator. */
  advertised(): { host: string; port: number };
  /** Longest a Fetch waits for data, whatever its maxWaitMs says, in ms. */
  maxFetchWaitMs: number;
}

/**
 * The broker's answers to the APIs past authentication: Metadata, Produce, ListOffsets, Fetch (a
 * long poll), FindCoordinator, the group APIs (over `groups.ts`) and offsets. Each takes a decoded
 * request body and gives the response body (`messages.ts` shapes); a user reaches only its own
 * topic (TOPIC_AUTHORIZATION_FAILED otherwise) and its own group ids.
 */
export class TopicApis {
  constructor(private readonly ctx: ApiContext) {}

  /** The topic a user may use by this name, or the error for it. */
  private topicFor(conn: ApiClient, name: unknown): { log: TopicLog } | { errorCode: number } {
    const log = typeof name === 'string' ? this.ctx.topics.get(name) : undefined;
    if (!log) return { errorCode: KafkaError.UNKNOWN_TOPIC_OR_PARTITION };
    if (conn.user?.topic !== name) return { errorCode: KafkaError.TOPIC_AUTHORIZATION_FAILED };
    return { log };
  }

  metadata(conn: ApiClient, body: Message, v: number): Message {
    const requested = body.topics as Message[] | null;
    // Null topics (v1+), or an empty list in v0, means every topic the user may see.
    const names =
      requested === null || (v === 0 && requested.length === 0)
        ? [conn.user?.topic ?? '']
        : requested.map((t) => t.name as string);
    return {
      throttleTimeMs: 0,
      brokers: [
        {
          nodeId: NODE_ID,
          host: this.ctx.advertised().host,
          port: this.ctx.advertised().port,
          rack: null,
        },
      ],
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
              ? [
                  {
                    errorCode: 0,
                    partitionIndex: 0,
                    leaderId: NODE_ID,
                    leaderEpoch: 0,
                    replicaNodes: [NODE_ID],
                    isrNodes: [NODE_ID],
                    offlineReplicas: [],
                  },
                ]
              : [],
          topicAuthorizedOperations: OPS_NOT_REQUESTED,
        };
      }),
      clusterAuthorizedOperations: OPS_NOT_REQUESTED,
    };
  }

  produce(conn: ApiClient, body: Message, answer: (b: Message) => void): void {
    const acks = body.acks as number;
    const responses = ((body.topicData as Message[] | null) ?? []).map((t) => {
      const found = this.topicFor(conn, t.name);
      return {
        name: t.name,
        partitionResponses: ((t.partitionData as Message[] | null) ?? []).map((p) => {
          const result = {
            index: p.index,
            errorCode: KafkaError.NONE,
            baseOffset: -1,
            logAppendTimeMs: -1,
            logStartOffset: -1,
            recordErrors: [],
            errorMessage: null as string | null,
          };
          if (acks !== 0 && acks !== 1 && acks !== -1)
            return { ...result, errorCode: KafkaError.INVALID_REQUIRED_ACKS };
          if ('errorCode' in found) return { ...result, errorCode: found.errorCode };
          if (p.index !== 0) return { ...result, errorCode: KafkaError.UNKNOWN_TOPIC_OR_PARTITION };
          let decoded: ReturnType<typeof decodeBatches>;
          try {
            decoded = decodeBatches((p.records as Buffer | null) ?? Buffer.alloc(0));
          } catch (err) {
            return {
              ...result,
              errorCode: KafkaError.CORRUPT_MESSAGE,
              errorMessage: (err as Error).message,
            };
          }
          if ('compressed' in decoded)
            return {
              ...result,
              errorCode: KafkaError.UNSUPPORTED_COMPRESSION_TYPE,
              errorMessage: 'the sandbox stores uncompressed batches only',
            };
          const baseOffset = found.log.append(decoded.records);
          return { ...result, baseOffset, logStartOffset: found.log.logStartOffset };
        }),
      };
    });
    // acks=0: the producer expects no answer at all.
    if (acks !== 0) answer({ responses, throttleTimeMs: 0 });
  }

  listOffsets(conn: ApiClient, body: Message): Message {
    return {
      throttleTimeMs: 0,
      topics: ((body.topics as Message[] | null) ?? []).map((t) => {
        const found = this.topicFor(conn, t.name);
        return {
          name: t.name,
          partitions: ((t.partitions as Message[] | null) ?? []).map((p) => {
            const base = {
              partitionIndex: p.partitionIndex,
              errorCode: KafkaError.NONE,
              timestamp: -1,
              offset: -1,
              leaderEpoch: 0,
            };
            if ('errorCode' in found) return { ...base, errorCode: found.errorCode };
            if (p.partitionIndex !== 0)
              return { ...base, errorCode: KafkaError.UNKNOWN_TOPIC_OR_PARTITION };
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

  async fetch(conn: ApiClient, body: Message): Promise<Message> {
    const topics = (body.topics as Message[] | null) ?? [];
    const maxBytes = Math.max(1, (body.maxBytes as number | undefined) ?? 50 * 1024 * 1024);
    const build = () => {
      let any = false;
      const responses = topics.map((t) => {
        const found = this.topicFor(conn, t.topic);
        return {
          topic: t.topic,
          partitions: ((t.partitions as Message[] | null) ?? []).map((p) => {
            const base = {
              partitionIndex: p.partition,
              errorCode: KafkaError.NONE,
              highWatermark: -1,
              lastStableOffset: -1,
              logStartOffset: -1,
              abortedTransactions: null,
              preferredReadReplica: -1,
              records: null as Buffer | null,
            };
            if ('errorCode' in found) {
              any = true;
              return { ...base, errorCode: found.errorCode };
            }
            const log = found.log;
            const marks = {
              highWatermark: log.highWatermark,
              lastStableOffset: log.highWatermark,
              logStartOffset: log.logStartOffset,
            };
            const offset = p.fetchOffset as number;
            if (p.partition !== 0) {
              any = true;
              return { ...base, errorCode: KafkaError.UNKNOWN_TOPIC_OR_PARTITION };
            }
            if (offset < marks.logStartOffset || offset > marks.highWatermark) {
              any = true;
              return { ...base, ...marks, errorCode: KafkaError.OFFSET_OUT_OF_RANGE };
            }
            const records = log.read(
              offset,
              Math.min(maxBytes, Math.max(1, p.partitionMaxBytes as number)),
            );
            if (records.length > 0) any = true;
            return { ...base, ...marks, records: encodeBatch(records) };
          }),
        };
      });
      return {
        any,
        body: { throttleTimeMs: 0, errorCode: KafkaError.NONE, sessionId: 0, responses },
      };
    };
    let result = build();
    const wait = Math.min(Math.max(0, body.maxWaitMs as number), this.ctx.maxFetchWaitMs);
    if (!result.any && wait > 0 && topics.length > 0) {
      // Long poll: answer when a record arrives on a topic of the request, or at maxWaitMs.
      const logs = topics
        .map((t) => this.topicFor(conn, t.topic))
        .flatMap((f) => ('log' in f ? [f.log] : []));
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

  findCoordinator(body: Message, v: number): Message {
    const node = {
      nodeId: NODE_ID,
      host: this.ctx.advertised().host,
      port: this.ctx.advertised().port,
      errorCode: KafkaError.NONE,
      errorMessage: null,
    };
    if (v >= 4)
      return {
        throttleTimeMs: 0,
        coordinators: ((body.coordinatorKeys as string[] | null) ?? []).map((key) => ({
          key,
          ...node,
        })),
      };
    return { throttleTimeMs: 0, ...node };
  }

  /** Group ids are kept apart per user: two clients may both use group "g". */
  private groupKey(conn: ApiClient, groupId: unknown): string {
    return typeof groupId === 'string' && groupId !== ''
      ? `${conn.user?.user ?? ''}\u0000${groupId}`
      : '';
  }

  async joinGroup(conn: ApiClient, body: Message, v: number): Promise<Message> {
    const a = await this.ctx.groups.join({
      groupId: this.groupKey(conn, body.groupId),
      memberId: (body.memberId as string | null) ?? '',
      groupInstanceId: (body.groupInstanceId as string | null | undefined) ?? null,
      sessionTimeoutMs: body.sessionTimeoutMs as number,
      // v0 has no rebalance timeout: it is the session timeout.
      rebalanceTimeoutMs:
        (body.rebalanceTimeoutMs as number | undefined) ?? (body.sessionTimeoutMs as number),
      protocolType: (body.protocolType as string | null) ?? '',
      protocols: ((body.protocols as Message[] | null) ?? []).map((p) => ({
        name: p.name as string,
        metadata: (p.metadata as Buffer | null) ?? Buffer.alloc(0),
      })),
      requireKnownMemberId: v >= 4,
    });
    return { throttleTimeMs: 0, ...a, skipAssignment: false };
  }

  offsetCommit(conn: ApiClient, body: Message): Message {
    const groupId = this.groupKey(conn, body.groupId);
    return {
      throttleTimeMs: 0,
      topics: ((body.topics as Message[] | null) ?? []).map((t) => {
        const found = this.topicFor(conn, t.name);
        return {
          name: t.name,
          partitions: ((t.partitions as Message[] | null) ?? []).map((p) => {
            if ('errorCode' in found)
              return { partitionIndex: p.partitionIndex, errorCode: found.errorCode };
            if (groupId === '')
              return { partitionIndex: p.partitionIndex, errorCode: KafkaError.INVALID_GROUP_ID };
            const errorCode = this.ctx.groups.commit(
              {
                groupId,
                generationId: (body.generationId as number | undefined) ?? -1,
                memberId: (body.memberId as string | null | undefined) ?? '',
              },
              [
                {
                  topic: t.name as string,
                  partition: p.partitionIndex as number,
                  offset: p.committedOffset as number,
                  metadata: (p.committedMetadata as string | null) ?? null,
                },
              ],
            );
            return { partitionIndex: p.partitionIndex, errorCode };
          }),
        };
      }),
    };
  }

  offsetFetch(conn: ApiClient, body: Message, v: number): Message {
    const topicsOf = (groupId: string, topics: Message[] | null) => {
      const wanted = topics ?? [{ name: conn.user?.topic, partitionIndexes: [0] }];
      return wanted.map((t) => {
        const found = this.topicFor(conn, t.name);
        return {
          name: t.name,
          partitions: ((t.partitionIndexes as number[] | null) ?? []).map((partitionIndex) => {
            const c = this.ctx.groups.committed(groupId, t.name as string, partitionIndex);
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
    return {
      throttleTimeMs: 0,
      topics: topicsOf(this.groupKey(conn, body.groupId), body.topics as Message[] | null),
      errorCode: KafkaError.NONE,
    };
  }

  async syncGroup(conn: ApiClient, body: Message): Promise<Message> {
    const a = await this.ctx.groups.sync({
      groupId: this.groupKey(conn, body.groupId),
      generationId: body.generationId as number,
      memberId: body.memberId as string,
      assignments: ((body.assignments as Message[] | null) ?? []).map((x) => ({
        memberId: x.memberId as string,
        assignment: (x.assignment as Buffer | null) ?? Buffer.alloc(0),
      })),
    });
    return { throttleTimeMs: 0, ...a };
  }

  heartbeat(conn: ApiClient, body: Message): Message {
    return {
      throttleTimeMs: 0,
      errorCode: this.ctx.groups.heartbeat({
        groupId: this.groupKey(conn, body.groupId),
        generationId: body.generationId as number,
        memberId: body.memberId as string,
      }),
    };
  }

  leaveGroup(conn: ApiClient, body: Message, v: number): Message {
    const groupId = this.groupKey(conn, body.groupId);
    if (v < 3)
      return {
        throttleTimeMs: 0,
        errorCode: this.ctx.groups.leave(groupId, body.memberId as string),
      };
    const members = ((body.members as Message[] | null) ?? []).map((m) => ({
      memberId: m.memberId,
      groupInstanceId: m.groupInstanceId,
      errorCode: this.ctx.groups.leave(groupId, m.memberId as string),
    }));
    return { throttleTimeMs: 0, errorCode: KafkaError.NONE, members };
  }
}
