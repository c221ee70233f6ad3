// `npm run build` runs this after the TypeScript compiler. It replaces dist/src/main.js, the
// daemon's and every command's entry point, with a bundle of the compiled gateway and the packages
// it imports (esbuild): the start then reads and links about 100 files instead of about 1,400, and
// the compile cache holds one entry per chunk. On Node.js 26, with the changes that came with it,
// start to ready went from 734 to 402 ms and the start's CPU from 973 to 488 ms (docs/performance.md,
// "Start-up"). What loads on use stays so: each `import()` of the sources is a chunk of its own
// (dist/src/bundle/), loaded when the configuration needs it; undici is one (src/http-client.ts).
//
// Everything else in dist/src stays as the compiler wrote it: the tests and the tools that import a
// module (the lookup worker, the error catalogue) use those, and every test that starts the daemon
// as a process starts this bundle, so the suite runs what ships.
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { basename, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { build } from 'esbuild';

const dist = 'dist/src';
const entry = join(dist, 'main.js');
const staging = 'dist/.bundle';

// Left outside the bundle, loaded from node_modules as before:
const external = [
  // native addons, found by their packages relative to their own folders;
  'better-sqlite3',
  '@serialport/bindings-cpp',
  'unix-dgram',
  'ssh2',
  'ssh2-sftp-client',
  'cpu-features',
  '@node-rs/crc32',
  // packages that read files or start workers by a path relative to their own module: the Kafka
  // client's WebAssembly (wasm-utils reads `../dist/native.wasm`; the client itself is in, and
  // finds wasm-utils and its optional native CRC in node_modules from its chunk), the sandbox's
  // walk up to the demo client's secret, pino-pretty (loaded by createRequire for a terminal).
  // pino itself is in: its transports (thread-stream's worker file) are not used.
  '@platformatic/wasm-utils',
  '@scan-gateway/sandbox',
  'pino-pretty',
];

// Builds in one tree may run at once (the package tests build the .deb twice side by side): the
// bundling is done under a lock, and a build that finds the entry point already bundled after its
// own compile (by another build of the same sources, in between) leaves it as it is.
const lock = 'dist/.bundle.lock';
const deadline = Date.now() + 300_000;
for (;;) {
  try {
    mkdirSync(lock);
    writeFileSync(join(lock, 'pid'), String(process.pid));
    break;
  } catch (err) {
    if (err.code !== 'EEXIST') throw err;
    let holder = NaN;
    try {
      holder = Number(readFileSync(join(lock, 'pid'), 'utf8'));
    } catch {
      // Being written or removed: look again.
    }
    let alive = true;
    if (Number.isInteger(holder) && holder > 0) {
      try {
        process.kill(holder, 0);
      } catch {
        alive = false;
      }
    }
    if (!alive) rmSync(lock, { recursive: true, force: true });
    else if (Date.now() > deadline) {
      console.error(`bundle: ${lock} is held by process ${holder}; remove it if no build runs`);
      process.exit(1);
    } else await sleep(100);
  }
}
process.on('exit', () => rmSync(lock, { recursive: true, force: true }));

const compiled = existsSync(entry) ? readFileSync(entry, 'utf8') : '';
if (!compiled.includes("import('./main/program.js')")) {
  if (compiled.includes('./bundle/') && existsSync(join(dist, 'bundle', 'packages.json'))) {
    console.log(`bundle: ${entry} was bundled by a build beside this one`);
    process.exit(0);
  }
  console.error(`bundle: ${entry} is not the compiler's output (not built): run \`npm run build\``);
  process.exit(1);
}

// Edits of a package's source as it is bundled: [package file, text, replacement, why]. A text not
// found (the package changed) stops the build, so an edit is never lost without a word.
const edits = [
  [
    'node_modules/undici/lib/web/cookies/index.js',
    '[Headers, globalThis.Headers].filter(Boolean)',
    '[Headers]',
    // Reading the global `Headers` makes Node.js load its own copy of undici (about 15 ms of the
    // start and its heap) for a brand check of cookie helpers the gateway does not call.
    "Node.js's own undici loaded at start",
  ],
];
const editPlugin = {
  name: 'edits',
  setup(b) {
    // One loader per file with all its edits: esbuild runs only the first loader that matches a
    // file, so a second loader of the same file would drop its edits without a word.
    for (const file of new Set(edits.map(([f]) => f))) {
      const filter = new RegExp(`${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}$`);
      b.onLoad({ filter }, (args) => {
        let source = readFileSync(args.path, 'utf8');
        for (const [, text, replacement, why] of edits.filter(([f]) => f === file)) {
          if (!source.includes(text))
            throw new Error(
              `${file} no longer holds \`${text}\`: look again at this edit (it avoids ${why})`,
            );
          source = source.replace(text, replacement);
        }
        return { contents: source, loader: 'js' };
      });
    }
  },
};

rmSync(staging, { recursive: true, force: true });
const result = await build({
  plugins: [editPlugin],
  // The thread scripts too, each beside the chunk that starts it (src/queries/lookup-workers.ts and
  // src/delivery/batch-thread.ts look for their script next to themselves first).
  entryPoints: {
    main: entry,
    'bundle/lookup-worker': join(dist, 'queries', 'lookup-worker.js'),
    'bundle/batch-worker': join(dist, 'delivery', 'batch-worker.js'),
  },
  outdir: staging,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node22',
  external,
  chunkNames: 'bundle/[name]-[hash]',
  // Class and function names as written: error names, log lines and stack traces read the same.
  keepNames: true,
  // A CommonJS package's require() of a built-in or of an external package, inside an ES module.
  banner: {
    js: "import { createRequire as __sgCreateRequire } from 'node:module'; const require = __sgCreateRequire(import.meta.url);",
  },
  legalComments: 'none',
  // Smaller source text is less of V8's heap (4 MiB at idle for config/example.yaml) and less to
  // parse; the maps beside the chunks give a stack trace its sources' lines again
  // (`node --enable-source-maps`). The .deb leaves them out. Identifiers are not minified: the
  // pages ship the renderers they share with the daemon by their source text
  // (src/health/browser-script.ts), which must call each other by the names the page defines.
  sourcemap: true,
  minifyWhitespace: true,
  minifySyntax: true,
  logLevel: 'warning',
  metafile: true,
});

rmSync(join(dist, 'bundle'), { recursive: true, force: true });
renameSync(join(staging, 'bundle'), join(dist, 'bundle'));
renameSync(join(staging, 'main.js'), entry);
// The compiler's map described the file replaced; the bundle's own takes its place.
renameSync(join(staging, 'main.js.map'), `${entry}.map`);
rmSync(staging, { recursive: true, force: true });
chmodSync(entry, 0o755);

const outputs = Object.entries(result.metafile.outputs).filter(([file]) => file.endsWith('.js'));
// Which packages each chunk holds (bundle/packages.json): the start-up bench names the packages a
// configuration loads from the chunks it loads, as it does from node_modules for the others.
const packagesOf = (inputs) =>
  [
    ...new Set(
      Object.keys(inputs).flatMap((path) => {
        const m = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(path);
        return m ? [m[1]] : [];
      }),
    ),
  ].sort();
writeFileSync(
  join(dist, 'bundle', 'packages.json'),
  `${JSON.stringify(
    Object.fromEntries(outputs.map(([file, o]) => [basename(file), packagesOf(o.inputs)])),
    null,
    2,
  )}\n`,
);
const bytes = outputs.reduce((n, [, o]) => n + o.bytes, 0);
const inputs = Object.keys(result.metafile.inputs).length;
console.log(
  `bundle: ${entry} and ${outputs.length - 1} chunks in ${dist}/bundle (${(bytes / 1048576).toFixed(1)} MiB) from ${inputs} modules`,
);
