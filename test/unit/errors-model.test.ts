import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import {
  ErrorCodes,
  GatewayError,
  httpStatusOf,
  isBufferError,
  isBufferUnopenable,
  isDiskFull,
  isGatewayError,
  isNotSent,
  isQuotaRefusal,
  isTokenFailure,
  isTooLargeForBuffer,
} from '../../src/errors.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

/**
 * One error model: outside tests, every error the gateway makes is a
 * `GatewayError` with a stable code. A plain `Error` (or `TypeError`, `RangeError`…, a class
 * extending one, a thrown string) in src/ fails here unless it is on this list, with its reason.
 */
const ALLOWED: readonly { file: string; text: string; why: string }[] = [
  {
    file: 'packages/service-kit/src/errors.ts',
    text: 'export class GatewayError extends Error {',
    why: 'the one error class itself',
  },
  {
    file: 'src/cli/exit.ts',
    text: 'export class CommandExit extends Error {',
    why: 'no error: a command that has said everything carries its exit code to src/main.ts, which handles it before any error',
  },
  {
    file: 'src/health/page.ts',
    text: "throw new Error('HTTP ' + res.status)",
    why: "browser code inside the page's script (a template string): GatewayError does not exist in the browser",
  },
];

const FORBIDDEN = [
  /\bnew\s+(?:Error|TypeError|RangeError|SyntaxError|ReferenceError|EvalError|URIError|AggregateError)\s*\(/,
  /\bextends\s+(?:Error|TypeError|RangeError|SyntaxError|ReferenceError)\b/,
  /\bthrow\s+['"`]/,
  /\bPromise\.reject\(\s*['"`]/,
];

/** Lines of `text` that make an error outside the model, as `line: text`. */
function offending(text: string): { line: number; text: string }[] {
  return text
    .split('\n')
    .flatMap((line, i) =>
      FORBIDDEN.some((re) => re.test(line)) ? [{ line: i + 1, text: line.trim() }] : [],
    );
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

describe('one error model: no plain Error in src/ or packages/*/src/', () => {
  it('finds the patterns it is meant to find (the check itself can fail)', () => {
    expect(offending("  if (x) throw new Error('boom');")).toHaveLength(1);
    expect(offending('reject(new RangeError(`bad`))')).toHaveLength(1);
    expect(offending('class Oops extends Error {')).toHaveLength(1);
    expect(offending("throw 'a string';")).toHaveLength(1);
    expect(offending("throw new GatewayError(ErrorCodes.INTERNAL, 'ok');")).toHaveLength(0);
    expect(offending('class CsvSyntaxError extends GatewayError {')).toHaveLength(0);
  });

  it('every error made in src/ and packages/ is a GatewayError, but for the documented allow-list', () => {
    const found: string[] = [];
    const allowedSeen = new Set<(typeof ALLOWED)[number]>();
    // The daemon and its workspace packages (the sandbox throws the errors the CLI branches on).
    const roots = [
      join(PACKAGE_ROOT, 'src'),
      ...readdirSync(join(PACKAGE_ROOT, 'packages')).map((p) =>
        join(PACKAGE_ROOT, 'packages', p, 'src'),
      ),
    ];
    for (const file of roots.flatMap(sourceFiles)) {
      const rel = relative(PACKAGE_ROOT, file).split('\\').join('/');
      for (const hit of offending(readFileSync(file, 'utf8'))) {
        const allowed = ALLOWED.find((a) => a.file === rel && hit.text.includes(a.text));
        if (allowed) allowedSeen.add(allowed);
        else found.push(`${rel}:${hit.line}: ${hit.text}`);
      }
    }
    expect(
      found,
      'use new GatewayError(ErrorCodes.…, message) (packages/service-kit/src/errors.ts); add a code to the catalogue if none fits',
    ).toEqual([]);
    // A stale entry would let the next plain Error in that file through unnoticed.
    expect(
      ALLOWED.filter((a) => !allowedSeen.has(a)).map((a) => a.file),
      'allow-list entries that match nothing any more',
    ).toEqual([]);
  });

  it('codes are stable SCANGW_E_ strings, each once', () => {
    const codes = Object.values(ErrorCodes);
    expect(new Set(codes).size).toBe(codes.length);
    for (const code of codes) expect(code).toMatch(/^SCANGW_E_[A-Z_]+$/);
  });
});

describe('refusal predicates', () => {
  const of = (
    code: (typeof ErrorCodes)[keyof typeof ErrorCodes],
    details: Record<string, unknown> = {},
  ) => new GatewayError(code, 'x', { details });
  const everyCode = Object.values(ErrorCodes).map((c) => of(c));

  it('isQuotaRefusal: the quota reached, or a submit larger than the whole quota; nothing else', () => {
    expect(
      everyCode
        .filter(isQuotaRefusal)
        .map((e) => e.code)
        .sort(),
    ).toEqual([ErrorCodes.BUFFER_QUOTA, ErrorCodes.BUFFER_TOO_LARGE].sort());
    // The old untyped flag does not count any more: only the code does.
    expect(isQuotaRefusal(of(ErrorCodes.BUFFER, { quota: true }))).toBe(false);
    expect(isQuotaRefusal(Object.assign(new Error('x'), { code: ErrorCodes.BUFFER_QUOTA }))).toBe(
      false,
    );
  });

  it('isTooLargeForBuffer: only the submit that can never fit', () => {
    expect(everyCode.filter(isTooLargeForBuffer).map((e) => e.code)).toEqual([
      ErrorCodes.BUFFER_TOO_LARGE,
    ]);
  });

  it('isBufferUnopenable: only the buffer that needs a person (run exits 4)', () => {
    expect(everyCode.filter(isBufferUnopenable).map((e) => e.code)).toEqual([
      ErrorCodes.BUFFER_UNOPENABLE,
    ]);
  });

  it('isBufferError: every SCANGW_E_BUFFER… code, and no other', () => {
    expect(
      everyCode
        .filter(isBufferError)
        .map((e) => e.code)
        .sort(),
    ).toEqual(
      Object.values(ErrorCodes)
        .filter((c) => c.startsWith('SCANGW_E_BUFFER'))
        .sort(),
    );
    expect(everyCode.filter(isBufferError)).toHaveLength(7);
    expect(isBufferError(of(ErrorCodes.BODY_TOO_LARGE))).toBe(false);
  });

  it("isDiskFull: the code, or SQLite's own SQLITE_FULL on the error or its causes", () => {
    // A real SQLITE_FULL: a database allowed too few pages.
    const db = new Database(':memory:');
    let full: unknown;
    try {
      db.exec('CREATE TABLE t (b BLOB)');
      db.pragma('max_page_count = 3');
      db.prepare('INSERT INTO t VALUES (zeroblob(100000))').run();
    } catch (err) {
      full = err;
    } finally {
      db.close();
    }
    expect((full as { code?: string }).code).toBe('SQLITE_FULL');
    expect(isDiskFull(full)).toBe(true);
    expect(isDiskFull(new GatewayError(ErrorCodes.BUFFER, 'commit failed', { cause: full }))).toBe(
      true,
    );
    expect(isDiskFull(of(ErrorCodes.BUFFER_DISK_FULL))).toBe(true);
    expect(everyCode.filter(isDiskFull).map((e) => e.code)).toEqual([ErrorCodes.BUFFER_DISK_FULL]);
    expect(isDiskFull(Object.assign(new Error('locked'), { code: 'SQLITE_BUSY' }))).toBe(false);
    expect(isDiskFull(undefined)).toBe(false);
  });

  it('isNotSent and isTokenFailure read the upstream facts that cut across codes', () => {
    const token = of(ErrorCodes.UPSTREAM_HTTP, { status: 503, notSent: true, stage: 'token' });
    expect(isNotSent(token)).toBe(true);
    expect(isTokenFailure(token)).toBe(true);
    const refused = of(ErrorCodes.UPSTREAM_NETWORK, { cause: 'ECONNREFUSED', notSent: true });
    expect(isNotSent(refused)).toBe(true);
    expect(isTokenFailure(refused)).toBe(false);
    expect(isNotSent(of(ErrorCodes.UPSTREAM_NETWORK, { cause: 'ECONNRESET' }))).toBe(false);
    expect(isNotSent(Object.assign(new Error('x'), { details: { notSent: true } }))).toBe(false);
  });

  it('httpStatusOf: the number a GatewayError carries, else undefined', () => {
    expect(httpStatusOf(of(ErrorCodes.UPSTREAM_HTTP, { status: 429 }))).toBe(429);
    expect(httpStatusOf(of(ErrorCodes.UPSTREAM_HTTP, { status: '429' }))).toBeUndefined();
    expect(httpStatusOf(of(ErrorCodes.UPSTREAM_NETWORK))).toBeUndefined();
    expect(httpStatusOf({ details: { status: 500 } })).toBeUndefined();
  });

  it('a false answer does not narrow a GatewayError away (the else branch still knows its code)', () => {
    const err: unknown = of(ErrorCodes.BUFFER);
    if (!isGatewayError(err)) throw new GatewayError(ErrorCodes.INTERNAL, 'not a GatewayError');
    // Compiles only if the predicates narrow to their own code, not to GatewayError as a whole.
    const code: string = isQuotaRefusal(err) ? 'quota' : err.code;
    expect(code).toBe(ErrorCodes.BUFFER);
  });
});
