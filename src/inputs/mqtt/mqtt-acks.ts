import type { MqttClient } from 'mqtt';
import { ErrorCodes, GatewayError } from '../../errors.js';

/**
 * Deferred PUBACKs: the gateway acknowledges a QoS 1 message only after its read is committed,
 * yet keeps taking the messages behind it meanwhile (many in flight, one group commit).
 *
 * mqtt.js acknowledges a message when `handleMessage`'s callback is called without an error, and
 * handles the next packet only after that. Waiting there would allow one message per commit. So
 * the adapter calls the callback at once WITH an error (mqtt.js then sends no PUBACK and goes on)
 * and sends the PUBACK itself once the commit resolved, through the client's `_sendPacket`: the
 * one internal mqtt.js call the gateway makes, checked by {@link assertDeferredAckSupport} and
 * by the MQTT integration tests.
 */

/** Passed to `handleMessage`'s callback: "taken, acknowledge later" (mqtt.js skips its PUBACK). */
export const DEFER_PUBACK = new GatewayError(ErrorCodes.INPUT, 'PUBACK deferred until the read is committed');

interface PrivateClient {
  _sendPacket(packet: { cmd: 'puback'; messageId: number }, cb?: (err?: Error) => void): void;
}

/** @throws GatewayError `SCANGW_E_INPUT` when this mqtt.js has no `_sendPacket` (an incompatible version). */
export function assertDeferredAckSupport(client: MqttClient): void {
  if (typeof (client as unknown as Partial<PrivateClient>)._sendPacket !== 'function') {
    throw new GatewayError(ErrorCodes.INPUT, 'this mqtt.js version cannot send deferred PUBACKs (no _sendPacket); use mqtt 5.x');
  }
}

/** Writes a PUBACK for `messageId` on the client's current connection. */
export function sendPuback(client: MqttClient, messageId: number): void {
  (client as unknown as PrivateClient)._sendPacket({ cmd: 'puback', messageId });
}

/** One received QoS 1 message of one connection. */
export interface AckEntry {
  readonly messageId: number;
  done: boolean;
}

/**
 * The QoS 1 messages of ONE network connection, in order of arrival. PUBACKs leave in that order
 * (MQTT 3.1.1 §4.6 and MQTT 5 §4.6 require it): a committed message waits for the ones before it.
 * When the connection is lost, the queue is reset and nothing more is sent on its behalf: the
 * broker sends those messages again on the next connection.
 */
export class AckQueue {
  private readonly entries: AckEntry[] = [];
  private dead = false;

  constructor(private readonly send: (messageId: number) => void) {}

  get isReset(): boolean {
    return this.dead;
  }

  add(messageId: number): AckEntry {
    const entry = { messageId, done: false };
    if (!this.dead) this.entries.push(entry);
    return entry;
  }

  /** Marks `entry` committed and sends every PUBACK now due. */
  complete(entry: AckEntry): void {
    entry.done = true;
    if (this.dead) return;
    while (this.entries[0]?.done) {
      const head = this.entries.shift()!;
      this.send(head.messageId);
    }
  }

  /** The connection is gone. */
  reset(): void {
    this.dead = true;
    this.entries.length = 0;
  }
}

/**
 * Commits of QoS 1 messages still under way, by message identity (packet id, topic, payload
 * SHA-256). When the connection drops during a commit, the broker sends the message again on the
 * next connection (DUP); that resend waits here for the first commit, so that intake then finds
 * the identity committed (docs/inputs.md, "mqtt"). An entry goes when its commit settles, so the
 * map holds at most the messages in flight (`maxInFlight` per connection, plus those of a dropped
 * connection still retrying, which give up at once).
 */
export class CommitsInProgress {
  private readonly commits = new Map<string, Promise<unknown>>();

  static key(m: { packetId: number; topic: string; payloadSha256: Buffer }): string {
    return `${m.packetId}\u0000${m.topic}\u0000${m.payloadSha256.toString('base64')}`;
  }

  add(key: string, commit: Promise<unknown>): void {
    this.commits.set(key, commit);
    const drop = (): void => {
      if (this.commits.get(key) === commit) this.commits.delete(key);
    };
    void commit.then(drop, drop);
  }

  /** Settles when the commit under way for `key` settles (at once when there is none); never rejects. */
  earlier(key: string): Promise<void> {
    const commit = this.commits.get(key);
    return commit ? commit.then(() => undefined, () => undefined) : Promise.resolve();
  }

  get size(): number {
    return this.commits.size;
  }
}
