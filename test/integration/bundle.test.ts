import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';

// The build's bundle (scripts/bundle.mjs): dist/src/main.js and its chunks in dist/src/bundle/,
// with the packages each chunk holds in bundle/packages.json.
const MAIN = join(PACKAGE_ROOT, 'dist/src/main.js');
const CHUNKS = join(PACKAGE_ROOT, 'dist/src/bundle');

const chunkPackages = (): Record<string, string[]> =>
  JSON.parse(readFileSync(join(CHUNKS, 'packages.json'), 'utf8')) as Record<string, string[]>;

/** The chunks a file imports statically (`from "./x.js"`, `import "./x.js"`), transitively. */
function staticClosure(file: string, seen = new Set<string>()): Set<string> {
  const text = readFileSync(file, 'utf8');
  for (const m of text.matchAll(/(?:from|import)\s*"\.\/(?:bundle\/)?([^"]+\.js)"/g)) {
    const name = m[1]!;
    if (seen.has(name)) continue;
    seen.add(name);
    staticClosure(join(CHUNKS, name), seen);
  }
  return seen;
}

describe('the bundled entry point', () => {
  it('runs the program: --version names the runtime', () => {
    const out = execFileSync(process.execPath, [MAIN, '--version'], { encoding: 'utf8' });
    expect(out).toMatch(/^scan-gateway \d+\.\d+\.\d+ \(Node\.js v\d+/);
  });

  it('is the bundle, with its shebang first', () => {
    const text = readFileSync(MAIN, 'utf8');
    expect(text.startsWith('#!/usr/bin/env node\n')).toBe(true);
    expect(text).not.toContain("import('./main/program.js')");
    expect(Object.keys(chunkPackages()).length).toBeGreaterThan(10);
  });

  it('keeps what loads on use out of the first load: the HTTP server, the inputs, the configuration', () => {
    // Before the runtime check the entry point may load nothing that could crash an unsupported
    // runtime, and a one-serial site must not load fastify before its port opens.
    const first = staticClosure(MAIN);
    const packages = chunkPackages();
    const loadedFirst = [...first].flatMap((c) => packages[c] ?? []);
    expect(loadedFirst).toEqual([]);
    const holding = (name: string) =>
      Object.entries(packages)
        .filter(([, list]) => list.includes(name))
        .map(([chunk]) => chunk);
    for (const name of ['fastify', 'undici', 'chokidar', 'mqtt', 'serialport', 'zod']) {
      expect(holding(name).length, name).toBeGreaterThan(0);
      for (const chunk of holding(name))
        expect(first.has(chunk), `${name} in ${chunk}`).toBe(false);
    }
  });

  it.each(['lookup-worker.js', 'batch-worker.js'])(
    'holds the thread script %s beside the chunk that starts it',
    (script) => {
      const starter = Object.keys(chunkPackages())
        .filter((c) => c !== 'main.js')
        .find((c) => readFileSync(join(CHUNKS, c), 'utf8').includes(`./${script}`));
      expect(starter).toBeDefined();
      const worker = readFileSync(join(CHUNKS, script), 'utf8');
      expect(worker).toContain('parentPort');
    },
  );

  it('leaves native addons and the packages that find files beside them in node_modules', () => {
    const all = new Set(Object.values(chunkPackages()).flat());
    for (const name of [
      'better-sqlite3',
      '@serialport/bindings-cpp',
      '@platformatic/wasm-utils',
      '@scan-gateway/sandbox',
      'pino-pretty',
      'ssh2',
    ])
      expect(all.has(name), name).toBe(false);
  });

  it('imports node:http in no chunk as an ES module, whose namespace loads a second undici', () => {
    const chunks = [...Object.keys(chunkPackages()).filter((c) => c !== 'main.js'), '../main.js'];
    const importers = chunks.filter((c) =>
      /from\s*["']node:http["']/.test(readFileSync(join(CHUNKS, c), 'utf8')),
    );
    expect(importers).toEqual([]);
  });

  it('holds undici without its look at the global Headers, which loads a second undici', () => {
    const [chunk] = Object.entries(chunkPackages()).find(([, p]) => p.includes('undici')) ?? [];
    expect(chunk).toBeDefined();
    const text = readFileSync(join(CHUNKS, chunk!), 'utf8');
    expect(text).toContain('brandCheckMultiple([Headers])');
    expect(text).not.toMatch(/\[Headers,\s*globalThis\.Headers\]/);
  });
});
