import type { BufferStore } from '../../src/buffer/store.js';
import { BufferQueries } from '../../src/queries/queries.js';
import type { BufferReports } from '../../src/queries/reports.js';

const opened = new WeakMap<BufferStore, BufferQueries>();

/**
 * The questions to `store`'s buffer as the daemon asks them (src/queries/): on a read-only
 * connection of their own (the store's own one for a buffer in memory), opened at the first call
 * for this store and kept. The store must be open. A reader (src/queries/reader.ts) is read-only
 * already: its own reports.
 */
export function queriesOf(store: BufferStore | { readonly reports: BufferReports }): BufferReports {
  if (!('memoryConnection' in store)) return store.reports;
  let queries = opened.get(store);
  if (queries === undefined) {
    queries = new BufferQueries(store);
    opened.set(store, queries);
  }
  queries.open();
  return queries.reports;
}
