import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import {
  RELAUNCHED_ENV,
  SUPPORTED_RUNTIMES,
  compileCacheDirectory,
  missingDaemonSettings,
  unsupportedRuntimeLine,
} from '../../src/main/runtime.js';

describe('the runtime guard', () => {
  it('supports exactly the lines of engines.node in package.json, from the same lowest release', () => {
    const engines = (
      JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as {
        engines: { node: string };
      }
    ).engines.node;
    const ranges = engines.split('||').map((r) => r.trim());
    expect(ranges).toEqual(SUPPORTED_RUNTIMES.map((r) => `^${r.major}.${r.minor}.0`));
  });

  it('refuses Node.js 20, 23, 25 and 22 before 22.19, naming the version and the supported lines', () => {
    for (const v of ['20.20.2', '18.20.8', '22.18.0', '23.11.0', '25.1.0', '27.0.0']) {
      const line = unsupportedRuntimeLine(v);
      expect(line, v).toContain(`Node.js ${v} is not supported`);
      expect(line, v).toContain('22 (22.19 or later), 24 or 26');
      expect(line, v).toContain('carries its own Node.js 26');
      expect(line, v).not.toContain('\n');
    }
  });

  it('accepts each supported line', () => {
    for (const v of ['22.19.0', '22.23.3', '24.0.0', '24.21.0', '26.12.1'])
      expect(unsupportedRuntimeLine(v), v).toBeUndefined();
  });
});

describe("the daemon's runtime settings, whoever launches it", () => {
  it('adds the flags and MALLOC_ARENA_MAX a plain `node main.js run` lacks', () => {
    expect(missingDaemonSettings([], {})).toEqual({
      flags: ['--max-semi-space-size=2', '--v8-pool-size=1', '--heap-growing-percent=20'],
      env: { MALLOC_ARENA_MAX: '2' },
    });
  });

  it("adds nothing under the unit's or npm start's command line", () => {
    expect(
      missingDaemonSettings(
        ['--max-semi-space-size=2', '--v8-pool-size=1', '--heap-growing-percent=20'],
        {
          MALLOC_ARENA_MAX: '2',
        },
      ),
    ).toBeUndefined();
  });

  it("keeps a launcher's own values, given as flags or in NODE_OPTIONS", () => {
    expect(
      missingDaemonSettings(['--max-semi-space-size=8'], {
        MALLOC_ARENA_MAX: '4',
        NODE_OPTIONS: '--v8-pool-size=2 --heap-growing-percent=0',
      }),
    ).toBeUndefined();
    expect(
      missingDaemonSettings(['--v8_pool_size=3', '--heap-growing-percent=20'], {
        MALLOC_ARENA_MAX: '1',
      }),
    ).toEqual({
      flags: ['--max-semi-space-size=2'],
      env: {},
    });
  });

  it('never asks for a second re-exec', () => {
    expect(missingDaemonSettings([], { [RELAUNCHED_ENV]: '1' })).toBeUndefined();
  });

  it("keeps the compile cache in the unit's cache directory, else where the runtime would", () => {
    expect(compileCacheDirectory({ CACHE_DIRECTORY: '/var/cache/scan-gateway' })).toBe(
      '/var/cache/scan-gateway/compile-cache',
    );
    // systemd joins several CacheDirectory= entries with colons: the first is the gateway's.
    expect(compileCacheDirectory({ CACHE_DIRECTORY: '/var/cache/a:/var/cache/b' })).toBe(
      '/var/cache/a/compile-cache',
    );
    expect(
      compileCacheDirectory({ CACHE_DIRECTORY: '/var/cache/a', NODE_COMPILE_CACHE: '/srv/cc' }),
    ).toBe('/srv/cc');
    expect(compileCacheDirectory({})).toBeUndefined();
  });
});
