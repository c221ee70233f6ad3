import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from '../log.js';

/** Everything the health page and `/api/v1/status` show; built by the app from its components. */
export interface GatewayStatus {
  state: 'ok' | 'degraded' | 'down';
  reasons: string[];
  site: { id: string; timezone: string };
  version: string;
  startedAt: string;
  uptimeSec: number;
  config: { file: string; loadedAt: string };
  buffer: { path: string; pendingScans: number; undeliveredScans: number; oldestPendingAgeMs: number | null; scans: Record<string, number>; lastCommitError?: { message: string; at: string } };
  delivery: Record<string, unknown> & { lastSuccessAt?: string };
  inputs: Array<Record<string, unknown> & { id: string; type: string; state: string }>;
  batches: Array<Record<string, unknown>>;
  problems: Array<Record<string, unknown>>;
}

export interface HealthServerOptions {
  logger: Logger;
  status: () => GatewayStatus;
}

/**
 * The local HTTP server: `GET /healthz` (a summary as JSON: state, pending scan count, last
 * successful upload, each input's state) and `GET /api/v1/status` (everything, as JSON).
 * Built here, listened on by the app.
 */
export function buildHealthServer(options: HealthServerOptions): FastifyInstance {
  const app = Fastify({ loggerInstance: options.logger.child({ component: 'http' }) as FastifyBaseLogger, disableRequestLogging: true });
  app.get('/healthz', async (_req, reply) => {
    const s = options.status();
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
  app.get('/api/v1/status', async () => options.status());
  return app;
}
