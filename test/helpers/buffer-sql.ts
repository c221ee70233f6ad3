import type Database from 'better-sqlite3';
import type { BufferStore } from '../../src/buffer/store.js';

/**
 * The store's own SQLite connection, for tests that set up or inspect rows the store has no
 * method for, or that set a per-connection limit (`max_page_count` to fill the disk,
 * `synchronous`). Tests only: in `src/`, nothing outside `src/buffer/` runs SQL, and the store
 * hands its connection to nobody, so this reads its private field (the store must be open).
 */
export function sqlOf(store: BufferStore): Database.Database {
  const db = (store as unknown as { connection: Database.Database | undefined }).connection;
  if (!db) throw new Error('sqlOf: the store is not open');
  return db;
}
