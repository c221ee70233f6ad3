import { afterEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import type { ItemAnswer, ItemQuestion } from '../../src/queries/item-questions.js';
import { LookupUnavailable } from '../../src/queries/lookup-workers.js';
import { DEFAULT_HTTP_LIMITS } from '../../src/config/schema.js';
import { buildHealthServer } from '../../src/health/server.js';
import type { GatewayStatus } from '../../src/health/status.js';
import { SecretScrubber } from '../../src/log.js';
import { memoryLogger } from '../helpers/log-lines.js';

/**
 * The item routes in front of whatever answers them (the lookup threads in the daemon): the
 * question each route asks, the answer's JSON text sent as made, a thread that could not answer
 * told as 503 with its reason, and secrets cut out of the text before it leaves.
 */

let server: FastifyInstance | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

function start(
  answer: (q: ItemQuestion) => ItemAnswer | Promise<ItemAnswer>,
  scrub?: (text: string) => string,
): FastifyInstance {
  server = buildHealthServer({
    logger: memoryLogger('info').logger,
    status: () => ({}) as GatewayStatus,
    limits: DEFAULT_HTTP_LIMITS,
    listenHost: '127.0.0.1',
    allowedHosts: [],
    items: { answer },
    ...(scrub ? { scrub } : {}),
  });
  return server;
}

const get = (app: FastifyInstance, url: string) =>
  app.inject({ method: 'GET', url, headers: { host: '127.0.0.1' } });

describe('item routes', () => {
  it('ask the question of their route and send the answer text with its code', async () => {
    const asked: ItemQuestion[] = [];
    const app = start((q) => {
      asked.push(q);
      return { code: q.kind === 'trace' ? 404 : 200, json: JSON.stringify({ asked: q.kind }) };
    });
    const trace = await get(app, '/api/v1/items/(01)09506000134352(21)A%2F1?depth=2');
    expect(trace.statusCode).toBe(404);
    expect(trace.headers['content-type']).toMatch(/application\/json/);
    expect(trace.body).toBe('{"asked":"trace"}');
    expect((await get(app, '/api/v1/items?prefix=PK-')).statusCode).toBe(200);
    expect((await get(app, '/api/v1/items?value=A1&ai=21&limit=5&cursor=21.7')).statusCode).toBe(
      200,
    );
    expect(asked).toEqual([
      { kind: 'trace', reference: '(01)09506000134352(21)A/1', depth: 2 },
      { kind: 'search', prefix: 'PK-' },
      { kind: 'byValue', value: 'A1', ai: '21', limit: 5, cursor: '21.7' },
    ]);
  });

  it('answer 503 with the reason and Retry-After when no lookup thread could answer; 500 for another error', async () => {
    const app = start((q) => {
      if (q.kind === 'trace' && q.reference === 'boom') throw new Error('disk I/O error');
      return Promise.reject(
        new LookupUnavailable(
          'the lookup thread exited (code 1); it is started again for the next lookup',
        ),
      );
    });
    const down = await get(app, '/api/v1/items/W0');
    expect(down.statusCode).toBe(503);
    expect(down.headers['retry-after']).toBe('1');
    expect(down.json()).toMatchObject({
      message: expect.stringContaining('the lookup thread exited (code 1)'),
    });
    expect((await get(app, '/api/v1/items/boom')).statusCode).toBe(500);
  });

  it('cut secrets out of the answer text, keeping it JSON', async () => {
    const scrubber = new SecretScrubber(['s3cret-admin-token', 'a","b']);
    const texts: Record<string, string> = {
      plain: JSON.stringify({ reference: 'W0', raw: 'nothing to hide' }),
      secret: JSON.stringify({ reference: 'W0', raw: 'token=s3cret-admin-token' }),
      // A needle that matches across the JSON's own quotes: scrubbed value by value instead.
      across: JSON.stringify(['xa', 'bc']),
      bearer: JSON.stringify({ raw: 'Authorization: Bearer\tabcdefghijkl' }),
    };
    const app = start(
      (q) => ({ code: 200, json: texts[(q as { reference: string }).reference]! }),
      (t) => scrubber.scrub(t),
    );
    expect((await get(app, '/api/v1/items/plain')).body).toBe(texts.plain);
    expect((await get(app, '/api/v1/items/secret')).json()).toEqual({
      reference: 'W0',
      raw: 'token=[redacted]',
    });
    expect((await get(app, '/api/v1/items/across')).json()).toEqual(['xa', 'bc']);
    expect((await get(app, '/api/v1/items/bearer')).json()).toEqual({
      raw: 'Authorization: Bearer\t[redacted]',
    });
  });
});
