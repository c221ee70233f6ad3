import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ItemAnswer, ItemQuestion } from '../queries/item-questions.js';
import { LookupUnavailable } from '../queries/lookup-workers.js';
import type { HttpLimitsConfig } from '../config/schema.js';
import type { Logger } from '../log.js';
import { scrubValue } from '../log.js';
import { RefusalLog } from '@scan-gateway/service-kit/refusal-log';
import { guard } from '../listener/route-guard.js';
import { WorkQueue } from '../listener/work-queue.js';

/** Longest reference the item routes take, in characters (a reference is a barcode's text). */
export const MAX_ITEM_REFERENCE = 512;

/**
 * Item lookup, read-only over the buffer. `answer` gives the status code and the body as JSON
 * text (src/buffer/item-questions.ts), made where the work ran (a lookup thread:
 * src/buffer/lookup-workers.ts); it rejects with `LookupUnavailable` (answered 503 with its reason
 * and Retry-After) when no thread could answer.
 */
export interface ItemLookups {
  answer: (question: ItemQuestion) => ItemAnswer | Promise<ItemAnswer>;
}

/** What {@link registerItemRoutes} needs of the server. */
export interface ItemRoutesOptions {
  items: ItemLookups;
  limits: HttpLimitsConfig;
  logger: Logger;
  /** Least time between two log lines of refused lookups, in ms. */
  intervalMs: number;
  /** The read token's check, first hook of each route. */
  guardRead: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
  /** Counts a refusal in `scan_gateway_http_refused_total` by reason. */
  count: (reason: string) => void;
  scrub?: ((text: string) => string) | undefined;
}

/**
 * `GET /api/v1/items/<reference>`, `GET /api/v1/items?prefix=…` and
 * `GET /api/v1/items?value=…[&ai=…][&limit=…][&cursor=…]`, behind the read token; the lookups run
 * through a bounded queue (`maxItemLookups` at once, `maxQueuedItemLookups` waiting; 429 past it).
 */
export function registerItemRoutes(app: FastifyInstance, options: ItemRoutesOptions): void {
  const { items, limits, guardRead, count, scrub } = options;
  const lookupLog = new RefusalLog(
    options.logger,
    'item lookup refused: too many lookups running and waiting',
    options.intervalMs,
  );
  app.addHook('onClose', async () => lookupLog.flush());
  const tooLong = (reply: FastifyReply) =>
    reply.code(400).send({
      statusCode: 400,
      error: 'Bad Request',
      message: `a reference is at most ${MAX_ITEM_REFERENCE} characters`,
    });
  // A lookup is tens of ms of SQLite and JSON work for a wide item, done in a thread of its own:
  // `maxItemLookups` at once and a bounded line behind them, so a burst of lookups holds bounded
  // memory and work, and the excess is refused at once.
  const lookups = new WorkQueue({
    concurrency: limits.maxItemLookups,
    maxWaiting: limits.maxQueuedItemLookups,
  });
  const lookup = async (request: FastifyRequest, reply: FastifyReply, question: ItemQuestion) => {
    const job = lookups.run(() => {
      // A client gone while waiting: nothing to answer, no work to do.
      if (request.socket.destroyed) return undefined;
      return items.answer(question);
    });
    if (!job) {
      count('item_lookups');
      lookupLog.note({
        remote: request.ip,
        running: lookups.running,
        waiting: lookups.waiting,
        maxQueuedItemLookups: limits.maxQueuedItemLookups,
      });
      return reply.code(429).header('retry-after', '1').send({
        statusCode: 429,
        error: 'Too Many Requests',
        message: 'too many item lookups are running and waiting; try again in a second',
      });
    }
    let done: ItemAnswer | undefined;
    try {
      done = await job;
    } catch (err) {
      if (!(err instanceof LookupUnavailable)) throw err;
      return reply
        .code(503)
        .header('retry-after', '1')
        .send({ statusCode: 503, error: 'Service Unavailable', message: err.message });
    }
    if (!done) return reply.hijack();
    return reply
      .code(done.code)
      .type('application/json; charset=utf-8')
      .send(scrub ? scrubJson(done.json, scrub) : done.json);
  };
  // Same read token rules as the status: the trace shows raw reads.
  app.get(
    '/api/v1/items',
    { onRequest: guardRead, config: guard('read') },
    async (request, reply) => {
      const query = request.query as Record<string, unknown>;
      const prefix = String(query.prefix ?? '');
      const value = String(query.value ?? '');
      if (prefix.length > MAX_ITEM_REFERENCE || value.length > MAX_ITEM_REFERENCE)
        return tooLong(reply);
      if (value !== '') {
        const ai = query.ai === undefined ? undefined : String(query.ai);
        const cursor = query.cursor === undefined ? undefined : String(query.cursor);
        const limit = query.limit === undefined ? undefined : Number(query.limit);
        const bad = (message: string) =>
          reply.code(400).send({ statusCode: 400, error: 'Bad Request', message });
        if (ai !== undefined && !/^\d{2,4}$/.test(ai))
          return bad(
            `ai must be a GS1 Application Identifier of 2 to 4 digits (e.g. 21), got "${ai}"`,
          );
        if (cursor !== undefined && !/^\d{2,4}\.\d{1,15}$/.test(cursor))
          return bad(
            `cursor must be the "next" of the previous page (e.g. 21.1234), got "${cursor}"`,
          );
        if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1))
          return bad(`limit must be a whole number of at least 1, got "${String(query.limit)}"`);
        return lookup(request, reply, {
          kind: 'byValue',
          value,
          ...(ai !== undefined ? { ai } : {}),
          ...(limit !== undefined ? { limit } : {}),
          ...(cursor !== undefined ? { cursor } : {}),
        });
      }
      if (prefix === '')
        return reply.code(400).send({
          statusCode: 400,
          error: 'Bad Request',
          message:
            'give ?prefix=<start of a reference> or ?value=<an AI value: serial, SSCC, lot, GTIN>, or ask for /api/v1/items/<reference>',
        });
      return lookup(request, reply, { kind: 'search', prefix });
    },
  );
  // A wildcard: a reference may hold a slash (a GS1 Digital Link, a path-like serial).
  app.get(
    '/api/v1/items/*',
    { onRequest: guardRead, config: guard('read') },
    async (request, reply) => {
      const reference = (request.params as Record<string, string>)['*'] ?? '';
      if (reference === '')
        return reply.code(400).send({
          statusCode: 400,
          error: 'Bad Request',
          message: 'give the reference: /api/v1/items/<reference>',
        });
      if (reference.length > MAX_ITEM_REFERENCE) return tooLong(reply);
      const depth = Number((request.query as Record<string, unknown>).depth ?? Number.NaN);
      return lookup(request, reply, {
        kind: 'trace',
        reference,
        ...(Number.isFinite(depth) ? { depth } : {}),
      });
    },
  );
}

/**
 * `json` with `scrub` applied to every string in it. The text is searched first, so an answer with
 * no secret in it (nearly all) costs a pass over the text and no parse; one with a hit is scrubbed
 * value by value, because a needle found across the JSON's own quotes must not break its syntax.
 * "Bearer" alone sends it value by value too: `Bearer\t<token>` in a value is `Bearer\\t…` in
 * the text, which the scrubber's whitespace does not match.
 */
function scrubJson(json: string, scrub: (text: string) => string): string {
  return scrub(json) === json && !/bearer/i.test(json)
    ? json
    : JSON.stringify(scrubValue(JSON.parse(json), scrub));
}
