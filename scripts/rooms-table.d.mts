// Types of rooms-table.mjs for the TypeScript tests that import it.

/** The rules, relative to the repository root. */
export const ROOMS_PATH: string;
/** The document whose room table is generated, relative to the repository root. */
export const DOC_PATH: string;

/** One room of src/: a folder, or a file at the top of src/. */
export interface Room {
  room: string;
  /** What lives there, one line of the table. */
  holds: string;
  /** The rooms it may import, or `above`: every room listed before it. */
  mayImport: string[] | 'above';
}

/** The rooms in order, from the floor up; throws on an entry that is not a room. */
export function readRooms(text: string): Room[];
/** Room → the rooms it may import. */
export function allowedImports(rooms: readonly Room[]): Map<string, Set<string>>;
/** The markdown table, markers included. */
export function roomsTable(rooms: readonly Room[]): string;
/** `doc` with its room table replaced by the one generated from `rooms`. */
export function withRoomsTable(doc: string, rooms: readonly Room[]): string;
