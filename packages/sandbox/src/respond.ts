import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/**
 * Body parsing and answer content types of the sandbox's JSON endpoints.
 */

/** Content types a JSON answer may take (contract §4.1, §4.2 list these three). */
const ANSWER_TYPES = ['application/json', 'text/json', 'text/plain'] as const;

/**
 * The answer content type for an `Accept` header: the first of application/json, text/json and
 * text/plain the caller lists with q > 0 (highest q first), application/json otherwise.
 */
export function negotiate(accept: string | undefined): (typeof ANSWER_TYPES)[number] {
  if (!accept) return 'application/json';
  const ranges = accept
    .split(',')
    .map((part, index) => {
      const [range = '', ...params] = part.trim().split(';');
      const q = params.map((p) => /^\s*q=([\d.]+)/.exec(p)?.[1]).find((v) => v !== undefined);
      return { range: range.trim().toLowerCase(), q: q === undefined ? 1 : Number(q), index };
    })
    .filter((r) => r.q > 0)
    .sort((a, b) => b.q - a.q || a.index - b.index);
  for (const { range } of ranges) {
    if (range === '*/*' || range === 'application/*') return 'application/json';
    if (range === 'text/*') return 'text/json';
    const exact = ANSWER_TYPES.find((t) => t === range);
    if (exact) return exact;
  }
  return 'application/json';
}

/** Sends `body` as JSON text under the negotiated content type. */
export function sendJson(
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  body: unknown,
): FastifyReply {
  return reply
    .code(status)
    .type(`${negotiate(request.headers.accept)}; charset=utf-8`)
    .send(JSON.stringify(body));
}

/**
 * What the JSON body parser hands to routes: the exact byte count (the 5.8 MiB limit is on bytes)
 * and the parsed value, or why it did not parse. Parsing never fails the request by itself, so a
 * route can answer 413 before looking at the JSON.
 */
export interface ParsedBody {
  bytes: number;
  json?: unknown;
  error?: string;
}

/** Whether a route body is what {@link registerJsonParser} produced. */
export function isParsedBody(body: unknown): body is ParsedBody {
  return (
    typeof body === 'object' && body !== null && typeof (body as ParsedBody).bytes === 'number'
  );
}

/**
 * Replaces fastify's JSON parser with one accepting application/json, text/json and
 * application/*+json (contract §4.2) and producing {@link ParsedBody}.
 */
export function registerJsonParser(app: FastifyInstance): void {
  app.removeContentTypeParser(['application/json']);
  const parse = (
    _request: unknown,
    buffer: Buffer,
    done: (err: Error | null, body?: unknown) => void,
  ): void => {
    try {
      done(null, {
        bytes: buffer.length,
        json: buffer.length === 0 ? undefined : (JSON.parse(buffer.toString('utf8')) as unknown),
      });
    } catch (err) {
      done(null, { bytes: buffer.length, error: err instanceof Error ? err.message : String(err) });
    }
  };
  app.addContentTypeParser<Buffer>(['application/json', 'text/json'], { parseAs: 'buffer' }, parse);
  app.addContentTypeParser<Buffer>(
    /^application\/[\w.+-]+\+json(\s*;.*)?$/,
    { parseAs: 'buffer' },
    parse,
  );
}
