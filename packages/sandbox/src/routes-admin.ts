import type { FastifyInstance } from 'fastify';
import type { FaultSwitch } from './faults.js';
import type { SandboxKafka } from './kafka/endpoint.js';
import { sendProblem, sendValidationProblem } from './problem.js';
import { isParsedBody } from './respond.js';
import type { SandboxState } from './state.js';
import { faultsPatchSchema } from './types.js';

const LOOPBACK = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

/**
 * Test and demo controls, without authentication and answered only to loopback callers (403
 * otherwise, should the sandbox be bound to another address). Not part of the upstream contract.
 * - GET/PUT /_sandbox/faults: the fault switches; PUT merges a JSON object of changes.
 * - GET/DELETE /_sandbox/scans: every scan accepted since start or the last DELETE, in order
 *   (`?limit=N`: only the last N, with the counts).
 * - GET/DELETE /_sandbox/requests: the request log (method, path, status, time, ms).
 * - GET /_sandbox/kafka[?clientId=]: how to reach a client's status topic (default the first
 *   client): `{ bootstrapServers, topic, securityProtocol, saslMechanism, caPem }`.
 */
export function registerAdminRoutes(
  app: FastifyInstance,
  state: SandboxState,
  faults: FaultSwitch,
  kafka?: SandboxKafka,
): void {
  app.addHook('onRequest', async (request, reply) => {
    if (!request.url.startsWith('/_sandbox/')) return;
    if (!LOOPBACK.has(request.socket.remoteAddress ?? '')) {
      return sendProblem(request, reply, 403, 'Sandbox controls answer loopback callers only.');
    }
    return undefined;
  });

  app.get('/_sandbox/faults', async () => faults.current());

  app.put('/_sandbox/faults', async (request, reply) => {
    const body = request.body;
    if (!isParsedBody(body) || body.error !== undefined || body.json === undefined) {
      return sendProblem(request, reply, 400, 'A JSON object of fault settings is required.');
    }
    const parsed = faultsPatchSchema.safeParse(body.json);
    if (!parsed.success)
      return sendValidationProblem(request, reply, parsed.error, 'The fault settings');
    request.log.info({ faults: parsed.data }, 'faults changed');
    return faults.apply(parsed.data);
  });

  app.get<{ Querystring: { limit?: string } }>('/_sandbox/scans', async (request) => {
    const log = state.scanLog();
    // `?limit=N`: only the last N scans (and the counts), for callers that poll.
    const limit = request.query.limit === undefined ? undefined : Number(request.query.limit);
    if (limit === undefined || !Number.isInteger(limit) || limit < 0) return log;
    return { ...log, scans: limit === 0 ? [] : log.scans.slice(-limit) };
  });
  app.delete('/_sandbox/scans', async (_request, reply) => {
    state.clearScans();
    return reply.code(204).send();
  });

  // How a client reaches its status topic (contract §6): bootstrap servers, topic, the CA (PEM).
  app.get<{ Querystring: { clientId?: string } }>('/_sandbox/kafka', async (request, reply) => {
    if (!kafka)
      return sendProblem(request, reply, 404, 'This sandbox runs without its Kafka endpoint.');
    const info = kafka.info(request.query.clientId);
    if (!info)
      return sendProblem(
        request,
        reply,
        404,
        `The sandbox has no client ${request.query.clientId ?? ''}.`,
      );
    return info;
  });

  app.get('/_sandbox/requests', async () => ({
    count: state.requestLog().length,
    requests: state.requestLog(),
  }));
  app.delete('/_sandbox/requests', async (_request, reply) => {
    state.clearRequests();
    return reply.code(204).send();
  });
}
