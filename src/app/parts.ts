import { ErrorCodes, GatewayError } from '../errors.js';
import type { FastifyInstance } from 'fastify';
import type { BackPressure } from '../buffer/back-pressure.js';
import type { DiskGuard } from '../buffer/disk-guard.js';
import { DERIVED_QUOTA_MAX_BYTES, derivedQuotaForPath } from '../buffer/disk-guard.js';
import type { BufferStore } from '../buffer/store.js';
import type { LoadedConfig } from '../config/load.js';
import type { InputConfig } from '../config/schema.js';
import type { Deliverer } from '../delivery/deliverer.js';
import type { StatusEventFeed, TopicReader } from '../delivery/status-events.js';
import { STATUS_EVENTS_FETCH_WAIT_MS } from '../config/schema.js';
import type { Logger } from '../log.js';
import type { ProductCheck } from '../mapping/product-check.js';
import { DEMO_CLIENT_SECRET_FILE } from '../paths.js';
import type * as SandboxModule from '@scan-gateway/sandbox';
import type { RunningSandbox } from '@scan-gateway/sandbox';
import type { SftpConnector, SftpSession } from '../upstream/sftp-client.js';
import { readSftpCredentials } from '../config/secrets.js';
import { readCaFile } from '../upstream/status-topic-ca.js';
import type { InputAdapter, IntakeSink } from '../inputs/types.js';
import type { ListenerTls } from '../listener/listener-tls.js';
import { routeTable, type RouteEntry } from '../listener/route-guard.js';

/**
 * The gateway's parts as {@link Component}s. `buildApp` (src/app.ts) constructs every part with its
 * dependencies before anything starts; a part's constructor does no I/O, its `start()` does (opens
 * the buffer, reads a key file, listens), and its `stop()` undoes it. Optional parts (the embedded
 * sandbox, status events, the SFTP route, the product check) are present or absent by
 * construction, decided by the configuration.
 *
 * The modules of optional parts (the embedded sandbox, each input type with its library, the SFTP
 * route, the status-event reader with its Kafka client) are loaded by `import()` when the part
 * starts, so a configuration that does not use them does not pay their memory and start-up time
 * (figures in docs/performance.md, "Footprint"). The Kafka client, the largest of them, is loaded
 * only in the `ready` phase, once the gateway takes reads.
 */

/**
 * One part of the running gateway as the app starts and stops it: the parts start in the order of
 * the list `buildApp` (src/app.ts) makes, then each one's `ready` runs in the same order (the
 * gateway takes reads from then on), and they stop in reverse.
 */
export interface Component {
  /** Names the part in the log and in a failed stop's error (`stopping failed: delivery, input line-3`). */
  readonly name: string;
  start(): Promise<void>;
  /**
   * Runs once every part started: what is not needed to take reads starts here (status events),
   * so it does not delay the start. Not called when the start failed.
   */
  ready?(): void;
  /** Called once the start began, also when it failed half way: it must tolerate a part not (fully) started. */
  stop(): Promise<void>;
}

/** Longest a stop waits for the upstream connections to close, in ms. */
const UPSTREAM_CLOSE_GRACE_MS = 2_000;
/** Connect deadline of the status-event reader (TCP, TLS, SASL), ms. */
const STATUS_EVENTS_CONNECT_MS = 10_000;

/** Waits for `work` at most `ms`; answers false when it gave up (the work goes on unobserved). */
export async function within(ms: number, work: Promise<void> | void | undefined): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([Promise.resolve(work).then(() => true as const), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** `host:port` or `[v6]:port` split into its parts. */
export function splitListen(listen: string): { host: string; port: number } {
  const i = listen.lastIndexOf(':');
  return { host: listen.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(listen.slice(i + 1)) };
}

/**
 * Runs a listen; an address in use or not allowed becomes an error that names the configuration
 * key, instead of a bare `listen EADDRINUSE`.
 */
export async function listening<T>(
  key: string,
  address: string,
  listen: () => Promise<T>,
): Promise<T> {
  try {
    return await listen();
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'EADDRINUSE') {
      throw new GatewayError(
        ErrorCodes.LISTEN,
        `${key} ${address}: the address is in use (another program, or another scan-gateway, listens there); stop it or choose another port`,
        { cause: err },
      );
    }
    if (code === 'EACCES' || code === 'EADDRNOTAVAIL') {
      throw new GatewayError(
        ErrorCodes.LISTEN,
        `${key} ${address}: cannot listen there (${code}: a port below 1024 needs privileges; the host must be an address of this machine)`,
        { cause: err },
      );
    }
    throw err;
  }
}

/** The buffer: opened (and migrated) at start, closed at stop. */
export function bufferPart(store: BufferStore): Component {
  return {
    name: 'buffer',
    start: async () => store.open(),
    stop: async () => store.close(),
  };
}

/**
 * Loads the sandbox package (`@scan-gateway/sandbox`, an optional dependency: the daemon runs
 * without it). Only `npm start`'s `sandbox.enabled` and `scan-gateway sandbox` call this.
 * @throws GatewayError `CONFIG` when the package is not installed, saying how to go on.
 */
export async function importSandbox(): Promise<typeof SandboxModule> {
  try {
    return await import('@scan-gateway/sandbox');
  } catch (err) {
    if ((err as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    throw new GatewayError(
      ErrorCodes.CONFIG,
      'the sandbox (package @scan-gateway/sandbox) is not installed here: set sandbox.enabled: false and point upstream at the real service, or install it (npm ci in a checkout; the Debian package carries it)',
      { cause: err },
    );
  }
}

/** The embedded upstream sandbox (`sandbox.enabled`): its module is loaded at start only. */
/** Why `trustSandboxCa` cannot be followed: said the same way whether the sandbox is off or runs without Kafka. */
const TRUST_SANDBOX_CA_NEEDS =
  'upstream.statusEvents.trustSandboxCa needs the embedded sandbox with its Kafka endpoint (sandbox.enabled: true)';

export class SandboxPart implements Component {
  readonly name = 'sandbox';
  private running: RunningSandbox | undefined;

  /**
   * @param accepts the client the sandbox knows, the configuration's own (`upstream.clientId` and
   *   its secret; without a secret the demo client), and the DCP keys and product model keys it
   *   accepts: `sandbox.dcps` and `sandbox.products`, by default those of the configuration (app.ts).
   */
  constructor(
    private readonly settings: LoadedConfig['config']['sandbox'],
    private readonly logger: Logger,
    private readonly accepts: {
      clientId: string;
      clientSecret: string;
      dcps: string[];
      products: string[];
    },
  ) {}

  async start(): Promise<void> {
    const { host, port } = splitListen(this.settings.listen);
    const kafka = splitListen(this.settings.kafka.listen);
    // The sandbox is a workspace package of its own (packages/sandbox), loaded only here and by
    // `scan-gateway sandbox`: a gateway without `sandbox.enabled` never loads it.
    const { startSandbox } = await importSandbox();
    const { clientId, clientSecret, dcps } = this.accepts;
    const products = this.accepts.products.map((key) => ({ key, name: key }));
    // The site's own client, so a site configuration is not refused at its first token either.
    const client =
      clientSecret !== ''
        ? { clients: [{ clientId, clientSecret, dcps, products }] }
        : { demoSecretFile: DEMO_CLIENT_SECRET_FILE, demoAccepts: { dcps, products } };
    this.running = await listening('sandbox.listen', this.settings.listen, () =>
      startSandbox({ host, port, kafka, logger: this.logger, ...client }),
    );
    const known = clientSecret !== '' ? clientId : 'demo-client';
    this.logger.info(
      {
        component: 'app',
        url: this.running.url,
        clientId: known,
        dcps,
        products: this.accepts.products,
      },
      `embedded upstream sandbox started; client ${known} with DCPs ${dcps.join(', ')} and products ${this.accepts.products.join(', ') || 'none (list them in sandbox.products)'}`,
    );
  }

  /**
   * The sandbox's Kafka CA (`upstream.statusEvents.trustSandboxCa`, demo only), once started.
   * @throws GatewayError `CONFIG` when the sandbox runs no Kafka endpoint.
   */
  kafkaCaPem(): string {
    const kafka = this.running?.kafka;
    if (!kafka) throw new GatewayError(ErrorCodes.CONFIG, TRUST_SANDBOX_CA_NEEDS);
    return kafka.caPem;
  }

  stop = async (): Promise<void> => this.running?.close();
}

/** The upstream client: nothing to start; its connections are closed at stop, bounded. */
export function upstreamPart(api: { close?: () => Promise<void> }): Component {
  return {
    name: 'upstream',
    start: async () => undefined,
    // Bounded: undici's close waits for requests in flight, and an abandoned upload may still hang.
    stop: async () => void (await within(UPSTREAM_CLOSE_GRACE_MS, api.close?.())),
  };
}

/**
 * Back-pressure on intake. Without `buffer.maxBytes` the byte quota comes from the buffer's disk,
 * examined at start (one statfs); the disk guard rechecks it every second (DERIVED_QUOTA_RECHECK_MS).
 */
export function backPressurePart(
  backPressure: BackPressure,
  buffer: LoadedConfig['config']['buffer'],
  logger: Logger,
): Component {
  return {
    name: 'back-pressure',
    async start() {
      if (buffer.maxBytes === undefined) {
        let derived: { bytes: number; ceilingBytes: number };
        try {
          derived = derivedQuotaForPath(buffer.path);
        } catch (err) {
          logger.warn(
            { component: 'buffer', err },
            "cannot examine the buffer's disk for its byte quota; using the largest default until the disk guard can",
          );
          derived = { bytes: DERIVED_QUOTA_MAX_BYTES, ceilingBytes: DERIVED_QUOTA_MAX_BYTES };
        }
        backPressure.setByteQuota(derived.bytes, derived.ceilingBytes);
      }
      backPressure.start();
    },
    stop: async () => backPressure.stop(),
  };
}

/** A part whose start and stop are one synchronous call each (retention, the product check). */
export function timerPart(
  name: string,
  part: { start(): void; stop(): void | Promise<void> },
): Component {
  return { name, start: async () => part.start(), stop: async () => part.stop() };
}

/** Reserve, early pruning of the audit under disk pressure, pages returned (src/buffer/disk-guard.ts). */
export function diskGuardPart(diskGuard: DiskGuard): Component {
  return {
    name: 'disk guard',
    start: async () => diskGuard.start(),
    stop: async () => diskGuard.stop(),
  };
}

/** Intake: opened at start (the duplicate window is restored from the buffer), closed at stop. */
export function intakePart(intake: { open(): void; close(): void | Promise<void> }): Component {
  return { name: 'intake', start: async () => intake.open(), stop: async () => intake.close() };
}

/**
 * The SFTP route of delivery when `upstream.sftp` is configured. The login is read at
 * {@link SftpRoute.open} (config/secrets.ts), so a missing key or password stops the start with
 * `SCANGW_E_SECRET`; the SFTP client's module is loaded then too.
 */
export class SftpRoute implements SftpConnector {
  readonly remoteDir: string;
  readonly siteId: string;
  readonly fileNameTemplate: string;
  private connector: SftpConnector | undefined;

  constructor(
    private readonly config: LoadedConfig['config'],
    private readonly sftp: NonNullable<LoadedConfig['config']['upstream']['sftp']>,
    private readonly env: Record<string, string | undefined>,
  ) {
    this.remoteDir = sftp.remoteDir;
    this.siteId = config.site.id;
    this.fileNameTemplate = sftp.fileName;
  }

  /** @throws GatewayError `SCANGW_E_SECRET` when the key or password cannot be read. */
  async open(): Promise<void> {
    const login = readSftpCredentials(this.config, this.env);
    const { sftpConnector } = await import('../upstream/sftp-client.js');
    const { upstream } = this.config;
    this.connector = sftpConnector({
      sftp: this.sftp,
      clientId: upstream.clientId,
      privateKey: login.privateKey,
      password: login.password,
      minBytesPerSec: upstream.minUploadBytesPerSec,
    });
  }

  connect(): Promise<SftpSession> {
    if (!this.connector)
      throw new GatewayError(ErrorCodes.NOT_RUNNING, 'the SFTP route is not open yet');
    return this.connector.connect();
  }

  deadlineMs(bytes: number): number {
    if (!this.connector)
      throw new GatewayError(ErrorCodes.NOT_RUNNING, 'the SFTP route is not open yet');
    return this.connector.deadlineMs(bytes);
  }

  /** What delivery's `sftp` option takes (src/delivery/uploader.ts). */
  route(): { connector: SftpConnector; siteId: string; fileNameTemplate: string } {
    return { connector: this, siteId: this.siteId, fileNameTemplate: this.fileNameTemplate };
  }
}

/** Delivery: the SFTP login read first (when configured), then uploads and status polls. */
export function deliveryPart(
  deliverer: Deliverer,
  sftp: SftpRoute | undefined,
  graceMs: number,
  logger: Logger,
): Component {
  return {
    name: 'delivery',
    async start() {
      await sftp?.open();
      deliverer.start();
    },
    async stop() {
      if (await within(graceMs, deliverer.stop())) return;
      // The batch stays `uploading`/`presigned` in the buffer: the next start sends it again as a
      // possible duplicate (direct) or asks the service about its requestId first (pre-signed).
      logger.warn(
        { component: 'delivery', graceMs },
        'an upload was still in flight at the stop; abandoned, recovered at the next start',
      );
    },
  };
}

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
 * the sandbox's CA); the feed starts in the `ready` phase, and the reader with its Kafka client
 * (about 30 MiB and 0.3 to 1 s of CPU for its option schemas) is loaded at its first connect: the
 * status says `starting` until then.
 */
export class StatusEventsPart implements Component {
  readonly name = 'status events';
  readonly feed: StatusEventFeed;
  private extraCaPems: string[] = [];

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
    this.feed.start();
    logger.info(
      { topic, bootstrapServers: settings.bootstrapServers, username: credentials().clientId },
      'status events: reading the topic',
    );
  }

  stop = async (): Promise<void> => this.feed.stop();

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

/** Makes the adapter of one input (src/app/inputs.ts has the default, by `type`). */
export type InputFactory = (
  config: InputConfig,
  sink: IntakeSink,
  logger: Logger,
) => InputAdapter | Promise<InputAdapter>;

/**
 * The inputs that run, in start order: the status lists them, back-pressure pauses them, the HTTP
 * part serves their routes, a reload replaces them.
 */
export class InputSet {
  readonly adapters: InputAdapter[] = [];

  /** Pauses or resumes every input that can wait (`InputAdapter.setPaused`), logging each. */
  setPaused(paused: boolean, why: string, logger: Logger): void {
    for (const input of this.adapters) {
      if (!input.setPaused) continue;
      input.setPaused(paused);
      (paused ? logger.warn.bind(logger) : logger.info.bind(logger))(
        { component: 'buffer', input: input.id, paused, why },
        paused ? 'input paused by back-pressure' : 'input resumed',
      );
    }
  }

  remove(id: string): InputAdapter | undefined {
    const at = this.adapters.findIndex((i) => i.id === id);
    return at < 0 ? undefined : this.adapters.splice(at, 1)[0];
  }
}

/** One input: its adapter is made (its module loaded) at start, and started paused while intake is paused. */
export function inputPart(
  config: InputConfig,
  deps: {
    create: InputFactory;
    sink: IntakeSink;
    inputs: InputSet;
    intakePaused: () => boolean;
    logger: Logger;
  },
): Component {
  let input: InputAdapter | undefined;
  return {
    get name() {
      return `input ${input?.id ?? config.id}`;
    },
    async start() {
      input = await deps.create(config, deps.sink, deps.logger);
      deps.inputs.adapters.push(input);
      await input.start();
      if (deps.intakePaused()) input.setPaused?.(true);
    },
    stop: async () => input?.stop(),
  };
}

/**
 * The local HTTP server (src/listener, src/health): built and listening at start, the last part.
 * With `http.tls` its files are read first (a bad pair stops the start), and watched once it listens.
 */
export class HttpPart implements Component {
  readonly name = 'http';
  private server: FastifyInstance | undefined;
  private address: string | undefined;

  /** `build` makes the server (src/app/http.ts); it is called at start, once the inputs run. */
  constructor(
    private readonly listen: string,
    private readonly build: () => Promise<FastifyInstance>,
    private readonly tls?: ListenerTls,
  ) {}

  /** The address it listens on, once started. */
  get url(): string | undefined {
    return this.address;
  }

  /** The routes the server serves, with their guards, once started (src/listener/route-guard.ts). */
  get routes(): readonly RouteEntry[] {
    return this.server ? routeTable(this.server) : [];
  }

  async start(): Promise<void> {
    const { host, port } = splitListen(this.listen);
    this.tls?.load();
    const server = await this.build();
    this.address = await listening('http.listen', this.listen, () => server.listen({ host, port }));
    this.server = server;
    this.tls?.watch();
  }

  stop = async (): Promise<void> => {
    this.tls?.stop();
    await this.server?.close();
  };
}

/**
 * The check of configured product keys against the service's list (`productCheck`): present when
 * enabled and the API can list products. A reload that changes its settings makes a new one.
 */
export class ProductCheckPart implements Component {
  readonly name = 'product check';
  private check: ProductCheck | undefined;
  private started = false;

  /** `make` answers the check for the configuration now in force, or undefined when it is off. */
  constructor(private readonly make: () => ProductCheck | undefined) {
    this.check = make();
  }

  async start(): Promise<void> {
    this.started = true;
    this.check?.start();
  }

  /** Replaces the check by one made for the configuration now in force (after a reload). */
  restart(): void {
    this.check?.stop();
    this.check = this.make();
    if (this.started) this.check?.start();
  }

  snapshot(): ReturnType<ProductCheck['snapshot']> | undefined {
    return this.check?.snapshot();
  }

  knownProducts(): ReturnType<ProductCheck['knownProducts']> | undefined {
    return this.check?.knownProducts();
  }

  stop = async (): Promise<void> => {
    this.started = false;
    this.check?.stop();
  };
}
