import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';

/**
 * The import direction of docs/architecture.md: its room table is the rule. Every relative import
 * in src/ (static and dynamic) from one room into another must be listed as allowed.
 */
const SRC = join(PACKAGE_ROOT, 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** `buffer/store.ts` → `buffer`; a file at the top of src/ is a room of its own (`errors.ts` → `errors`). */
function roomOf(pathInSrc: string): string {
  const [first, ...rest] = pathInSrc.split('/');
  return rest.length > 0 ? first! : first!.replace(/\.(ts|js)$/, '');
}

/** The table between the `rooms:start` and `rooms:end` markers: room → rooms it may import. */
function documentedRooms(): Map<string, Set<string> | 'above'> {
  const doc = readFileSync(join(PACKAGE_ROOT, 'docs', 'architecture.md'), 'utf8');
  const table = doc.slice(doc.indexOf('<!-- rooms:start -->'), doc.indexOf('<!-- rooms:end -->'));
  const rooms = new Map<string, Set<string> | 'above'>();
  const order: string[] = [];
  for (const line of table.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    const room = /^`([a-z0-9-]+)`$/.exec(cells[1] ?? '')?.[1];
    if (!room) continue;
    const may = cells[3] ?? '';
    order.push(room);
    if (may.startsWith('every room above')) {
      // Every room listed before it, plus the ones it names after "and".
      const named = [...may.matchAll(/`([a-z0-9-]+)`/g)].map((m) => m[1]!);
      rooms.set(room, new Set([...order.slice(0, -1), ...named]));
    } else {
      rooms.set(room, new Set([...may.matchAll(/`([a-z0-9-]+)`/g)].map((m) => m[1]!)));
    }
  }
  return rooms;
}

function imports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g)].map((m) => m[1]!);
}

describe('rooms and the direction of imports (docs/architecture.md)', () => {
  const rooms = documentedRooms();

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
        if (allowed === undefined || allowed === 'above' || !allowed.has(to)) wrong.push(`${from} imports ${target} (${room} → ${to})`);
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
    expect(intake !== 'above' && ['inputs', 'mapping', 'buffer'].every((r) => intake?.has(r))).toBe(true);
    const order = [...rooms.keys()];
    expect(order.indexOf('intake')).toBeGreaterThan(order.indexOf('buffer'));
  });

  it('forms no loop: each room imports only rooms listed before it', () => {
    const order = [...rooms.keys()];
    const late: string[] = [];
    for (const [room, allowed] of rooms) {
      if (allowed === 'above') continue;
      for (const to of allowed) if (order.indexOf(to) >= order.indexOf(room)) late.push(`${room} → ${to}`);
    }
    expect(late).toEqual([]);
  });
});
