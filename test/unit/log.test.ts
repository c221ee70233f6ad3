import { generateKeyPairSync } from 'node:crypto';
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

  it('masks key material: PEM blocks whole or cut short, and the bare base64 of a key', () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
      type: 'pkcs8',
      format: 'pem',
    }) as string;
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({
      type: 'sec1',
      format: 'pem',
    }) as string;
    const scrubber = new SecretScrubber();
    const body = (pem: string) => pem.split('\n').filter((l) => l !== '' && !l.startsWith('-----'));
    // Whole, in text, in JSON text (line breaks as \n) and as a printed read (<LF>).
    for (const pem of [rsa, ec]) {
      for (const shown of [
        `file refused: ${pem} (line 1)`,
        JSON.stringify({ raw: pem }),
        `read: ${pem.replaceAll('\n', '<LF>')}   (file key.pem)`,
        // Cut after 1 KiB, as a rejection keeps the first bytes of a file.
        `read: ${pem.slice(0, 1024).replaceAll('\n', '<LF>')}`,
        JSON.stringify({ raw: pem.slice(0, 700) }),
      ]) {
        const out = scrubber.scrub(shown);
        expect(out).toContain(REDACTED);
        expect(out).not.toContain('-----BEGIN');
        for (const line of body(pem).slice(0, -1)) expect(out).not.toContain(line.slice(0, 40));
      }
    }
    // One line of the body a read (a key file in a lines inbox).
    for (const line of body(rsa).slice(0, -1))
      expect(scrubber.scrub(`read ${line}`)).toBe(`read ${REDACTED}`);
    const json = JSON.stringify({ status: { latest: rsa.slice(0, 500) }, n: 1 });
    expect(() => JSON.parse(scrubber.scrub(json))).not.toThrow();
    // What is no key stays: references, GS1 strings, hashes, request ids.
    for (const plain of [
      'PK-000815',
      '(01)09521234543213(21)C2611030001234',
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      'CELL0000000000000000000000000000000000000000000000000000000000000001',
      '4a7e1f0c-2b1d-4c9a-9f0e-6d2b8a1c3e5f',
    ])
      expect(scrubber.scrub(plain)).toBe(plain);
  });
});
