import { createHash } from 'node:crypto';
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
export const DEFER_PUBACK = new Error('PUBACK deferred until the read is committed');

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

/** Entries kept for messages committed whose PUBACK may not have reached the broker (see MqttInput). */
export const REDELIVERY_MAX_ENTRIES = 100_000;

/**
 * Messages whose commit started but whose PUBACK never reached the broker (the connection dropped
 * in between). The broker sends them again (DUP flag) on the next connection; answering those
 * from here acknowledges them without storing the read twice. Keyed by topic, packet id and a
 * hash of the payload; bounded, oldest dropped first (a miss only means an at-least-once duplicate).
 */
const COMMITTED: Promise<boolean> = Promise.resolve(true);

export class RedeliveryCache {
  private readonly commits = new Map<string, Promise<boolean>>();

  static key(topic: string, messageId: number, payload: Buffer): string {
    return `${messageId}\u0000${topic}\u0000${createHash('sha1').update(payload).digest('base64')}`;
  }

  /** Remembers the commit of a message; a failed commit is forgotten as soon as it fails. */
  remember(key: string, committed: Promise<boolean>): void {
    this.commits.delete(key);
    this.commits.set(key, committed);
    void committed.then((ok) => {
      if (!ok && this.commits.get(key) === committed) this.commits.delete(key);
    });
    while (this.commits.size > REDELIVERY_MAX_ENTRIES) {
      const oldest = this.commits.keys().next().value;
      if (oldest === undefined) break;
      this.commits.delete(oldest);
    }
  }

  /** The commit of an earlier delivery of the same message, if one is remembered. */
  earlier(key: string): Promise<boolean> | undefined {
    return this.commits.get(key);
  }

  /**
   * The message was committed and its PUBACK written: keep the key (the PUBACK may not arrive),
   * but not the commit's promise, which would hold its closure for as long.
   */
  settled(key: string): void {
    if (this.commits.has(key)) this.commits.set(key, COMMITTED);
  }

  /** The broker surely has the PUBACK: it will not send the message again. */
  forget(key: string): void {
    this.commits.delete(key);
  }

  get size(): number {
    return this.commits.size;
  }
}
