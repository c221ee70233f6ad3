import type Database from 'better-sqlite3';
import type { BufferStore } from '../../src/buffer/store.js';
import { connectionOf } from '../../src/buffer/connection.js';

/**
 * The store's own SQLite connection, for tests that set up or inspect rows the store has no
 * method for, or that set a per-connection limit (`max_page_count` to fill the disk,
 * `synchronous`). Tests only: in `src/`, nothing outside `src/buffer/` runs SQL.
 */
export function sqlOf(store: BufferStore): Database.Database {
  return connectionOf(store);
}
