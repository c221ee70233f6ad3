import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import formbody from '@fastify/formbody';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import {
  MAX_DIRECT_BODY_BYTES,
  PRESIGNED_VALIDITY_MS,
  TOKEN_VALIDITY_S,
} from '@scan-gateway/contract';
import { ErrorCodes, GatewayError } from '@scan-gateway/service-kit/errors';
import {
  LISTENER_LIMIT_DEFAULTS,
  capConnections,
  listenerOptions,
} from '@scan-gateway/service-kit/listener-limits';
import { silentLogger } from './log.js';
import { SandboxAuth, bearerCheck, registerTokenRoute } from './auth.js';
import { FaultSwitch, registerFaultHooks } from './faults.js';
import { sendProblem } from './problem.js';
import { registerJsonParser } from './respond.js';
import { registerAdminRoutes } from './routes-admin.js';
import { registerProductRoutes } from './routes-products.js';
import { registerPresignedPut, registerScanRoutes } from './routes-scans.js';
import { DEFAULT_KAFKA_PORT, SandboxKafka } from './kafka/endpoint.js';
import { startSandboxSftp, type RunningSandboxSftp } from './sftp.js';
import { SandboxState } from './state.js';
import {
  DEMO_CLIENT_ID,
  DEMO_DCPS,
  DEMO_PRODUCTS,
  type FaultsPatch,
  type RunningSandbox,
  type SandboxClient,
  type SandboxOptions,
} from './types.js';

export type {
  Faults,
  FaultsPatch,
  RunningSandbox,
  SandboxClient,
  SandboxOptions,
} from './types.js';

/** Largest body fastify reads at all (pre-signed uploads may be large); the 5.8 MiB rule is the route's. */
const BODY_LIMIT = 256 * 1024 * 1024;

/** File holding the demo client's secret, relative to the scan-gateway package root. */
export const DEMO_SECRET_FILE = 'config/demo-client-secret';

/**
 * Where the demo client's secret is when the caller does not say: {@link DEMO_SECRET_FILE} in the
 * nearest folder above this module that holds one. That is the scan-gateway checkout the sandbox
 * is a workspace of (packages/sandbox/), or the installed daemon whose node_modules carry it
 * (/usr/lib/scan-gateway/), the same file config/demo.yaml names. Undefined when there is none.
 */
function defaultDemoSecretFile(): string | undefined {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const candidate = join(dir, DEMO_SECRET_FILE);
    if (existsSync(candidate)) return candidate;
    if (dirname(dir) === dir) return undefined;
  }
}

/**
 * The default client: `demo-client`, secret from `file` (trimmed; default config/demo-client-secret
 * of the scan-gateway package the sandbox sits in), DCPs and products of `accepts`, by default
 * those of the demo and example configurations.
 * Throws `SECRET` when the file cannot be found or read, or is empty.
 */
export function demoClient(
  file: string | undefined = defaultDemoSecretFile(),
  accepts: SandboxOptions['demoAccepts'] = {},
): SandboxClient {
  if (file === undefined) {
    throw new GatewayError(
      ErrorCodes.SECRET,
      `demo client secret ${DEMO_SECRET_FILE} not found above ${dirname(fileURLToPath(import.meta.url))}`,
    );
  }
  let secret: string;
  try {
    secret = readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new GatewayError(ErrorCodes.SECRET, `demo client secret ${file} cannot be read`, {
      cause: err,
    });
  }
  if (secret === '')
    throw new GatewayError(ErrorCodes.SECRET, `demo client secret ${file} is empty`);
  return {
    clientId: DEMO_CLIENT_ID,
    clientSecret: secret,
    dcps: [...(accepts.dcps ?? DEMO_DCPS)],
    products: (accepts.products ?? DEMO_PRODUCTS).map((p) => ({ ...p })),
  };
}

/**
 * What outlives one fastify instance: a restart ({@link RunningSandbox.restart}) builds a new app
 * around these, as a real service comes back with its database and signing key.
 */
export interface SandboxMemory {
  state: SandboxState;
  faults: FaultSwitch;
  auth: SandboxAuth;
  /** The Kafka endpoint; it outlives a restart of the HTTP side (a separate service, as in §6). */
  kafka?: SandboxKafka;
}

/** New sandbox memory from `options` (no Kafka endpoint: {@link startSandbox} adds it). */
export function newSandboxMemory(options: SandboxOptions = {}): SandboxMemory {
  return {
    state: new SandboxState(
      options.clients ?? [
        demoClient(options.demoSecretFile ?? defaultDemoSecretFile(), options.demoAccepts),
      ],
      options.maxLoggedScans !== undefined ? { maxLoggedScans: options.maxLoggedScans } : {},
    ),
    faults: new FaultSwitch(options.faults ?? {}),
    auth: new SandboxAuth(),
  };
}

/**
 * A built (not listening) sandbox: the fastify app, its fault switch and state. For `inject()`
 * tests and `startSandbox`. With `memory`, the app works on that state (a restart); otherwise on
 * new state made from `options`.
 */
export async function buildSandboxApp(
  options: SandboxOptions = {},
  memory?: SandboxMemory,
): Promise<{ app: FastifyInstance; faults: FaultSwitch; state: SandboxState; auth: SandboxAuth }> {
  const logger = (options.logger ?? silentLogger()).child({ component: 'sandbox' });
  // The pino generic of `loggerInstance` does not match FastifyBaseLogger's; the instance is the default one.
  const app = Fastify({
    loggerInstance: logger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: BODY_LIMIT,
    forceCloseConnections: true,
    // Same bounds as the gateway's own listener (http.limits defaults): a demo port is reachable too.
    ...listenerOptions(options.limits ?? LISTENER_LIMIT_DEFAULTS),
  }) as unknown as FastifyInstance;
  capConnections(app.server, options.limits ?? LISTENER_LIMIT_DEFAULTS);
  const { state, faults, auth, kafka } = memory ?? newSandboxMemory(options);
  const bearer = bearerCheck(auth);
  const timing = {
    processingDelayMs: () =>
      faults.current().processingDelayMs ?? options.processingDelayMs ?? 1000,
    presignedTtlMs: () => options.presignedTtlMs ?? PRESIGNED_VALIDITY_MS,
    directLimitBytes: () => faults.current().directLimitBytes ?? MAX_DIRECT_BODY_BYTES,
    answerDelayMs: () => faults.current().answerDelayMs ?? 0,
    loseAnswer: () => {
      const rate = faults.current().lostAnswerRate ?? 0;
      return rate > 0 && Math.random() < rate;
    },
  };

  await app.register(formbody);
  registerJsonParser(app);
  registerFaultHooks(app, faults, state);
  registerAdminRoutes(app, state, faults, kafka);
  registerTokenRoute(
    app,
    auth,
    state,
    () => faults.current().tokenTtlSec ?? options.tokenTtlSec ?? TOKEN_VALIDITY_S,
  );
  registerProductRoutes(app, state, bearer);
  registerScanRoutes(app, state, bearer, timing);
  registerPresignedPut(app, state, timing);

  app.setNotFoundHandler((request, reply) =>
    sendProblem(request, reply, 404, `No route ${request.method} ${request.url.split('?')[0]}.`),
  );
  app.setErrorHandler((error: { statusCode?: number; message?: string }, request, reply) => {
    const status =
      error.statusCode !== undefined && error.statusCode >= 400 ? error.statusCode : 500;
    if (status >= 500) request.log.error({ err: error }, 'sandbox request failed');
    return sendProblem(
      request,
      reply,
      status,
      status >= 500 ? 'The sandbox failed to answer.' : (error.message ?? 'Bad request.'),
    );
  });
  return { app, faults, state, auth };
}

/**
 * Starts the local emulator of the upstream service (contract §4, §5) on `host:port`
 * (default 127.0.0.1:8090; port 0 = any). The returned `url` serves as both `baseUrl` and
 * `authUrl`. Rejects when the address is taken or the demo secret cannot be read.
 */
export async function startSandbox(options: SandboxOptions = {}): Promise<RunningSandbox> {
  const memory = newSandboxMemory(options);
  const host = options.host ?? '127.0.0.1';
  if (options.kafka !== false) {
    const k = options.kafka ?? {};
    const kafkaPort = k.port ?? (options.port === 0 ? 0 : DEFAULT_KAFKA_PORT);
    const logger = options.logger ?? silentLogger();
    memory.kafka = await SandboxKafka.start(
      [...memory.state.clients.values()],
      { ...k, host: k.host ?? host, port: kafkaPort },
      memory.faults,
      logger,
    );
    const kafka = memory.kafka;
    memory.state.onStatusChange((clientId, status) => kafka.publish(clientId, status));
  }
  let app: FastifyInstance;
  try {
    app = (await buildSandboxApp(options, memory)).app;
    await app.listen({ host, port: options.port ?? 8090 });
  } catch (err) {
    await memory.kafka?.close();
    throw err;
  }
  let sftp: RunningSandboxSftp | undefined;
  if (options.sftp) {
    try {
      sftp = await startSandboxSftp({
        state: memory.state,
        root: options.sftp.root ?? mkdtempSync(join(tmpdir(), 'scan-gateway-sandbox-sftp-')),
        host,
        port: options.sftp.port ?? 0,
        ...(options.sftp.authorizedKeys ? { authorizedKeys: options.sftp.authorizedKeys } : {}),
        ...(options.sftp.hostKey ? { hostKey: options.sftp.hostKey } : {}),
        processingDelayMs: () =>
          memory.faults.current().processingDelayMs ?? options.processingDelayMs ?? 1000,
        logger: options.logger ?? silentLogger(),
      });
    } catch (err) {
      await app.close();
      await memory.kafka?.close();
      throw err;
    }
  }
  const address = app.server.address();
  const port =
    typeof address === 'object' && address !== null ? address.port : (options.port ?? 8090);
  const shownHost =
    host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  let closing: Promise<void> | undefined;
  let restarting: Promise<void> | undefined;
  return {
    url: `http://${shownHost}:${port}`,
    get app() {
      return app;
    },
    setFaults(f: FaultsPatch) {
      memory.faults.apply(f);
    },
    ...(memory.kafka
      ? {
          kafka: {
            bootstrapServers: memory.kafka.bootstrapServers,
            caPem: memory.kafka.caPem,
            info: (clientId?: string) => memory.kafka?.info(clientId),
            appendRaw: (
              clientId: string,
              records: Array<{ key: string | null; value: string | null }>,
            ) => memory.kafka?.appendRaw(clientId, records),
          },
        }
      : {}),
    restart(restartOptions: { downMs?: number } = {}) {
      if (closing)
        return Promise.reject(new GatewayError(ErrorCodes.NOT_RUNNING, 'the sandbox is closed'));
      // The same port, so a client's configured baseUrl reaches the restarted service.
      restarting ??= (async () => {
        await app.close();
        if ((restartOptions.downMs ?? 0) > 0) await sleep(restartOptions.downMs);
        const next = (await buildSandboxApp(options, memory)).app;
        await next.listen({ host, port });
        app = next;
      })().finally(() => {
        restarting = undefined;
      });
      return restarting;
    },
    close() {
      closing ??= (restarting ?? Promise.resolve())
        .catch(() => undefined)
        .then(() => Promise.all([app.close(), sftp?.close()]))
        .then(() => memory.kafka?.close());
      return closing;
    },
    ...(sftp ? { sftp } : {}),
  };
}
