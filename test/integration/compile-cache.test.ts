import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';

const MAIN = join(PACKAGE_ROOT, 'dist/src/main.js');

/** Every file below `dir`, as paths relative to it. */
function filesBelow(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1));
}

describe('the compile cache', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it("is written into the unit's cache directory ($CACHE_DIRECTORY) by a command's run", () => {
    const cache = mkdtempSync(join(tmpdir(), 'sg-compile-cache-'));
    dirs.push(cache);
    const env = { PATH: process.env.PATH ?? '', CACHE_DIRECTORY: cache };
    const out = execFileSync(process.execPath, [MAIN, '--version'], { env, encoding: 'utf8' });
    expect(out).toMatch(/^scan-gateway /);
    const files = filesBelow(cache);
    expect(files.length).toBeGreaterThan(0);
    expect(files.every((f) => f.startsWith('compile-cache/'))).toBe(true);
  });

  it('is not written when the runtime is told not to (NODE_DISABLE_COMPILE_CACHE=1)', () => {
    const cache = mkdtempSync(join(tmpdir(), 'sg-compile-cache-'));
    dirs.push(cache);
    const env = {
      PATH: process.env.PATH ?? '',
      CACHE_DIRECTORY: cache,
      NODE_DISABLE_COMPILE_CACHE: '1',
    };
    execFileSync(process.execPath, [MAIN, '--version'], { env, encoding: 'utf8' });
    expect(filesBelow(cache)).toEqual([]);
  });
});
