import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import {
  allowedImports,
  DOC_PATH,
  readRooms,
  ROOMS_PATH,
  withRoomsTable,
} from '../../scripts/rooms-table.mjs';

/**
 * The import direction of docs/rooms.json, the rule docs/architecture.md's room table is generated
 * from. Every relative import
 * in src/ (static and dynamic) from one room into another must be listed as allowed. Its package
 * table too: src/ loads the sandbox package only by `import()` (from `app` and `cli`), and no
 * workspace package reaches into src/ or into another package's files.
 */
const SRC = join(PACKAGE_ROOT, 'src');
const PACKAGES = join(PACKAGE_ROOT, 'packages');
const SANDBOX = '@scan-gateway/sandbox';
/** The rooms that may start the sandbox: `app` (`sandbox.enabled`) and `cli` (`scan-gateway sandbox`). */
const SANDBOX_LOADERS = new Set(['app', 'cli']);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sourceFiles(join(dir, e.name))
      : e.name.endsWith('.ts')
        ? [join(dir, e.name)]
        : [],
  );
}

/** `buffer/store.ts` → `buffer`; a file at the top of src/ is a room of its own (`errors.ts` → `errors`). */
function roomOf(pathInSrc: string): string {
  const [first, ...rest] = pathInSrc.split('/');
  return rest.length > 0 ? first! : first!.replace(/\.(ts|js)$/, '');
}

/** docs/rooms.json, the rule: room → rooms it may import. */
function documentedRooms(): Map<string, Set<string> | 'above'> {
  return new Map(allowedImports(readRooms(readFileSync(join(PACKAGE_ROOT, ROOMS_PATH), 'utf8'))));
}

function imports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g)].map((m) => m[1]!);
}

/** How `text` imports the sandbox package: `static` (a value import or re-export), `type` (erased) or `dynamic` (`import()`). */
function sandboxImports(text: string): ('static' | 'type' | 'dynamic')[] {
  const specifier = `['"]${SANDBOX}(?:/[^'"]*)?['"]`;
  return [
    ...[...text.matchAll(new RegExp(`\\bimport\\s*\\(\\s*${specifier}`, 'g'))].map(
      () => 'dynamic' as const,
    ),
    ...[
      ...text.matchAll(
        new RegExp(`^\\s*(import|export)\\s+(type\\s+)?[^;]*?\\bfrom\\s*${specifier}`, 'gm'),
      ),
    ].map((m) => (m[2] ? ('type' as const) : ('static' as const))),
  ];
}

/** Every module specifier of `text`: static imports, re-exports and `import()`. */
function specifiers(text: string): string[] {
  return [...text.matchAll(/(?:\bfrom|\bimport)\s*\(?\s*['"]([^'"]+)['"]/g)].map((m) => m[1]!);
}

describe('rooms and the direction of imports (docs/rooms.json)', () => {
  const rooms = documentedRooms();
  const doc = readFileSync(join(PACKAGE_ROOT, DOC_PATH), 'utf8');

  it("docs/architecture.md's room table is the one generated from docs/rooms.json (npm run docs:rooms)", () => {
    const rules = readRooms(readFileSync(join(PACKAGE_ROOT, ROOMS_PATH), 'utf8'));
    expect(doc).toBe(withRoomsTable(doc, rules));
  });

  it("the room table's cells fit on a screen: at most 200 characters each", () => {
    const rules = readRooms(readFileSync(join(PACKAGE_ROOT, ROOMS_PATH), 'utf8'));
    const long = rules.filter((r) => r.holds.length > 200).map((r) => r.room);
    expect(long).toEqual([]);
  });

  it('the diagram of the rooms on one screen shows every room', () => {
    const section = doc.slice(doc.indexOf('## The rooms on one screen'));
    const open = section.indexOf('```');
    const diagram = section.slice(open + 3, section.indexOf('```', open + 3));
    const missing = [...rooms.keys()].filter(
      (room) => !new RegExp(`(^|[^a-z-])${room}([^a-z-]|$)`, 'm').test(diagram),
    );
    expect(missing).toEqual([]);
    expect(diagram.length).toBeGreaterThan(200);
  });

  it('documents every room of src/, and only those', () => {
    const actual = new Set(sourceFiles(SRC).map((f) => roomOf(relative(SRC, f))));
    expect([...rooms.keys()].sort()).toEqual([...actual].sort());
  });

  it('has no import against the documented direction', () => {
    const wrong: string[] = [];
    for (const file of sourceFiles(SRC)) {
      const from = relative(SRC, file);
      const room = roomOf(from);
      for (const spec of imports(file)) {
        const target = normalize(join(dirname(from), spec));
        const to = roomOf(target);
        if (to === room) continue;
        const allowed = rooms.get(room);
        if (allowed === undefined || allowed === 'above' || !allowed.has(to))
          wrong.push(`${from} imports ${target} (${room} → ${to})`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('catches an import against the direction (the check itself can fail)', () => {
    const allowed = rooms.get('buffer');
    expect(allowed !== 'above' && allowed?.has('delivery')).toBe(false);
    expect(allowed !== 'above' && allowed?.has('errors')).toBe(true);
    expect(roomOf('buffer/store.ts')).toBe('buffer');
    expect(roomOf('errors.js')).toBe('errors');
  });

  it('keeps the buffer below the read path: buffer imports neither mapping nor inputs, intake sits between them', () => {
    // The buffer stores what it is given in shapes of its own (src/buffer/rows.ts); intake adapts
    // the inputs' reads and the mapping's scans to them. Types count as imports here too.
    const buffer = rooms.get('buffer');
    expect(buffer !== 'above' && buffer?.has('mapping')).toBe(false);
    expect(buffer !== 'above' && buffer?.has('inputs')).toBe(false);
    const intake = rooms.get('intake');
    expect(intake !== 'above' && ['inputs', 'mapping', 'buffer'].every((r) => intake?.has(r))).toBe(
      true,
    );
    const order = [...rooms.keys()];
    expect(order.indexOf('intake')).toBeGreaterThan(order.indexOf('buffer'));
  });

  it('keeps the questions apart from the outbox: queries reads the buffer, the outbox never asks queries', () => {
    // buffer/ writes; queries/ answers on a read-only connection of its own (test/unit/owners.test.ts).
    const order = [...rooms.keys()];
    expect(order.indexOf('queries')).toBeGreaterThan(order.indexOf('buffer'));
    const queries = rooms.get('queries');
    expect(queries !== 'above' && queries?.has('buffer')).toBe(true);
    for (const outbox of ['buffer', 'intake', 'delivery']) {
      const allowed = rooms.get(outbox);
      expect(allowed !== 'above' && allowed?.has('queries'), outbox).toBe(false);
    }
  });

  it('forms no loop: each room imports only rooms listed before it', () => {
    const order = [...rooms.keys()];
    const late: string[] = [];
    for (const [room, allowed] of rooms) {
      if (allowed === 'above') continue;
      for (const to of allowed)
        if (order.indexOf(to) >= order.indexOf(room)) late.push(`${room} → ${to}`);
    }
    expect(late).toEqual([]);
  });

  it('loads the sandbox package only by import(), and only from app and cli', () => {
    const wrong: string[] = [];
    for (const file of sourceFiles(SRC)) {
      const from = relative(SRC, file);
      for (const kind of sandboxImports(readFileSync(file, 'utf8'))) {
        if (kind === 'static' || (kind === 'dynamic' && !SANDBOX_LOADERS.has(roomOf(from))))
          wrong.push(`${from}: ${kind} import of ${SANDBOX}`);
      }
    }
    expect(wrong).toEqual([]);
    // The daemon does load it where it runs one (else the rule above holds for nothing).
    expect(sandboxImports(readFileSync(join(SRC, 'app', 'sandbox-part.ts'), 'utf8'))).toContain(
      'dynamic',
    );
    // `scan-gateway sandbox` loads it through the same door as the app (importSandbox, a clear error when it is not installed).
    expect(readFileSync(join(SRC, 'cli', 'sandbox-command.ts'), 'utf8')).toMatch(
      /\bawait importSandbox\(\)/,
    );
  });

  it('tells a static import of the sandbox from a type import and import() (the check itself can fail)', () => {
    expect(sandboxImports("import { startSandbox } from '@scan-gateway/sandbox';")).toEqual([
      'static',
    ]);
    expect(sandboxImports("export { KafkaBroker } from '@scan-gateway/sandbox/kafka';")).toEqual([
      'static',
    ]);
    expect(sandboxImports("import type { RunningSandbox } from '@scan-gateway/sandbox';")).toEqual([
      'type',
    ]);
    expect(
      sandboxImports("const { startSandbox } = await import('@scan-gateway/sandbox');"),
    ).toEqual(['dynamic']);
    expect(sandboxImports("import { x } from '@scan-gateway/contract';")).toEqual([]);
  });

  it("keeps each workspace package to itself: no import of src/, of another package's files, or of the sandbox from the contract or the service kit", () => {
    const mayImport: Record<string, string[]> = {
      contract: [],
      'service-kit': [],
      sandbox: ['@scan-gateway/contract', '@scan-gateway/service-kit'],
    };
    const packages = readdirSync(PACKAGES, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
    expect(packages.sort()).toEqual(Object.keys(mayImport).sort());
    const wrong: string[] = [];
    for (const name of packages) {
      const root = join(PACKAGES, name, 'src');
      for (const file of sourceFiles(root)) {
        const from = relative(PACKAGES, file);
        for (const spec of specifiers(readFileSync(file, 'utf8'))) {
          if (spec.startsWith('.')) {
            if (relative(root, join(dirname(file), spec)).startsWith('..'))
              wrong.push(`${from} imports ${spec}, outside packages/${name}/src`);
          } else if (spec.startsWith('@scan-gateway/')) {
            const target = spec.split('/').slice(0, 2).join('/');
            if (!mayImport[name]!.includes(target)) wrong.push(`${from} imports ${spec}`);
          }
        }
      }
    }
    expect(wrong).toEqual([]);
  });
});
