import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { scrubValue, type Logger } from '../log.js';
import { registerAdminRoutes, type AdminActions } from './admin.js';
import type { GatewayMetrics } from './metrics.js';
import { PAGE_CSP, renderPage } from './page.js';
import type { GatewayStatus } from './status.js';

export type { GatewayStatus } from './status.js';

export interface HealthServerOptions {
  logger: Logger;
  status: () => GatewayStatus;
  /** Serves `GET /metrics` when given. */
  metrics?: GatewayMetrics;
  /** Admin actions and the token that guards them; without it, `/api/v1/admin/*` answers 403. */
  admin?: { token: string | undefined; actions: AdminActions };
  /**
   * Cuts known secrets out of every text the server shows (status JSON, health page, healthz,
   * readyz), raw excerpts of refused input included: the log's {@link SecretScrubber} (issue 11).
   */
  scrub?: (text: string) => string;
}

/** Headers of every answer: nothing cached, nothing sniffed, no referrer leaves the page. */
const COMMON_HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/**
 * Whether the gateway can take reads now: every part started, not stopping, and the buffer
 * accepting commits. Upstream trouble does not make it unready: reads are still buffered.
 */
export function readiness(s: GatewayStatus): { ready: boolean; reason?: string } {
  if (s.phase === 'starting') return { ready: false, reason: 'starting' };
  if (s.phase === 'stopping') return { ready: false, reason: 'stopping' };
  if (s.state === 'down') return { ready: false, reason: s.reasons.join('; ') || 'down' };
  return { ready: true };
}

/**
 * The local HTTP server (loopback by default, `http.listen`):
 * - `GET /`: the health page (page.ts);
 * - `GET /healthz`: alive, with a summary (state, pending scans, last upload, each input's state);
 *   503 when `down`;
 * - `GET /readyz`: 200 `{ ready: true }` or 503 `{ ready: false, reason }` ({@link readiness});
 * - `GET /api/v1/status`: everything, as JSON (status.ts, docs/operations.md);
 * - `GET /metrics`: Prometheus text format (metrics.ts);
 * - `POST /api/v1/admin/{action}`: admin actions behind a bearer token (admin.ts).
 * Built here; the app adds its own routes (such as ingest) before it listens.
 */
export function buildHealthServer(options: HealthServerOptions): FastifyInstance {
  const app = Fastify({
    loggerInstance: options.logger.child({ component: 'http' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // A browser tab kept open holds a keep-alive connection; it must not delay a stop.
    forceCloseConnections: true,
  });
  app.addHook('onSend', async (_request, reply) => {
    reply.headers(COMMON_HEADERS);
  });
  const scrub = options.scrub;
  // Every route below shows the status through this: nothing the gateway knows as a secret leaves.
  const status = scrub ? () => scrubValue(options.status(), scrub) as GatewayStatus : options.status;

  app.get('/', async (_request, reply) => {
    return reply.type('text/html; charset=utf-8').header('content-security-policy', PAGE_CSP).header('x-frame-options', 'DENY').send(renderPage(status()));
  });

  app.get('/healthz', async (_req, reply) => {
    const s = status();
    const body = {
      status: s.state,
      reasons: s.reasons,
      pendingScans: s.buffer.undeliveredScans,
      oldestPendingAgeMs: s.buffer.oldestPendingAgeMs,
      deliveredScans: s.buffer.scans.delivered ?? 0,
      failedScans: (s.buffer.scans.failed ?? 0) + (s.buffer.scans.held ?? 0),
      lastSuccessfulUploadAt: s.delivery.lastSuccessAt ?? null,
      inputs: s.inputs.map((i) => ({ id: i.id, type: i.type, state: i.state, ...(i.lastError ? { lastError: i.lastError } : {}) })),
    };
    return reply.code(s.state === 'down' ? 503 : 200).send(body);
  });

  app.get('/readyz', async (_req, reply) => {
    const r = readiness(status());
    return reply.code(r.ready ? 200 : 503).send(r);
  });

  app.get('/api/v1/status', async () => status());

  const metrics = options.metrics;
  if (metrics) {
    app.get('/metrics', async (_req, reply) => reply.type(metrics.contentType).send(await metrics.text()));
  }

  registerAdminRoutes(app, {
    token: options.admin?.token,
    actions: options.admin?.actions ?? unavailableActions,
    logger: options.logger.child({ component: 'admin' }),
  });
  return app;
}

const unavailable = () => {
  throw new Error('admin actions are not wired in this server');
};
const unavailableActions: AdminActions = { retry: unavailable, pause: unavailable, resume: unavailable };
