import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');

/** The npm running this suite (`npm test` and `npx` set npm_execpath), else the one on PATH. */
export function npmCli(): string {
  if (process.env.npm_execpath) return process.env.npm_execpath;
  const r = spawnSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' });
  return realpathSync(r.stdout.trim());
}

/**
 * The pinned Node.js runtimes (runtimes/package.json, from its lock) that the package and e2e
 * tests run: the bundled one the .deb carries, another supported one, and the unsupported line
 * the runtime guard refuses. Installed with `npm ci --prefix runtimes` when one is missing, so the
 * README's test command needs no step before it.
 */
export function ensureRuntimes(log: (line: string) => void = console.log): void {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'runtimes/package.json'), 'utf8')) as {
    optionalDependencies: Record<string, string>;
  };
  const wanted = Object.keys(pkg.optionalDependencies).filter((n) =>
    n.endsWith(`-${process.arch}`),
  );
  const missing = wanted.filter(
    (n) => !existsSync(join(ROOT, 'runtimes/node_modules', n, 'bin/node')),
  );
  if (missing.length === 0) return;
  log(
    `test setup: installing the pinned Node.js runtimes ${missing.join(', ')}: npm ci --prefix runtimes`,
  );
  const r = spawnSync(
    process.execPath,
    [npmCli(), 'ci', '--prefix', 'runtimes', '--no-audit', '--no-fund'],
    {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  if (r.status !== 0)
    throw new Error(
      `test setup: \`npm ci --prefix runtimes\` failed (exit ${r.status}); see above`,
    );
}
