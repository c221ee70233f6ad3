import { setTimeout as sleep } from 'node:timers/promises';
import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  preHandlerAsyncHookHandler,
} from 'fastify';
import { MAX_DIRECT_BODY_BYTES, scanBatchSchema } from '@scan-gateway/contract';
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
 * - POST /api/trace/v3/scans: 202 `{ requestId }`; 415 unless the content type is application/json
 *   (charset allowed); 413 when the body is 5.8 MiB or more; 400 naming
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
    const type = request.headers['content-type'];
    if (mediaType(type) !== 'application/json') {
      return sendProblem(
        request,
        reply,
        415,
        `The content type must be application/json (contract §4.3), not ${type === undefined ? 'none' : `"${type}"`}.`,
      );
    }
    const body = request.body;
    if (!isParsedBody(body) || (body.json === undefined && body.error === undefined)) {
      return sendProblem(
        request,
        reply,
        400,
        'A JSON array of scans (application/json) is required.',
      );
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
    if (body.error !== undefined)
      return sendProblem(request, reply, 400, `The body is not valid JSON: ${body.error}`);
    if (!Array.isArray(body.json))
      return sendProblem(request, reply, 400, 'The body must be a JSON array of scans.');
    if (body.json.length === 0)
      return sendProblem(request, reply, 400, 'The batch holds no scans.');
    const parsed = scanBatchSchema.safeParse(body.json);
    if (!parsed.success)
      return sendValidationProblem(request, reply, parsed.error, 'The scan batch');
    const requestId = state.nextRequestId();
    state.acceptBatch(
      requestId,
      callerOf(request),
      'direct',
      body.json,
      timing.processingDelayMs(),
      Date.now(),
    );
    request.log.info(
      { requestId, scans: body.json.length, bytes: body.bytes },
      'direct upload accepted',
    );
    if (timing.answerDelayMs() > 0) await sleep(timing.answerDelayMs());
    if (timing.loseAnswer()) return dropAnswer(request, reply);
    return sendJson(request, reply, UPLOAD_ACCEPTED_STATUS, { requestId });
  });

  app.post('/api/trace/v3/scans/preSignedUrl', { preHandler: bearer }, async (request, reply) => {
    const requestId = state.nextRequestId();
    const token = state.createPresigned(
      requestId,
      callerOf(request),
      Date.now() + timing.presignedTtlMs(),
    );
    const url = `${request.protocol}://${request.host}/_presigned/${token}`;
    return sendJson(request, reply, 200, { url, requestId });
  });

  app.get<{ Params: { requestId: string } }>(
    '/api/trace/v3/scans/:requestId/status',
    { preHandler: bearer },
    async (request, reply) => {
      const { requestId } = request.params;
      if (!/^\d{1,15}$/.test(requestId)) {
        return sendProblem(request, reply, 400, `The request id "${requestId}" is not a number.`, {
          errors: { requestId: ['must be a number'] },
        });
      }
      return sendJson(request, reply, 200, state.status(requestId, callerOf(request), Date.now()));
    },
  );
}

/** The media type of a Content-Type header, lower case, without parameters (`charset` and the like). */
export function mediaType(header: string | undefined): string | undefined {
  const type = header?.split(';')[0]?.trim().toLowerCase();
  return type === '' ? undefined : type;
}

/** Content type of a pre-signed PUT: the one the contract names (§4.5), which the address is signed for. */
export const PRESIGNED_CONTENT_TYPE = 'application/json';

/** S3's answer to a pre-signed request that also carries an Authorization header (400 InvalidArgument). */
export const ONE_AUTH_MECHANISM =
  'Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified';

/** S3's message when a signed header (here Content-Type) differs from what the address was signed with. */
export const SIGNATURE_MISMATCH =
  'The request signature we calculated does not match the signature you provided. Check your key and signing method.';

/** An S3-style XML error body. `extra` are further elements (already escaped; the sandbox's own texts). */
function s3Error(code: string, message: string, requestId: string, extra = ''): string {
  return (
    '<?xml version="1.0" encoding="UTF-8"?>\n' +
    `<Error><Code>${code}</Code><Message>${message}</Message>${extra}<RequestId>${requestId}</RequestId></Error>`
  );
}

/**
 * PUT /_presigned/{token} (contract §4.5), answered as an object store (S3) answers; checked in
 * this order:
 * 1. an `Authorization` header: 400 `InvalidArgument` (S3 allows one auth mechanism, and the
 *    address's signature is one); the address is not used up;
 * 2. an unknown, used or expired address: 403 `AccessDenied`;
 * 3. a Content-Type other than exactly `application/json` (§4.5; the address is signed for it):
 *    403 `SignatureDoesNotMatch`, as S3 answers when a signed header differs; not used up;
 * 4. otherwise 200 and processing starts. The content is checked only when processed: a body that
 *    is not a JSON array makes the batch Failed, an invalid element fails with `Scan could not be read`.
 */
export function registerPresignedPut(
  app: FastifyInstance,
  state: SandboxState,
  timing: SandboxTiming,
): void {
  void app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) =>
      done(null, body),
    );
    scope.put<{ Params: { token: string } }>('/_presigned/:token', async (request, reply) => {
      if (request.headers.authorization !== undefined) {
        // S3 echoes the header in <ArgumentValue>; the sandbox does not: it is a credential, and a
        // client may log the body of an error answer.
        return reply
          .code(400)
          .type('application/xml')
          .send(
            s3Error(
              'InvalidArgument',
              ONE_AUTH_MECHANISM,
              request.id,
              '<ArgumentName>Authorization</ArgumentName>',
            ),
          );
      }
      const refused = state.presignedRefusal(request.params.token, Date.now());
      if (refused !== undefined)
        return reply
          .code(403)
          .type('application/xml')
          .send(s3Error('AccessDenied', refused, request.id));
      const type = request.headers['content-type']?.trim().toLowerCase();
      if (type !== PRESIGNED_CONTENT_TYPE) {
        return reply
          .code(403)
          .type('application/xml')
          .send(s3Error('SignatureDoesNotMatch', SIGNATURE_MISMATCH, request.id));
      }
      const claim = state.claimPresigned(request.params.token, Date.now());
      if ('refused' in claim)
        return reply
          .code(403)
          .type('application/xml')
          .send(s3Error('AccessDenied', claim.refused, request.id));
      const content = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      let items: unknown;
      try {
        items = JSON.parse(content.toString('utf8'));
      } catch {
        items = undefined;
      }
      const now = Date.now();
      if (Array.isArray(items)) {
        state.acceptBatch(
          claim.requestId,
          claim.clientId,
          'presigned',
          items,
          timing.processingDelayMs(),
          now,
        );
      } else {
        state.acceptUnreadable(
          claim.requestId,
          claim.clientId,
          'The uploaded content is not a JSON array of scans.',
          timing.processingDelayMs(),
          now,
        );
      }
      request.log.info(
        { requestId: claim.requestId, bytes: content.length },
        'pre-signed upload received',
      );
      if (timing.answerDelayMs() > 0) await sleep(timing.answerDelayMs());
      if (timing.loseAnswer()) return dropAnswer(request, reply);
      reply.header('etag', `"${claim.requestId}"`);
      return reply.code(200).send('');
    });
  });
}
