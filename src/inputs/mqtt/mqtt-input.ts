import {
  connect as mqttConnect,
  type IClientOptions,
  type IPublishPacket,
  type MqttClient,
} from 'mqtt';
import type { MqttInputConfig } from './schema.js';
import type { Logger } from '../../log.js';
import { InputStateTracker } from '../input-state.js';
import type { InputAdapter, InputStatus, IntakeItem } from '../types.js';
import { AckQueue } from './mqtt-acks.js';
import {
  assertMqttInternals,
  pipeBeforeParser,
  sendPuback,
  takeMessagesUnacknowledged,
} from './mqtt-internals.js';
import { mqttClientOptions, safeUrl, statusTopicOf, withTimeout } from './mqtt-options.js';
import { PublishCuts, PublishLimiter } from './mqtt-publish-limit.js';
import { MessageCommits, verdictBody, type Committed } from './mqtt-commit.js';
import { SESSION_TAKEN_OVER, type MqttInputOptions } from './mqtt-input-options.js';
import { type Clock, systemClock } from '../../clock.js';
import { LoopSleep } from '../../loop.js';

export { SESSION_TAKEN_OVER, type MqttInputOptions } from './mqtt-input-options.js';

/**
 * Input adapter for an MQTT broker (mqtt.js 5): subscribes to `topics` with QoS 1 in a persistent
 * session under a stable `clientId`, so the broker keeps messages while the gateway is down, and
 * acknowledges each message (PUBACK) only after its read is committed ({@link AckQueue}; up to
 * `maxInFlight` messages at once, in order).
 *
 * A payload that cannot be a read (too big, not JSON, missing code…) is stored as a rejection with
 * its topic, first bytes and reason, and acknowledged, so one poison message never blocks a topic.
 * When the buffer refuses a commit, the message stays unacknowledged and the submit is retried
 * with backoff (in flight, so the broker sends no more than `maxInFlight`).
 *
 * mqtt.js reconnects every `reconnectMs`; the broker resends unacknowledged messages on the new
 * connection (DUP flag, same packet id), also after a gateway crash. Each message's identity
 * (packet id, topic, payload SHA-256) is committed with its read, so a resend of a message
 * committed before is acknowledged without being stored again, and counted as `redelivered`
 * (docs/inputs.md, "mqtt", "Exactly once across crashes"). A payload over `maxPayloadBytes` is
 * cut in the stream before mqtt.js parses it (mqtt-publish-limit.ts).
 *
 * `setPaused(true)` lets in-flight messages finish, publishes `paused` on the status topic and
 * disconnects: the broker queues for the session meanwhile, nothing is lost; `setPaused(false)`
 * connects again.
 */
export class MqttInput implements InputAdapter {
  readonly id: string;
  readonly type = 'mqtt';
  private readonly config: MqttInputConfig;
  private readonly log: Logger;
  private readonly now: Clock;
  private readonly state: InputStateTracker;
  private readonly statusTopic: string | undefined;
  private clientOptions: IClientOptions | undefined;
  private client: MqttClient | undefined;
  /** The QoS 1 messages of the current connection, for ordered PUBACKs. */
  private acks: AckQueue | undefined;
  /** The submit retries' sleeps, ended at a stop or a disconnect. */
  private readonly sleeps = new LoopSleep();
  private readonly commits: MessageCommits;
  /** Serialises start, pause, resume and stop. */
  private lifecycle: Promise<void> = Promise.resolve();
  private paused = false;
  private stopping = false;
  /** The current client is being closed: messages are not taken (the broker sends them again). */
  private closing = false;
  private lastError: string | undefined;
  /** High availability: the broker handed the session to another connection; this input does not connect again. */
  private takenOver = false;
  private reconnectTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: MqttInputOptions) {
    this.config = options.config;
    this.id = options.config.id;
    this.log = options.logger.child({ component: 'input.mqtt', inputId: options.config.id });
    this.now = options.now ?? systemClock;
    this.statusTopic = statusTopicOf(this.config);
    this.commits = new MessageCommits(this.config, options.sink, this.log, this.sleeps, {
      retryBaseMs: options.submitRetryBaseMs ?? 500,
      statusTopic: this.statusTopic,
      givenUp: (acks) => this.stopping || this.closing || acks?.isReset === true,
      publishVerdict: (item, committed, receivedAt) =>
        this.publishVerdict(item, committed, receivedAt),
      onCommitted: options.onCommitted,
    });
    this.state = new InputStateTracker(
      this.id,
      this.type,
      `${safeUrl(this.config.url)} ${this.config.topics.join(' ')}`,
      this.now,
    );
  }

  /**
   * Reads the credentials and TLS files, then connects and waits for the first outcome. A broker
   * that cannot be reached makes the input `down` (retried), not a start failure.
   *
   * @throws GatewayError `SCANGW_E_SECRET` / `SCANGW_E_INPUT` when a password or TLS file cannot be read.
   */
  async start(): Promise<void> {
    this.stopping = false;
    this.clientOptions = await mqttClientOptions(this.config, this.options.env ?? {}, {
      willDelaySec: this.options.ha?.willDelaySec,
    });
    // High availability: reconnects are the input's own, each asking whether this node still leads.
    if (this.options.ha) this.clientOptions.reconnectPeriod = 0;
    this.takenOver = false;
    if (this.clientOptions.password !== undefined && /^(mqtt|ws):/i.test(this.config.url)) {
      this.log.warn(
        { url: safeUrl(this.config.url) },
        'the MQTT password travels in clear text over this connection: use mqtts:// or wss:// (and caFile) unless the network is trusted',
      );
    }
    await this.queue(() => (this.paused ? Promise.resolve() : this.open()));
  }

  /** Stops taking messages; resolves after those in flight are committed and acknowledged (or given up). */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.reconnectTimer);
    this.sleeps.interrupt();
    await this.queue(() => this.close('offline'));
    await this.commits.settled();
    this.state.set('stopped');
  }

  status(): InputStatus {
    return this.state.status();
  }

  setPaused(paused: boolean): void {
    if (paused === this.paused || this.stopping) return;
    this.paused = paused;
    this.log.info(
      { paused },
      paused ? 'pausing: disconnecting, the broker keeps messages for the session' : 'resuming',
    );
    void this.queue(async () => {
      if (this.stopping || this.paused !== paused) return;
      if (paused) {
        await this.close('paused');
        this.state.set('paused');
      } else {
        await this.open();
      }
    });
  }

  private queue(step: () => Promise<void>): Promise<void> {
    const next = this.lifecycle.then(step, step);
    this.lifecycle = next.catch((err: unknown) =>
      this.log.error({ err }, 'MQTT input lifecycle step failed'),
    );
    return next;
  }

  // ---- connection -----------------------------------------------------------------------------

  private async open(): Promise<void> {
    if (!this.clientOptions || this.stopping) return;
    this.state.set('connecting');
    const client = (this.options.connect ?? mqttConnect)(this.config.url, {
      ...this.clientOptions,
      manualConnect: true,
    });
    // The mqtt.js internals the input relies on (mqtt-internals.ts), before any is used. A client
    // not yet connected holds no socket or timer, so a refused one is just dropped (mqtt.js's
    // end() would fail on its missing stream and hide this error).
    assertMqttInternals(client);
    // A payload over maxPayloadBytes reaches the parser cut to maxPayloadBytes + 1 bytes, whatever
    // the protocol version: never held whole in memory (mqtt-publish-limit.ts).
    const cuts = new PublishCuts();
    const { maxPayloadBytes, protocolVersion } = this.config;
    pipeBeforeParser(
      client,
      () =>
        new PublishLimiter(maxPayloadBytes, maxPayloadBytes + 1, protocolVersion, (cut) =>
          cuts.add(cut),
        ),
    );
    this.client = client;
    this.closing = false;
    let subscribed = false;
    takeMessagesUnacknowledged(client, (packet, next) =>
      this.onMessage(client, packet, next, cuts),
    );
    // The acknowledgement queue of a connection starts at its CONNACK, before any message of it is
    // handled: mqtt.js emits 'connect' only after it has resent its own unacknowledged packets,
    // and the broker's resends can be handled before that.
    client.on('packetreceive', (packet) => {
      if (packet.cmd !== 'connack' || client !== this.client) return;
      this.acks?.reset();
      this.acks = new AckQueue((messageId) => sendPuback(client, messageId));
      // No session on the broker: none of the messages committed before can come again, and their
      // packet ids start afresh; the identities kept for them must not match the new messages.
      if (!packet.sessionPresent) {
        this.commits.forgetNotCommitted();
        this.options.sink.forgetMessages(this.id);
      }
    });
    let ready: (() => void) | undefined;
    const isReady = new Promise<void>((resolve) => (ready = resolve));
    client.on('connect', (connack) => {
      if (client !== this.client) return;
      this.lastError = undefined;
      this.log.info(
        { url: safeUrl(this.config.url), sessionPresent: connack.sessionPresent },
        'connected to broker',
      );
      if (this.statusTopic) client.publish(this.statusTopic, 'online', { qos: 1, retain: true });
      // mqtt.js subscribes again by itself after a reconnect that lost the session.
      if (!subscribed) {
        subscribed = true;
        // Without a session on the broker, 'up' waits for the SUBACK: until the broker holds the
        // subscription, a reader's message has nowhere to go (a new session keeps nothing for us).
        void this.subscribe(client).then((granted) => {
          if (client !== this.client || !granted) return;
          if (!connack.sessionPresent) this.state.set('up');
          ready?.();
        });
        if (!connack.sessionPresent) return;
      }
      this.state.set('up');
      ready?.();
    });
    client.on('error', (err) => {
      if (client !== this.client) return;
      if (this.lastError !== err.message) this.log.warn({ err }, 'MQTT client error');
      this.lastError = err.message;
    });
    client.on('disconnect', (packet: { reasonCode?: number }) => {
      if (client !== this.client || packet.reasonCode !== SESSION_TAKEN_OVER) return;
      this.takenOver = true;
      this.lastError =
        'the broker handed the session to another connection with the same client id (session taken over)';
      this.log.warn(
        { reasonCode: packet.reasonCode },
        'session taken over by another connection with this client id; not connecting again',
      );
    });
    client.on('close', () => {
      if (client !== this.client) return;
      this.acks?.reset();
      this.acks = undefined;
      this.sleeps.interrupt();
      if (this.closing || this.stopping) return;
      if (this.options.ha) this.haReconnect(client);
      if (
        this.state.down(`${safeUrl(this.config.url)}: ${this.lastError ?? 'connection closed'}`)
      ) {
        this.log.warn(
          { reconnectInMs: this.config.reconnectMs },
          'connection to broker lost; reconnecting',
        );
      }
    });
    client.connect();
    // The first outcome (connected, refused, unreachable) decides what start() reports.
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, this.config.connectTimeoutMs);
      const done = (): void => {
        clearTimeout(timer);
        client.off('close', done);
        resolve();
      };
      void isReady.then(done);
      client.on('close', done);
    });
  }

  /**
   * High availability: after a lost connection, one new connection in `reconnectMs`, only while
   * this node leads and the session was not taken over by another connection.
   */
  private haReconnect(client: MqttClient): void {
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => {
      void this.queue(async () => {
        if (client !== this.client || this.stopping || this.closing) return;
        if (this.takenOver || !this.options.ha!.mayConnect()) {
          this.log.warn(
            { takenOver: this.takenOver },
            'not connecting again: this node does not lead, or another connection took the session',
          );
          return;
        }
        client.end(true);
        this.client = undefined;
        await this.open();
      });
    }, this.config.reconnectMs);
  }

  /** Subscribes to the configured topics; answers whether the broker granted every one. */
  private async subscribe(client: MqttClient): Promise<boolean> {
    const qos = this.config.qos;
    // MQTT 5: no retained replay when the session already holds the subscription.
    const options = this.config.protocolVersion === 5 ? { qos, rh: 1 } : { qos };
    try {
      const granted = await client.subscribeAsync(
        Object.fromEntries(this.config.topics.map((t) => [t, options])),
      );
      const refused = granted.filter((g) => g.qos === 128).map((g) => g.topic);
      if (refused.length > 0) {
        this.state.down(`broker refused the subscription to ${refused.join(', ')}`);
        this.log.error({ topics: refused }, 'broker refused subscriptions');
        return false;
      }
      this.log.info({ topics: this.config.topics, qos }, 'subscribed');
      return true;
    } catch (err) {
      if (client === this.client && !this.closing)
        this.log.warn({ err }, 'subscribing failed; retried on reconnect');
      return false;
    }
  }

  /** Lets messages in flight finish (bounded), publishes `status` and disconnects; the session stays. */
  private async close(status: 'offline' | 'paused'): Promise<void> {
    const client = this.client;
    if (!client) return;
    this.closing = true;
    // Submits waiting to retry (the buffer at its quota) give up now, unacknowledged: the broker
    // sends those messages again on the next connection. Waiting for them would hold the
    // connection open for the whole settle timeout, though pausing means disconnecting.
    this.sleeps.interrupt();
    const settle = this.commits.settled();
    const timeoutMs = this.options.settleTimeoutMs ?? 10_000;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      settle.then(() => false),
      new Promise<boolean>((r) => (timer = setTimeout(() => r(true), timeoutMs))),
    ]);
    clearTimeout(timer);
    if (timedOut)
      this.log.warn(
        { inflight: this.commits.inflight },
        'messages still in flight at disconnect; the broker sends them again later',
      );
    if (this.statusTopic && client.connected) {
      await withTimeout(
        client.publishAsync(this.statusTopic, status, { qos: 1, retain: true }),
        2000,
      ).catch((err: unknown) => this.log.debug({ err }, 'publishing status failed'));
    }
    await withTimeout(client.endAsync(), 5000).catch(() => client.end(true));
    this.acks?.reset();
    this.acks = undefined;
    this.client = undefined;
    this.commits.releaseHeld();
    this.sleeps.interrupt();
  }

  // ---- messages -------------------------------------------------------------------------------

  /** `next` lets mqtt.js hand over the next packet; it never acknowledges (mqtt-internals.ts). */
  private onMessage(
    client: MqttClient,
    packet: IPublishPacket,
    next: () => void,
    cuts: PublishCuts,
  ): void {
    // Not taken while closing: no PUBACK, so the broker sends it again to the next connection.
    if (client !== this.client || this.closing || this.stopping) {
      next();
      return;
    }
    const acks = packet.qos > 0 ? this.acks : undefined;
    this.commits.receive(packet, next, cuts, acks, new Date(this.now()));
  }

  /**
   * `verdictTopic`: publishes what became of a committed message's read, QoS 1, not retained
   * ({@link verdictBody}). Not awaited: the PUBACK of the read does not wait for it; mqtt.js queues it while disconnected.
   */
  private publishVerdict(item: IntakeItem, committed: Committed, receivedAt: Date): void {
    const topic = this.config.verdictTopic;
    const client = this.client;
    if (topic === undefined || !client) return;
    const body = verdictBody(item, committed, this.id, receivedAt);
    client.publish(topic, body, { qos: 1, retain: false }, (err) => {
      if (err) this.log.debug({ err, topic }, 'publishing a verdict failed');
    });
  }
}
