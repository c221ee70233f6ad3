import type { FastifyInstance } from 'fastify';
import type { HttpInputConfig } from './schema.js';
import { ErrorCodes, GatewayError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { InputStateTracker } from '../input-state.js';
import { readSecret, shortness } from '../../config/secrets.js';
import type { InputAdapter, InputStatus, IntakeSink } from '../types.js';
import { INGEST_PATH, registerIngestRoutes } from './ingest-routes.js';
import type { Clock } from '../../clock.js';

/** What an {@link HttpIngestInput} needs. */
export interface HttpIngestInputOptions {
  config: HttpInputConfig;
  sink: IntakeSink;
  logger: Logger;
  /** Environment for `tokenEnv` (the process edge hands it down); default none. */
  env?: Record<string, string | undefined>;
  now?: Clock;
}

/** An input that serves routes on the local HTTP server (registered before it listens). */
export interface RouteInput extends InputAdapter {
  /**
   * Registers the input's routes. `current` answers the instance that should serve them now: a
   * configuration reload replaces an input object, while the routes registered at start stay.
   */
  registerRoutes(app: FastifyInstance, current?: () => InputAdapter | undefined): Promise<void>;
}

/** True for an input that serves routes on the local server (the `http` input). */
export function isRouteInput(input: InputAdapter): input is RouteInput {
  return typeof (input as Partial<RouteInput>).registerRoutes === 'function';
}

/**
 * Registers the routes of every input that has some on the local server; called by the app after
 * building the server and before it listens. `inputs` answers the inputs running now, so routes
 * follow an input replaced by a configuration reload (same id). An `http` input added by a reload
 * is served only after a restart (routes cannot be added to a listening server).
 *
 * @throws GatewayError `SCANGW_E_CONFIG` when more than one `http` input is configured (they would
 *   share one path).
 */
export async function registerInputRoutes(
  app: FastifyInstance,
  inputs: () => readonly InputAdapter[],
): Promise<void> {
  const routed = inputs().filter(isRouteInput);
  const http = routed.filter((i) => i.type === 'http');
  if (http.length > 1) {
    throw new GatewayError(
      ErrorCodes.CONFIG,
      `only one input of type http is possible (${INGEST_PATH}); found ${http.map((i) => i.id).join(', ')}`,
    );
  }
  for (const input of routed)
    await input.registerRoutes(app, () => inputs().find((i) => i.id === input.id));
}

/**
 * The HTTP ingest input (`type: http`): `POST /api/v1/reads` on the gateway's local server for
 * MES and PLC software (see {@link registerIngestRoutes} for the answers). The bearer token comes
 * from the environment variable `tokenEnv` (default SCAN_GATEWAY_INGEST_TOKEN), else `tokenFile`;
 * it is read at start, so a new token needs a restart.
 *
 * It can wait: `setPaused(true)` answers 503 with Retry-After, and so does a stopping input.
 */
export class HttpIngestInput implements RouteInput {
  readonly id: string;
  readonly type = 'http';
  private readonly config: HttpInputConfig;
  private readonly log: Logger;
  private readonly state: InputStateTracker;
  private token: string | undefined;
  private paused = false;
  private stopping = false;
  private readonly inflight = new Set<Promise<unknown>>();

  constructor(private readonly options: HttpIngestInputOptions) {
    this.config = options.config;
    this.id = options.config.id;
    this.log = options.logger.child({ component: 'input.http', inputId: options.config.id });
    this.state = new InputStateTracker(this.id, this.type, `POST ${INGEST_PATH}`, options.now);
  }

  /**
   * Reads the token; the app registers the route on its server before listening.
   *
   * @throws GatewayError `SCANGW_E_SECRET` when no token is set, its file cannot be read, or it is
   *   shorter than 16 characters (MIN_INGEST_TOKEN_LENGTH).
   */
  async start(): Promise<void> {
    this.stopping = false;
    this.token = await readSecret({
      what: `ingest token of input ${this.id}`,
      envName: this.config.tokenEnv,
      file: this.config.tokenFile,
      env: this.options.env ?? {},
    });
    if (this.token === undefined) {
      throw new GatewayError(
        ErrorCodes.SECRET,
        `input ${this.id}: no ingest token; set the environment variable ${this.config.tokenEnv} or inputs.${this.id}.tokenFile`,
      );
    }
    const fromEnv = Boolean(this.options.env?.[this.config.tokenEnv]?.trim());
    const short = shortness(
      this.id,
      this.token,
      fromEnv ? 'tokenEnv' : 'tokenFile',
      fromEnv
        ? `the environment variable ${this.config.tokenEnv}`
        : `the file ${this.config.tokenFile}`,
    );
    if (short) {
      this.token = undefined;
      throw new GatewayError(ErrorCodes.SECRET, short.message);
    }
    this.state.set(this.paused ? 'paused' : 'up');
  }

  /**
   * Registers `POST /api/v1/reads`. Body limits and field paths are this instance's for the life of
   * the server; token, pause state, sink and `maxReadLength` are asked of `current()` at each request.
   */
  async registerRoutes(
    app: FastifyInstance,
    current: () => InputAdapter | undefined = () => this,
  ): Promise<void> {
    const live = (): HttpIngestInput | undefined => {
      const input = current();
      return input instanceof HttpIngestInput ? input : undefined;
    };
    await registerIngestRoutes(app, {
      sink: {
        submit: (items, submitOptions) =>
          live()?.options.sink.submit(items, submitOptions) ??
          Promise.reject(
            new GatewayError(ErrorCodes.NOT_RUNNING, `input ${this.id} is no longer configured`),
          ),
      },
      inputId: this.id,
      tokens: () => live()?.token,
      maxBodyBytes: this.config.maxBodyBytes,
      maxReads: this.config.maxReadsPerRequest,
      maxReadsInFlight: this.config.maxReadsInFlight,
      isPaused: () => live()?.refusing() ?? true,
      retryAfterSec: this.config.retryAfterSec,
      fields: this.config.fields,
      logger: this.log,
      maxReadLength: () => live()?.config.maxReadLength ?? this.config.maxReadLength,
      ...(this.options.now ? { now: this.options.now } : {}),
      track: (work) => live()?.track(work) ?? work,
    });
    this.log.info({ path: INGEST_PATH }, 'HTTP ingest route registered');
  }

  private refusing(): boolean {
    return this.paused || this.stopping || this.token === undefined;
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.inflight.add(work);
    const done = (): void => void this.inflight.delete(work);
    void work.then(done, done);
    return work;
  }

  setPaused(paused: boolean): void {
    if (this.paused === paused) return;
    this.paused = paused;
    if (this.token !== undefined && !this.stopping) this.state.set(paused ? 'paused' : 'up');
  }

  /** New requests are answered 503; resolves after the submits of requests in flight settled. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.allSettled([...this.inflight]);
    this.state.set('stopped');
  }

  status(): InputStatus {
    return this.state.status();
  }
}
