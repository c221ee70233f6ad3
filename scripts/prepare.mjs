// `npm ci` and `npm install` run this (the `prepare` script). With the development dependencies it
// builds dist/ from the sources. Without them (`npm ci --omit=dev` of a tree built elsewhere, as
// a source install on a gateway does) there is no compiler, and the dist/ already there is used.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let compiler = true;
try {
  require.resolve('typescript');
} catch {
  compiler = false;
}
if (compiler) {
  const npm = process.env.npm_execpath;
  const r = npm
    ? spawnSync(process.execPath, [npm, 'run', 'build'], { stdio: 'inherit' })
    : spawnSync('npm', ['run', 'build'], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
} else if (existsSync('dist/src/main.js')) {
  console.log(
    'prepare: no TypeScript compiler (--omit=dev): the gateway runs the dist/ built before',
  );
} else {
  console.error(
    'prepare: dist/ is not built and the TypeScript compiler is not installed: run `npm ci` (with ' +
      'the development dependencies) to build, or copy a built dist/ before `npm ci --omit=dev`',
  );
  process.exit(1);
}
