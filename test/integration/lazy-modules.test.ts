import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';

// The compiled app (npm run build): which packages its modules load before any part starts.
const APP = pathToFileURL(join(PACKAGE_ROOT, 'dist/src/app.js')).href;

/** The packages loaded once the app's module (and everything it imports statically) has loaded. */
function packagesLoadedBy(url: string): string[] {
  const script = `
    import { createRequire } from 'node:module';
    await import(${JSON.stringify(url)});
    const names = Object.keys(createRequire(import.meta.url).cache)
      .map((k) => /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(k)?.[1])
      .filter(Boolean);
    process.stdout.write(JSON.stringify([...new Set(names)]));
  `;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
  });
  return JSON.parse(out) as string[];
}

describe("the app's modules", () => {
  it('load neither the HTTP server (fastify) nor the upstream HTTP client (undici)', () => {
    const loaded = packagesLoadedBy(APP);
    // The probe sees what the app loads: the buffer's driver is loaded by every start.
    expect(loaded).toContain('better-sqlite3');
    expect(loaded).not.toContain('fastify');
    expect(loaded).not.toContain('undici');
  });
});
