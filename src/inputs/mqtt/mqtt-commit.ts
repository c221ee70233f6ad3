import { createHash } from 'node:crypto';
import type { IPublishPacket } from 'mqtt';
import type { Logger } from '../../log.js';
import type { MqttInputConfig } from './schema.js';
import { CommitsInProgress, type AckEntry, type AckQueue } from './mqtt-acks.js';
import { messageToItem } from './mqtt-payload.js';
import type { PublishCut, PublishCuts } from './mqtt-publish-limit.js';
import type { LoopSleep } from '../../loop.js';
import type { IntakeItem, ItemOutcome } from '../types.js';
import type { MessageSink, MessageSubmitResult, MqttMessage } from './message-sink.js';

/** A committed message's read: its outcome from the intake, or 'committed' from a sink that reports none. */
export type Committed = ItemOutcome | 'committed';

const SUBMIT_RETRY_MAX_MS = 30_000;
/** Least time between two log lines about reads the buffer refused, in ms. */
const REFUSAL_LOG_MS = 10_000;

/** What {@link MessageCommits} asks of its input. */
export interface CommitHost {
  /** First delay before retrying a refused submit, in ms (doubles up to 30 s). */
  retryBaseMs: number;
  /** The input's own status topic: a message on it is not a read. */
  statusTopic: string | undefined;
  /** After a refusal: whether to give up (stopping, or the connection of `acks` is gone). */
  givenUp: (acks: AckQueue | undefined) => boolean;
  publishVerdict: (item: IntakeItem, committed: Committed, receivedAt: Date) => void;
  /** Test seam: a QoS 1 message's read is committed, its PUBACK not yet queued. */
  onCommitted?: (messageId: number) => void;
}

/**
 * The commit of MQTT messages' reads: each message's identity (packet id, topic, payload SHA-256)
 * kept against resends, its read submitted to the intake, retried with backoff while the
 * buffer refuses it (from `retryBaseMs`, doubling up to 30 s), one log line per 10 s about the
 * refusals, however many messages are in flight.
 */
export class MessageCommits {
  /** Commits not yet settled, so that a resend arriving meanwhile waits for its original's. */
  private readonly inProgress = new CommitsInProgress();
  /**
   * Packet ids whose latest message came new (no DUP) and is not committed (yet, or given up when
   * its connection went). The identity stored under such an id is of an older message whose PUBACK
   * the broker had (it handed the id out again), so a resend under it is of the new message and
   * must be stored even if topic and payload are the same. At most 65,535 entries.
   */
  private readonly notCommitted = new Set<number>();
  private refusalLoggedAt = -Infinity;
  private refusedSinceLog = 0;

  constructor(
    private readonly config: MqttInputConfig,
    private readonly sink: MessageSink,
    private readonly log: Logger,
    /** The retries' sleeps, ended by the input at a stop or a disconnect. */
    private readonly sleeps: LoopSleep,
    private readonly host: CommitHost,
  ) {}

  /** Messages taken and not yet settled (committed and acknowledged, or given up). */
  inflight = 0;
  /** mqtt.js callbacks held back while `maxInFlight` messages are in flight (TCP back-pressure). */
  private readonly held: (() => void)[] = [];
  private readonly work = new Set<Promise<void>>();

  /**
   * Takes a message the input accepts (`acks` the PUBACK order of its connection, for QoS 1);
   * `next` lets mqtt.js hand over the next packet, held back while `maxInFlight` are in flight.
   */
  receive(
    packet: IPublishPacket,
    next: () => void,
    cuts: PublishCuts,
    acks: AckQueue | undefined,
    receivedAt: Date,
  ): void {
    const payload = Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload);
    const cut = cuts.take(packet.topic, packet.messageId, payload);
    const entry = acks && packet.messageId !== undefined ? acks.add(packet.messageId) : undefined;
    this.inflight += 1;
    const job = this.take(packet, payload, receivedAt, acks, entry, cut).finally(() => {
      this.inflight -= 1;
      this.work.delete(job);
      while (this.held.length > 0 && this.inflight < this.config.maxInFlight) this.held.shift()!();
    });
    this.work.add(job);
    if (this.inflight >= this.config.maxInFlight) this.held.push(next);
    else next();
  }

  /** Resolves once every message taken so far is settled. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.work]);
  }

  /** Lets mqtt.js go on (the connection is closing: what it hands over is not taken). */
  releaseHeld(): void {
    for (const release of this.held.splice(0)) release();
  }

  /** No session on the broker: the packet ids start afresh. */
  forgetNotCommitted(): void {
    this.notCommitted.clear();
  }

  /**
   * Takes one message (`entry` its place in the PUBACK order of QoS 1): its read (or rejection)
   * committed with its identity, its verdict published, then acknowledged in order; a resend of a
   * message committed before is acknowledged only.
   */
  private async take(
    packet: IPublishPacket,
    payload: Buffer,
    receivedAt: Date,
    acks: AckQueue | undefined,
    entry: AckEntry | undefined,
    cut: PublishCut | undefined,
  ): Promise<void> {
    const topic = packet.topic;
    if (topic === this.host.statusTopic || topic === this.config.verdictTopic) {
      // Our own status or verdict, seen through a wildcard subscription: not a read.
      if (entry) acks!.complete(entry);
      return;
    }
    // A cut payload (over maxPayloadBytes) is named by the hash and size of the whole of it.
    const payloadSha256 =
      cut?.payloadSha256 ?? (entry ? createHash('sha256').update(payload).digest() : undefined);
    const message =
      entry && payloadSha256
        ? { packetId: entry.messageId, topic, payloadSha256, dup: packet.dup }
        : undefined;
    const key = message ? CommitsInProgress.key(message) : undefined;
    // A resend of a message whose commit is still under way (its connection dropped meanwhile):
    // wait for that commit, so that intake finds the message's identity committed.
    if (key !== undefined && message!.dup) await this.inProgress.earlier(key);
    if (message) {
      if (!message.dup) this.notCommitted.add(message.packetId);
      else if (this.notCommitted.has(message.packetId)) message.dup = false;
    }
    const payloadBytes = cut?.payloadBytes ?? payload.length;
    const item = messageToItem(this.config, topic, payload, receivedAt, payloadBytes);
    if (item.kind === 'rejection')
      this.log.warn(
        { topic, reason: item.rejection.reason, bytes: payloadBytes },
        'message rejected',
      );
    const committed = this.submit(item, message, () => this.host.givenUp(acks));
    if (key !== undefined) this.inProgress.add(key, committed);
    const result = await committed;
    if (result && message) this.notCommitted.delete(message.packetId);
    if (result && result !== 'redelivered') this.host.publishVerdict(item, result, receivedAt);
    if (!result || !entry) return;
    if (result === 'redelivered')
      this.log.debug(
        { topic, messageId: entry.messageId },
        'resent message was committed before; acknowledged only',
      );
    else this.host.onCommitted?.(entry.messageId);
    acks!.complete(entry);
  }

  /**
   * Submits with retry; answers the item's outcome once committed ('committed' when the sink
   * reports none), 'redelivered' (committed before, nothing stored), or false when given up
   * (`givenUp()` answers true after a refusal: stopping, or the connection that would acknowledge
   * is gone).
   */
  async submit(
    item: IntakeItem,
    message: MqttMessage | undefined,
    givenUp: () => boolean,
  ): Promise<Committed | 'redelivered' | false> {
    for (let attempt = 0; ; attempt++) {
      try {
        // QoS 0 has no identity to record: a plain submit.
        const result: MessageSubmitResult | void = message
          ? await this.sink.submitMessage([item], message)
          : await this.sink.submit([item]);
        if (result?.redelivered) return 'redelivered';
        return result?.outcomes[0] ?? 'committed';
      } catch (err) {
        // Given up without a PUBACK, the broker sends the message again; QoS 0 has no second chance.
        if (givenUp()) return false;
        const delayMs = Math.min(
          SUBMIT_RETRY_MAX_MS,
          this.host.retryBaseMs * 2 ** Math.min(attempt, 20),
        );
        if (attempt === 0) {
          // One line per 10 s, with how many more: at the quota every message in flight is refused.
          this.refusedSinceLog++;
          const now = performance.now();
          if (now - this.refusalLoggedAt >= REFUSAL_LOG_MS) {
            this.log.error(
              { err, retryInMs: delayMs, refusedReads: this.refusedSinceLog },
              'buffer refused MQTT reads; retrying, not acknowledged',
            );
            this.refusalLoggedAt = now;
            this.refusedSinceLog = 0;
          }
        }
        await this.sleeps.sleep(delayMs);
      }
    }
  }
}

/**
 * The body published on `verdictTopic` for a committed message's read (JSON):
 * `{ reference, verdict: ack|nak, reason, input, time }`, `reason` the code of a `nak` (null
 * with `ack`), `reference` the scan's (else the read's text), `time` when it was received.
 */
export function verdictBody(
  item: IntakeItem,
  committed: Committed,
  inputId: string,
  receivedAt: Date,
): string {
  const outcome = committed === 'committed' ? undefined : committed;
  const verdict =
    outcome?.verdict ??
    ((outcome ? outcome.outcome === 'scan' : item.kind === 'read') ? 'ack' : 'nak');
  const code =
    outcome?.code ?? (item.kind === 'rejection' ? (item.rejection.code ?? 'refused') : undefined);
  const raw = item.kind === 'read' ? item.read.raw : item.rejection.raw;
  return JSON.stringify({
    reference: outcome?.reference ?? raw.toString('utf8'),
    verdict,
    reason: verdict === 'nak' ? (code ?? 'refused') : null,
    input: inputId,
    time: receivedAt.toISOString(),
  });
}
