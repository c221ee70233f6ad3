import { ErrorCodes, GatewayError } from '../errors.js';
import type Database from 'better-sqlite3';

/**
 * The SQLite connection of an open buffer, for the buffer's own modules (retention, replay):
 * `BufferStore` keeps it private so that no other room runs SQL. Nothing
 * outside `src/buffer/` imports this module.
 */
const connections = new WeakMap<object, Database.Database>();

/** Called by the store's constructor. */
export function attachConnection(owner: object, db: Database.Database): void {
  connections.set(owner, db);
}

/** @throws Error when `owner` has no connection (not a store, or one that failed to open). */
export function connectionOf(owner: object): Database.Database {
  const db = connections.get(owner);
  if (!db) throw new GatewayError(ErrorCodes.INTERNAL, 'not an open buffer');
  return db;
}
