import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, REDACTED, SecretScrubber } from '../../src/log.js';

function sink(isTTY = false): { stream: Writable & { isTTY?: boolean }; lines: () => string[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      chunks.push(chunk.toString());
      done();
    },
  }) as Writable & { isTTY?: boolean };
  if (isTTY) stream.isTTY = true;
  return { stream, lines: () => chunks.join('').split('\n').filter(Boolean) };
}

const SECRET = 'Sup3r-s3cret"with\\quotes';
const ADMIN = 'admin-0123456789abcdef';
const JWT = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkZW1vLWNsaWVudCJ9.c2lnbmF0dXJlLXNpZ25hdHVyZQ';

describe('logger', () => {
  it('writes JSON lines with a component on every line', () => {
    const out = sink();
    const logger = createLogger({ destination: out.stream, format: 'json' });
    logger.info('root line');
    logger.child({ component: 'delivery' }).warn({ batchId: 3 }, 'child line');
    logger.info({ component: 'app' }, 'explicit');
    logger.child({ requestId: 'x' }).info('child without component');
    const parsed = out.lines().map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(parsed.map((p) => p.component)).toEqual(['main', 'delivery', 'app', 'main']);
    expect(parsed[1]).toMatchObject({
      level: 40,
      batchId: 3,
      msg: 'child line',
      service: 'scan-gateway',
    });
  });

  it('respects the level', () => {
    const out = sink();
    const logger = createLogger({ destination: out.stream, format: 'json', level: 'warn' });
    logger.info('hidden');
    logger.debug('hidden');
    logger.error('shown');
    expect(out.lines()).toHaveLength(1);
  });

  it('removes secrets by path, by value, JWTs and bearer credentials, wherever they are', () => {
    const out = sink();
    const scrubber = new SecretScrubber([SECRET]);
    const logger = createLogger({ destination: out.stream, format: 'json', scrubber });
    scrubber.add(ADMIN);
    logger.info(
      {
        clientSecret: SECRET,
        nested: { token: 'abc-token-value', authorization: `Bearer ${ADMIN}` },
      },
      'by path',
    );
    logger.error({ err: new Error(`refused: client_secret=${SECRET}`) }, 'in an error message');
    logger.warn(`a message holding ${ADMIN} and ${JWT}`);
    logger.info(
      {
        headers: { Authorization: 'Bearer some-other-credential-123' },
        deep: { a: { b: `x ${SECRET} y` } },
      },
      'nested',
    );
    logger.info('Authorization: Bearer zzzzzzzzzzzz');
    const text = out.lines().join('\n');
    for (const leaked of [
      SECRET,
      JSON.stringify(SECRET).slice(1, -1),
      ADMIN,
      JWT,
      'abc-token-value',
      'some-other-credential-123',
      'zzzzzzzzzzzz',
    ]) {
      expect(text).not.toContain(leaked);
    }
    expect(text).toContain(REDACTED);
    // lines stay valid JSON
    for (const line of out.lines()) expect(() => JSON.parse(line)).not.toThrow();
  });

  it('is human-readable on a terminal', () => {
    const out = sink(true);
    const logger = createLogger({
      destination: out.stream,
      scrubber: new SecretScrubber([SECRET]),
    });
    logger.child({ component: 'delivery' }).info({ batchId: 7 }, `batch uploaded ${SECRET}`);
    const text = out.lines().join('\n');
    expect(() => JSON.parse(out.lines()[0]!)).toThrow();
    expect(text).toContain('[delivery] batch uploaded');
    expect(text).toContain('batchId');
    expect(text).not.toContain(SECRET);
  });

  it('ignores secrets too short to be told apart from ordinary text', () => {
    const scrubber = new SecretScrubber(['ab', '']);
    expect(scrubber.scrub('{"msg":"about"}')).toBe('{"msg":"about"}');
  });
});
