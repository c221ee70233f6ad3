import { ErrorCodes, GatewayError } from '../errors.js';
import type { LoadedConfig } from '../config/load.js';
import { StatusEventFeed, type TopicReader } from '../delivery/status-events.js';
import type { BufferStore } from '../buffer/store.js';
import type { Deliverer } from '../delivery/deliverer.js';
import { STATUS_EVENTS_FETCH_WAIT_MS, statusEventTopic } from '../config/schema.js';
import type { Logger } from '../log.js';
import { readCaFile } from '../upstream/status-topic-ca.js';
import type { Component } from './parts.js';
import { TRUST_SANDBOX_CA_NEEDS, type SandboxPart } from './sandbox-part.js';

/** Connect deadline of the status-event reader (TCP, TLS, SASL), ms. */
const STATUS_EVENTS_CONNECT_MS = 10_000;

/**
 * How long after ready the feed starts, in ms. Its first connect loads the Kafka client, which
 * holds the event loop for 0.2 to 1 s (its modules, and Ajv compiling its option schemas: about
 * 220 ms on Node.js 26 on the bench machine). At ready that would hold up the start's first health
 * checks and reads with it; a second later the start's own burst has passed. Batch outcomes are
 * polled at the normal pace meanwhile (contract §4), and the status says `starting`.
 */
export const STATUS_EVENTS_START_DELAY_MS = 1000;

/** What the status-event part needs to make its reader (contract §6), besides the feed. */
export interface StatusEventsSettings {
  settings: LoadedConfig['config']['upstream']['statusEvents'];
  topic: string;
  /** The SASL login (client id and secret, §5), asked for at each connection: a reload may change it. */
  credentials: () => { clientId: string; clientSecret: string };
  /** The embedded sandbox, when it runs: its Kafka CA for `trustSandboxCa`. */
  sandbox: SandboxPart | undefined;
  logger: Logger;
}

/**
 * Status events (contract §6): the topic reader (upstream/status-topic.ts) feeding the status
 * tracker (delivery/status-events.ts). What can stop the start is checked at start (the CA file,
 * the sandbox's CA); the feed starts a second after the `ready` phase
 * ({@link STATUS_EVENTS_START_DELAY_MS}), and the reader with its Kafka client (about 30 MiB and
 * 0.3 to 1 s of CPU for its option schemas) is loaded at its first connect: the status says
 * `starting` until then.
 */
export class StatusEventsPart implements Component {
  readonly name = 'status events';
  readonly feed: StatusEventFeed;
  private extraCaPems: string[] = [];
  private startTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly s: StatusEventsSettings,
    makeFeed: (connect: () => Promise<TopicReader>) => StatusEventFeed,
  ) {
    this.feed = makeFeed(() => this.connect());
  }

  async start(): Promise<void> {
    const { settings, sandbox } = this.s;
    this.extraCaPems = [
      ...(settings.caFile ? [readCaFile(settings.caFile)] : []),
      ...(settings.trustSandboxCa ? [this.sandboxCa(sandbox)] : []),
    ];
  }

  ready(): void {
    const { settings, topic, credentials, logger } = this.s;
    this.startTimer = setTimeout(() => {
      this.startTimer = undefined;
      this.feed.start();
      logger.info(
        { topic, bootstrapServers: settings.bootstrapServers, username: credentials().clientId },
        'status events: reading the topic',
      );
    }, STATUS_EVENTS_START_DELAY_MS);
  }

  stop = async (): Promise<void> => {
    clearTimeout(this.startTimer);
    this.startTimer = undefined;
    await this.feed.stop();
  };

  private sandboxCa(sandbox: SandboxPart | undefined): string {
    if (!sandbox) throw new GatewayError(ErrorCodes.CONFIG, TRUST_SANDBOX_CA_NEEDS);
    return sandbox.kafkaCaPem();
  }

  private async connect(): Promise<TopicReader> {
    const { settings, topic, credentials, logger } = this.s;
    const { StatusTopicReader } = await import('../upstream/status-topic.js');
    return new StatusTopicReader({
      bootstrapServers: settings.bootstrapServers,
      topic,
      username: credentials().clientId,
      password: () => credentials().clientSecret,
      extraCaPems: this.extraCaPems,
      connectTimeoutMs: STATUS_EVENTS_CONNECT_MS,
      requestTimeoutMs: STATUS_EVENTS_FETCH_WAIT_MS + STATUS_EVENTS_CONNECT_MS,
      maxWaitMs: STATUS_EVENTS_FETCH_WAIT_MS,
      logger,
    });
  }
}

/** The status-event part (contract §6), its feed applying events through the deliverer. */
export function statusEventsPart(
  loaded: LoadedConfig,
  current: () => LoadedConfig,
  store: BufferStore,
  sandbox: SandboxPart | undefined,
  logger: Logger,
  now: () => number,
  deliverer: () => Deliverer,
): StatusEventsPart {
  const { upstream } = loaded.config;
  const settings = upstream.statusEvents;
  const topic = statusEventTopic(upstream);
  const log = logger.child({ component: 'status-events' });
  return new StatusEventsPart(
    {
      settings,
      topic,
      // The configuration in force: a reload that proved new credentials changes them.
      credentials: () => ({
        clientId: current().config.upstream.clientId,
        clientSecret: current().clientSecret,
      }),
      sandbox,
      logger: log,
    },
    (connect) =>
      new StatusEventFeed({
        store,
        topic,
        connect,
        apply: (ref, status, source) => deliverer().applyStatus(ref, status, source),
        onPaceChange: () => deliverer().wake(),
        otherWriter: () => deliverer().threadWriting(),
        safetyPollMs: settings.safetyPollMs,
        maxLagEvents: settings.maxLagEvents,
        staleAfterMs: settings.staleAfterMs,
        logger: log,
        now,
      }),
  );
}
