// The room table of docs/architecture.md, generated from docs/rooms.json (the rule the import
// test holds src/ to). `node scripts/rooms-table.mjs` (npm run docs:rooms) rewrites the table between
// the `rooms:start` and `rooms:end` markers; test/unit/architecture.test.ts fails when it is stale.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The rules and the document, relative to the repository root. */
export const ROOMS_PATH = 'docs/rooms.json';
export const DOC_PATH = 'docs/architecture.md';

const START = '<!-- rooms:start -->';
const END = '<!-- rooms:end -->';

/** The rooms in order, from the floor up; throws on an entry that is not a room. */
export function readRooms(text) {
  const { rooms } = JSON.parse(text);
  for (const r of rooms) {
    const ok =
      typeof r.room === 'string' &&
      /^[a-z0-9-]+$/.test(r.room) &&
      typeof r.holds === 'string' &&
      (r.mayImport === 'above' ||
        (Array.isArray(r.mayImport) && r.mayImport.every((m) => typeof m === 'string')));
    if (!ok) throw new TypeError(`${ROOMS_PATH}: not a room: ${JSON.stringify(r)}`);
  }
  return rooms;
}

/** Room → the rooms it may import ("above": every room listed before it). */
export function allowedImports(rooms) {
  const allowed = new Map();
  rooms.forEach((r, i) => {
    const above = rooms.slice(0, i).map((x) => x.room);
    allowed.set(r.room, new Set(r.mayImport === 'above' ? above : r.mayImport));
  });
  return allowed;
}

/** The markdown table, markers included. */
export function roomsTable(rooms) {
  const may = (m) =>
    m === 'above' ? 'every room above' : m.length === 0 ? '—' : m.map((x) => `\`${x}\``).join(', ');
  return [
    START,
    '| room | what lives there | may import |',
    '|---|---|---|',
    ...rooms.map((r) => `| \`${r.room}\` | ${r.holds} | ${may(r.mayImport)} |`),
    END,
  ].join('\n');
}

/** `doc` with its room table replaced by the one generated from `rooms`. */
export function withRoomsTable(doc, rooms) {
  const from = doc.indexOf(START);
  const to = doc.indexOf(END);
  if (from < 0 || to < from) throw new Error(`${DOC_PATH}: no ${START} … ${END} section`);
  return doc.slice(0, from) + roomsTable(rooms) + doc.slice(to + END.length);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = join(fileURLToPath(import.meta.url), '..', '..');
  const rooms = readRooms(readFileSync(join(root, ROOMS_PATH), 'utf8'));
  const doc = join(root, DOC_PATH);
  writeFileSync(doc, withRoomsTable(readFileSync(doc, 'utf8'), rooms));
}
