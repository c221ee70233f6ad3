import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { JsonFieldsConfig } from '../schema-parts.js';
import type { Logger } from '../../log.js';
import { rejectionItem } from '../input-items.js';
import { DEFAULT_JSON_FIELDS } from '../json-read.js';
import { ingestBodyItems } from './ingest-body.js';
import { GatewayError, isTooLargeForBuffer } from '../../errors.js';
import { DEFAULT_MAX_READ_LENGTH } from '../schema-parts.js';
import { RefusalLog } from '@scan-gateway/service-kit/refusal-log';
import type { IntakeSink, SubmitResult } from '../types.js';
import { type Clock, systemClock } from '../../clock.js';
import { guard } from '../../listener/route-guard.js';
import type { TokenGuard } from '../../listener/rotating-token.js';

/** The path of the ingest endpoint on the local server. */
export const INGEST_PATH = '/api/v1/reads';

/** Options of {@link registerIngestRoutes}: where reads go, who may post, the limits. */
export interface IngestRouteOptions {
  sink: IntakeSink;
  /** `inputId` of the reads (the `http` input's id). */
  inputId: string;
  /**
   * Accepted bearer tokens, or a function answering the guard of the current one (undefined: none,
   * every request is 401; a reload may replace the token, the guard keeps the old one until proven).
   */
  tokens: string[] | (() => TokenGuard | undefined);
  /** Largest request body, in bytes; larger is answered 413. */
  maxBodyBytes: number;
  /** Most reads in one request; more is answered 413. Default 10 000. */
  maxReads?: number;
  /**
   * Most reads of requests parsed and not yet committed, at once; past it a request is answered
   * 503 with Retry-After (one request is always taken when none is in flight). Default 20 000.
   */
  maxReadsInFlight?: number;
  /** True while intake is paused (back-pressure) or the input stops: answered 503 with Retry-After. */
  isPaused(): boolean;
  /** Retry-After of a 503, in s. Default 5. */
  retryAfterSec?: number;
  /** Where the fields of a read are in each object. Default `code`, `ts`, `dcp`, `parents`, `attributes`. */
  fields?: JsonFieldsConfig;
  /** Store a rejection (with the body's first bytes and the reason) for each 400 and 413. Default true. */
  recordRejections?: boolean;
  logger?: Logger;
  now?: Clock;
  /** Called around each accepted submit, so the input can wait for requests in flight when it stops. */
  track?: <T>(work: Promise<T>) => Promise<T>;
  /**
   * Longest code of a read, in UTF-8 bytes (the input's `maxReadLength`), or a function answering
   * the current one (it follows a configuration reload); longer is a rejection. Default 4096.
   */
  maxReadLength?: number | (() => number);
  /** Least time between two "ingest call refused" log lines, in ms; default 10 s ({@link RefusalLog}). */
  refusalLogIntervalMs?: number;
}

export { OVERLONG_EXCERPT_BYTES } from './ingest-body.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The error body of every answer other than 202: `field` names the offending field (`[2].code`). */
export interface IngestError {
  statusCode: number;
  error: string;
  message: string;
  field?: string;
  /**
   * With a 503 or 413 after part of the request was committed (a large request is committed in
   * slices): its first `stored` reads are in the buffer; send the others (from index `stored`) again.
   */
  stored?: number;
}

/**
 * Registers `POST /api/v1/reads` (HTTP ingest) on the local server, in its own
 * encapsulated scope (its body parser and error handler touch no other route).
 *
 * Body: one read or an array of reads, JSON, `{ code, ts?, dcp?, parents?, attributes? }` (see
 * `jsonRead`). Answers:
 * - 202 `{ accepted: n, scans, noReads, duplicates, rejected: [{ index, reason }] }` only after the
 *   reads are committed; `rejected` lists the well-formed reads that mapping refused (stored as
 *   rejections, not sent upstream), and reads whose code is longer than `maxReadLength` (stored as
 *   rejections holding the first {@link OVERLONG_EXCERPT_BYTES} bytes);
 * - 400 with `field` for JSON that does not parse or a read that is not valid (nothing of that
 *   request is stored as a read; the body's first bytes are stored as one rejection with the reason);
 * - 401 without a valid `Authorization: Bearer <token>` (nothing stored);
 * - 413 over `maxBodyBytes` or `maxReads` (one rejection stored);
 * - 415 for a body that is not `application/json`;
 * - 503 with `Retry-After` while paused, stopping, past `maxReadsInFlight`, or when the buffer
 *   refused the commit; with `stored` when it refused part-way through a request committed in
 *   slices (its first `stored` reads are in the buffer).
 */
export async function registerIngestRoutes(
  app: FastifyInstance,
  options: IngestRouteOptions,
): Promise<void> {
  await app.register(async (scope) => {
    const fields = options.fields ?? DEFAULT_JSON_FIELDS;
    const maxReads = options.maxReads ?? 10_000;
    const maxInFlight = options.maxReadsInFlight ?? 20_000;
    /** Reads of the requests parsed and not yet answered: what their items and records hold in memory. */
    let inFlight = 0;
    const busy = (reply: FastifyReply): FastifyReply => {
      reply.header('Retry-After', retryAfter);
      return send(
        reply,
        503,
        'Service Unavailable',
        `other requests are being stored (${inFlight} reads, at most ${maxInFlight} at once); retry later`,
      );
    };
    const retryAfter = String(options.retryAfterSec ?? 5);
    const now = options.now ?? systemClock;
    const track = options.track ?? (<T>(work: Promise<T>) => work);
    const maxReadLengthNow = (): number => {
      const m = options.maxReadLength;
      return (typeof m === 'function' ? m() : m) ?? DEFAULT_MAX_READ_LENGTH;
    };
    const refusals = options.logger
      ? new RefusalLog(options.logger, 'ingest call refused', options.refusalLogIntervalMs)
      : undefined;
    scope.addHook('onClose', async () => refusals?.flush());

    const record = async (
      raw: Buffer,
      reason: string,
      origin: Record<string, string | number>,
    ): Promise<void> => {
      if (options.recordRejections === false) return;
      try {
        await track(
          options.sink.submit([
            rejectionItem(options.inputId, raw, reason, new Date(now()), origin),
          ]),
        );
      } catch (err) {
        options.logger?.warn({ err, reason }, 'could not store the rejection of an ingest request');
      }
    };
    const send = (
      reply: FastifyReply,
      statusCode: number,
      error: string,
      message: string,
      field?: string,
      stored?: number,
    ): FastifyReply =>
      reply.code(statusCode).send({
        statusCode,
        error,
        message,
        ...(field !== undefined ? { field } : {}),
        ...(stored !== undefined && stored > 0 ? { stored } : {}),
      } satisfies IngestError);
    const originOf = (req: FastifyRequest): Record<string, string> => ({
      http: `${req.method} ${INGEST_PATH}`,
      peer: req.ip,
    });

    scope.removeAllContentTypeParsers();
    // Raw bytes: a body that is not JSON is kept, as it came, in its rejection.
    scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) =>
      done(null, body),
    );

    scope.addHook('onRequest', async (req, reply) => {
      if (!authorized(req.headers.authorization, options.tokens)) {
        // Who and how, never what was given: the header may hold a real token for something else.
        refusals?.note({
          remote: req.ip,
          given:
            req.headers.authorization === undefined
              ? 'no token'
              : /^Bearer /i.test(req.headers.authorization)
                ? 'wrong token'
                : 'not a bearer token',
        });
        reply.header('WWW-Authenticate', 'Bearer realm="scan-gateway ingest"');
        return send(
          reply,
          401,
          'Unauthorized',
          'a valid bearer token is required (Authorization: Bearer <token>)',
        );
      }
      if (options.isPaused()) {
        reply.header('Retry-After', retryAfter);
        return send(
          reply,
          503,
          'Service Unavailable',
          'intake is paused (the buffer is near its quota or its disk is full, or the gateway is stopping); retry later',
        );
      }
      // Before the body is read: a request refused here costs no memory.
      if (inFlight >= maxInFlight) return busy(reply);
      return undefined;
    });

    scope.setErrorHandler(
      async (err: { code?: string; statusCode?: number; message: string }, req, reply) => {
        if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
          await record(
            Buffer.alloc(0),
            `request body larger than maxBodyBytes (${options.maxBodyBytes})`,
            originOf(req),
          );
          return send(
            reply,
            413,
            'Payload Too Large',
            `the body is larger than ${options.maxBodyBytes} bytes`,
          );
        }
        if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
          return send(reply, 415, 'Unsupported Media Type', 'send Content-Type: application/json');
        const statusCode =
          err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
        if (statusCode === 500) options.logger?.error({ err }, 'ingest request failed');
        return send(
          reply,
          statusCode,
          statusCode === 500 ? 'Internal Server Error' : 'Bad Request',
          statusCode === 500 ? 'internal error' : err.message,
        );
      },
    );

    // Its guard, not its path, gets it the client-certificate check and its refusals' label.
    const config = guard('ingest');
    scope.post(INGEST_PATH, { bodyLimit: options.maxBodyBytes, config }, async (req, reply) => {
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const origin = originOf(req);
      const receivedAt = new Date(now());
      const bad = async (message: string, field?: string): Promise<FastifyReply> => {
        await record(body, field !== undefined ? `${message} (field ${field})` : message, origin);
        return send(reply, 400, 'Bad Request', message, field);
      };
      let value: unknown;
      try {
        value = JSON.parse(utf8.decode(body));
      } catch (err) {
        return bad(
          err instanceof SyntaxError
            ? `body is not JSON: ${err.message}`
            : 'body is not valid UTF-8',
        );
      }
      const count = Array.isArray(value) ? value.length : 1;
      if (count > maxReads) {
        await record(
          body,
          `request of ${count} reads is more than maxReadsPerRequest (${maxReads})`,
          origin,
        );
        return send(reply, 413, 'Payload Too Large', `at most ${maxReads} reads per request`);
      }
      const parsed = ingestBodyItems(value, {
        inputId: options.inputId,
        fields,
        receivedAt,
        origin,
        maxReadLength: maxReadLengthNow(),
      });
      if (!parsed.ok) return bad(parsed.message, parsed.field);
      const items = parsed.items;
      if (inFlight > 0 && inFlight + items.length > maxInFlight) return busy(reply);
      let result: SubmitResult | void;
      inFlight += items.length;
      try {
        // Committed in slices, the probes and other inputs served between them.
        result = await track(options.sink.submit(items, { inSlices: true }));
      } catch (err) {
        const stored = storedBefore(err);
        const part = stored > 0 ? `; its first ${stored} reads are stored, send the others` : '';
        if (isTooLargeForBuffer(err)) {
          await record(body, `request ${err.message}`, origin);
          return send(
            reply,
            413,
            'Payload Too Large',
            `the request is ${err.message}${part}`,
            undefined,
            stored,
          );
        }
        options.logger?.error(
          { err, reads: items.length, stored },
          'buffer refused ingested reads; answered 503',
        );
        reply.header('Retry-After', retryAfter);
        return send(
          reply,
          503,
          'Service Unavailable',
          `the buffer could not store the reads${part}; retry later`,
          undefined,
          stored,
        );
      } finally {
        inFlight -= items.length;
      }
      // Well-formed reads that mapping refused (a bad GS1 check digit, a control byte, an unknown
      // DCP) are stored as rejections like any input's, and named here so the sender learns of them.
      const outcomes = result ? result.outcomes : [];
      const outcomeCount = (o: string) => outcomes.filter((x) => x.outcome === o).length;
      // `accepted` counts the reads taken into the buffer, over-long ones (stored as rejections) included.
      const rejected = outcomes.flatMap((o, index) =>
        o.outcome === 'rejected' ? [{ index, reason: o.reason ?? 'rejected' }] : [],
      );
      return reply.code(202).send({
        accepted: items.length,
        ...(result
          ? {
              scans: outcomeCount('scan'),
              noReads: outcomeCount('noRead'),
              duplicates: outcomeCount('duplicate'),
              rejected,
            }
          : {}),
      });
    });
  });
}

/** Reads of a refused request committed before the refusal (`details.committedItems` of intake's slices). */
function storedBefore(err: unknown): number {
  const n = err instanceof GatewayError ? err.details.committedItems : undefined;
  return typeof n === 'number' ? n : 0;
}

/** Constant-time comparison of the bearer token against every accepted one. */
function authorized(header: string | undefined, tokens: IngestRouteOptions['tokens']): boolean {
  const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match?.[1]) return false;
  const given = digest(match[1]);
  const same = (token: string) => token !== '' && timingSafeEqual(given, digest(token));
  if (typeof tokens === 'function') return tokens()?.accepts(same) ?? false;
  let ok = false;
  for (const token of tokens) if (same(token)) ok = true;
  return ok;
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}
