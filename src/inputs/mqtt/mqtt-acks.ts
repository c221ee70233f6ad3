/**
 * Deferred PUBACKs: the gateway acknowledges a QoS 1 message only after its read is committed,
 * yet keeps taking the messages behind it meanwhile (many in flight, one group commit). mqtt.js
 * is kept from acknowledging, and the PUBACK sent later, through the hooks of mqtt-internals.ts
 * (`takeMessagesUnacknowledged`, `sendPuback`); this module only orders and tracks them.
 */

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
    return commit
      ? commit.then(
          () => undefined,
          () => undefined,
        )
      : Promise.resolve();
  }

  get size(): number {
    return this.commits.size;
  }
}
