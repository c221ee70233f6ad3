import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ErrorCodes, GatewayError } from './errors.js';

/**
 * The folder holding scan-gateway's package.json, found by walking up from this module, so the
 * same code works from `src/` under vitest and from `dist/src/` in the shipped daemon.
 */
export const PACKAGE_ROOT: string = findPackageRoot(dirname(fileURLToPath(import.meta.url)));

/** The package version from package.json. */
export const VERSION: string = (
  JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }
).version;

function findPackageRoot(start: string): string {
  let dir = start;
  for (;;) {
    const candidate = join(dir, 'package.json');
    if (existsSync(candidate)) {
      const pkg = JSON.parse(readFileSync(candidate, 'utf8')) as { name?: string };
      if (pkg.name === 'scan-gateway') return dir;
    }
    const parent = dirname(dir);
    if (parent === dir)
      throw new GatewayError(
        ErrorCodes.INTERNAL,
        `scan-gateway package.json not found above ${start}`,
      );
    dir = parent;
  }
}

/**
 * The demo client's secret (config/demo-client-secret): config/demo.yaml's `clientSecretFile`, and
 * the secret of the sandbox's default client when the daemon runs it (`npm start`, `scan-gateway sandbox`).
 */
export const DEMO_CLIENT_SECRET_FILE: string = join(PACKAGE_ROOT, 'config', 'demo-client-secret');

/**
 * Names of the performance marks of a start (src/main.ts, the run command), which the start-up
 * line reports as the start's profile: the entry module ran, the configuration is being read,
 * the parts are being built.
 */
export const MARK_MAIN = 'scan-gateway:main';
export const MARK_CONFIG = 'scan-gateway:config';
export const MARK_BUILD = 'scan-gateway:build';

/**
 * A worker thread's built script: `beside` (the script next to the module that starts the thread,
 * in dist/ and in the bundle) when it exists, else `built` under the package root (under vitest the
 * starting module is its TypeScript source, which a thread cannot load; `npm test` builds first).
 *
 * @param beside e.g. `new URL('./lookup-worker.js', import.meta.url)`.
 * @param built the script's path from the package root, e.g. `dist/src/queries/lookup-worker.js`.
 * @throws GatewayError `SCANGW_E_INTERNAL` when neither exists ("run npm run build").
 */
export function threadScript(beside: URL, built: string): URL {
  if (existsSync(beside)) return beside;
  const fallback = pathToFileURL(join(PACKAGE_ROOT, built));
  if (existsSync(fallback)) return fallback;
  throw new GatewayError(
    ErrorCodes.INTERNAL,
    `${fileURLToPath(beside)} is missing, and so is ${built} (run npm run build)`,
  );
}
