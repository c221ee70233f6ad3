import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import { MAX_DIRECT_BODY_BYTES, scanBatchSchema } from '../upstream/contract.js';
import { callerOf } from './auth.js';
import { sendProblem, sendValidationProblem } from './problem.js';
import { isParsedBody, sendJson } from './respond.js';
import type { SandboxState } from './state.js';

/** Timing knobs read per request, so fault changes apply to the next batch. */
export interface SandboxTiming {
  /** Processing time of a new batch, in ms. */
  processingDelayMs(): number;
  /** Validity of a new pre-signed address, in ms. */
  presignedTtlMs(): number;
  /** Size from which a direct upload is refused with 413, in bytes (the contract's 5.8 MiB unless lowered by a fault). */
  directLimitBytes(): number;
  /** Whether this upload's answer is lost (fault `lostAnswerRate`): processed, then the connection is destroyed. */
  loseAnswer(): boolean;
  /** Delay between processing an upload and answering it (fault `answerDelayMs`), in ms. */
  answerDelayMs(): number;
}

/** Drops the connection without an answer, after the request was processed. */
function dropAnswer(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  reply.hijack();
  request.raw.socket.destroy();
  return reply;
}

/** Status code of an accepted direct upload: 202, since processing is asynchronous (§4.3 does not show it). */
export const UPLOAD_ACCEPTED_STATUS = 202;

/**
 * Scan endpoints with bearer check (contract §4.3, §4.4, §4.6).
 * - POST /api/trace/v3/scans: 202 `{ requestId }`; 413 when the body is 5.8 MiB or more; 400 naming
 *   the index and field of the first invalid scans, or for an empty or non-array body.
 * - POST /api/trace/v3/scans/preSignedUrl: 200 `{ url, requestId }`; the url is this sandbox's
 *   `/_presigned/<token>`, valid `presignedTtlMs`, usable once.
 * - GET /api/trace/v3/scans/{requestId}/status: 200 with the status object (§2.8), also for
 *   unknown ids (state NotFound); 400 when the id is not a number.
 */
export function registerScanRoutes(
  app: FastifyInstance,
  state: SandboxState,
  bearer: preHandlerAsyncHookHandler,
  timing: SandboxTiming,
): void {
  app.post('/api/trace/v3/scans', { preHandler: bearer }, async (request, reply) => {
    const body = request.body;
    if (!isParsedBody(body) || (body.json === undefined && body.error === undefined)) {
      return sendProblem(request, reply, 400, 'A JSON array of scans (application/json) is required.');
    }
    const limit = Math.min(MAX_DIRECT_BODY_BYTES, timing.directLimitBytes());
    if (body.bytes > limit) {
      return sendProblem(
        request,
        reply,
        413,
        `The request body of ${body.bytes} bytes reaches the ${limit === MAX_DIRECT_BODY_BYTES ? '5.8 MiB' : `${limit}-byte (lowered by a fault)`} limit; upload large batches through a pre-signed URL.`,
        { limitBytes: limit },
      );
    }
    if (body.error !== undefined) return sendProblem(request, reply, 400, `The body is not valid JSON: ${body.error}`);
    if (!Array.isArray(body.json)) return sendProblem(request, reply, 400, 'The body must be a JSON array of scans.');
    if (body.json.length === 0) return sendProblem(request, reply, 400, 'The batch holds no scans.');
    const parsed = scanBatchSchema.safeParse(body.json);
    if (!parsed.success) return sendValidationProblem(request, reply, parsed.error, 'The scan batch');
    const requestId = state.nextRequestId();
    state.acceptBatch(requestId, callerOf(request), 'direct', body.json, timing.processingDelayMs(), Date.now());
    request.log.info({ requestId, scans: body.json.length, bytes: body.bytes }, 'direct upload accepted');
    if (timing.answerDelayMs() > 0) await sleep(timing.answerDelayMs());
    if (timing.loseAnswer()) return dropAnswer(request, reply);
    return sendJson(request, reply, UPLOAD_ACCEPTED_STATUS, { requestId });
  });

  app.post('/api/trace/v3/scans/preSignedUrl', { preHandler: bearer }, async (request, reply) => {
    const requestId = state.nextRequestId();
    const token = state.createPresigned(requestId, callerOf(request), Date.now() + timing.presignedTtlMs());
    const url = `${request.protocol}://${request.host}/_presigned/${token}`;
    return sendJson(request, reply, 200, { url, requestId });
  });

  app.get<{ Params: { requestId: string } }>('/api/trace/v3/scans/:requestId/status', { preHandler: bearer }, async (request, reply) => {
    const { requestId } = request.params;
    if (!/^\d{1,15}$/.test(requestId)) {
      return sendProblem(request, reply, 400, `The request id "${requestId}" is not a number.`, {
        errors: { requestId: ['must be a number'] },
      });
    }
    return sendJson(request, reply, 200, state.status(requestId, callerOf(request), Date.now()));
  });
}

/**
 * PUT /_presigned/{token} (contract §4.5): no Authorization; any content type (like S3). The first
 * PUT within the validity answers 200 and starts processing; later or expired ones answer 403 with
 * an S3-style XML error. The content is checked only when processed: a body that is not a JSON
 * array makes the batch Failed, an invalid element fails with `Scan could not be read`.
 */
export function registerPresignedPut(app: FastifyInstance, state: SandboxState, timing: SandboxTiming): void {
  void app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
    scope.put<{ Params: { token: string } }>('/_presigned/:token', async (request, reply) => {
      const claim = state.claimPresigned(request.params.token, Date.now());
      if ('refused' in claim) {
        const xml =
          '<?xml version="1.0" encoding="UTF-8"?>\n' +
          `<Error><Code>AccessDenied</Code><Message>${claim.refused}</Message><RequestId>${request.id}</RequestId></Error>`;
        return reply.code(403).type('application/xml').send(xml);
      }
      const content = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      let items: unknown;
      try {
        items = JSON.parse(content.toString('utf8'));
      } catch {
        items = undefined;
      }
      const now = Date.now();
      if (Array.isArray(items)) {
        state.acceptBatch(claim.requestId, claim.clientId, 'presigned', items, timing.processingDelayMs(), now);
      } else {
        state.acceptUnreadable(claim.requestId, claim.clientId, 'The uploaded content is not a JSON array of scans.', timing.processingDelayMs(), now);
      }
      request.log.info({ requestId: claim.requestId, bytes: content.length }, 'pre-signed upload received');
      if (timing.answerDelayMs() > 0) await sleep(timing.answerDelayMs());
      if (timing.loseAnswer()) return dropAnswer(request, reply);
      reply.header('etag', `"${claim.requestId}"`);
      return reply.code(200).send('');
    });
  });
}
