import type { FastifyInstance } from 'fastify';
import type { LoadedConfig } from './config/load.js';
import type { InputConfig } from './config/schema.js';
import { Deliverer } from './delivery/deliverer.js';
import type { DeliveryApi } from './delivery/types.js';
import { BufferStore } from './buffer/store.js';
import { Intake } from './buffer/intake.js';
import { buildHealthServer, type GatewayStatus } from './health/server.js';
import { FilesInput } from './inputs/files/files-input.js';
import { SerialInput } from './inputs/serial/serial-input.js';
import type { InputAdapter, IntakeSink } from './inputs/types.js';
import type { Logger } from './log.js';
import { mappingContext } from './mapping/map-read.js';
import { VERSION } from './paths.js';
import { startSandbox, type RunningSandbox } from './sandbox/server.js';
import { UpstreamClient } from './upstream/client.js';

export interface AppDeps {
  logger: Logger;
  now?: () => number;
  /** Builds the adapter for one input; the default knows every `type` of the schema. */
  createInput?: (config: InputConfig, sink: IntakeSink, logger: Logger) => InputAdapter;
  /** The upstream API; the default is the undici client built from the configuration. */
  api?: DeliveryApi & { close?: () => Promise<void>; tokenInfo?: () => { expiresAt?: Date; refreshes: number } };
}

export interface App {
  start(): Promise<void>;
  /** Stops in reverse order; every part is stopped even when one fails. Rejects when any failed. */
  stop(): Promise<void>;
  status(): GatewayStatus;
  /** Address the local HTTP server listens on, once started. */
  readonly httpUrl: string | undefined;
}

function splitListen(listen: string): { host: string; port: number } {
  const i = listen.lastIndexOf(':');
  return { host: listen.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(listen.slice(i + 1)) };
}

function defaultInput(config: InputConfig, sink: IntakeSink, logger: Logger): InputAdapter {
  switch (config.type) {
    case 'files':
      return new FilesInput({ config, sink, logger });
    case 'serial':
      return new SerialInput({ config, sink, logger });
  }
}

/**
 * Wires the gateway: buffer → (embedded sandbox) → upstream client → intake → delivery → inputs →
 * local HTTP server. Wiring only; every behaviour lives in the parts.
 */
export function buildApp(loaded: LoadedConfig, deps: AppDeps): App {
  const { config } = loaded;
  const logger = deps.logger;
  const now = deps.now ?? Date.now;
  const startedAt = new Date(now());
  let store: BufferStore | undefined;
  let sandbox: RunningSandbox | undefined;
  let api: AppDeps['api'];
  let intake: Intake | undefined;
  let deliverer: Deliverer | undefined;
  let http: FastifyInstance | undefined;
  let httpUrl: string | undefined;
  const inputs: InputAdapter[] = [];
  const stops: { name: string; stop: () => Promise<void> | void }[] = [];

  const status = (): GatewayStatus => {
    const s = store!;
    const pending = s.pending();
    const counts = s.scanCounts();
    const deliveryStatus = deliverer?.snapshot();
    const lastUpload = s.db.prepare(`SELECT max(uploaded_at) FROM batches`).pluck().get() as string | null;
    const inputStatuses = inputs.map((i) => ({ ...i.status(), counters: intake!.countersFor(i.id) }));
    const reasons: string[] = [];
    for (const i of inputStatuses) if (i.state === 'down') reasons.push(`input ${i.id} is down${i.lastError ? `: ${i.lastError}` : ''}`);
    if (deliveryStatus && deliveryStatus.circuit !== 'closed') reasons.push(`upstream unreachable: ${deliveryStatus.lastError?.message ?? 'unknown error'}`);
    if (intake?.lastCommitError) reasons.push(`buffer commit failing: ${intake.lastCommitError.message}`);
    return {
      state: intake?.lastCommitError ? 'down' : reasons.length > 0 ? 'degraded' : 'ok',
      reasons,
      site: config.site,
      version: VERSION,
      startedAt: startedAt.toISOString(),
      uptimeSec: Math.round((now() - startedAt.getTime()) / 1000),
      config: { file: loaded.file, loadedAt: startedAt.toISOString() },
      buffer: {
        path: config.buffer.path,
        pendingScans: pending.count,
        undeliveredScans: s.undelivered(),
        oldestPendingAgeMs: pending.oldestCreatedAt === null ? null : now() - pending.oldestCreatedAt,
        scans: counts,
        ...(intake?.lastCommitError ? { lastCommitError: intake.lastCommitError } : {}),
      },
      delivery: {
        mode: config.delivery.mode,
        ...deliveryStatus,
        ...(lastUpload ? { lastSuccessAt: lastUpload } : {}),
        ...(api?.tokenInfo ? { token: api.tokenInfo() } : {}),
      },
      inputs: inputStatuses,
      batches: s.recentBatches(20).map((b) => ({ ...b })),
      problems: s.recentProblems(20).map((p) => ({ ...p, raw: p.raw.toString('latin1') })),
    };
  };

  return {
    get httpUrl() {
      return httpUrl;
    },
    status,
    async start() {
      store = new BufferStore(config.buffer.path);
      stops.push({ name: 'buffer', stop: () => store?.close() });
      if (config.sandbox.enabled) {
        const { host, port } = splitListen(config.sandbox.listen);
        sandbox = await startSandbox({ host, port, logger });
        stops.push({ name: 'sandbox', stop: () => sandbox?.close() });
        logger.info({ component: 'app', url: sandbox.url }, 'embedded upstream sandbox started');
      }
      api =
        deps.api ??
        new UpstreamClient({
          baseUrl: config.upstream.baseUrl,
          authUrl: config.upstream.authUrl,
          clientId: config.upstream.clientId,
          clientSecret: loaded.clientSecret,
          logger,
          requestTimeoutMs: config.upstream.requestTimeoutMs,
          ...(config.upstream.caFile ? { caFile: config.upstream.caFile } : {}),
          ...(config.upstream.proxyUrl ? { proxyUrl: config.upstream.proxyUrl } : {}),
        });
      stops.push({ name: 'upstream', stop: () => api?.close?.() });
      deliverer = new Deliverer({ store, api, config: config.delivery, logger: logger.child({ component: 'delivery' }), now });
      intake = new Intake({
        store,
        mapping: mappingContext(config),
        logger: logger.child({ component: 'intake' }),
        now,
        onScansCommitted: () => deliverer?.wake(),
      });
      stops.push({ name: 'intake', stop: () => intake?.close() });
      deliverer.start();
      stops.push({ name: 'delivery', stop: () => deliverer?.stop() });
      const create = deps.createInput ?? defaultInput;
      for (const inputConfig of config.inputs) {
        const input = create(inputConfig, intake, logger);
        inputs.push(input);
        stops.push({ name: `input ${input.id}`, stop: () => input.stop() });
        await input.start();
      }
      http = buildHealthServer({ logger, status });
      const { host, port } = splitListen(config.http.listen);
      httpUrl = await http.listen({ host, port });
      stops.push({ name: 'http', stop: () => http?.close() });
      logger.info({ component: 'app', http: httpUrl, inputs: inputs.map((i) => i.id) }, 'scan-gateway started');
    },
    async stop() {
      const failures: string[] = [];
      for (const part of stops.reverse()) {
        try {
          await part.stop();
        } catch (err) {
          failures.push(part.name);
          logger.error({ component: 'app', err, part: part.name }, 'stopping a part failed');
        }
      }
      stops.length = 0;
      if (failures.length > 0) throw new Error(`stopping failed: ${failures.join(', ')}`);
    },
  };
}
