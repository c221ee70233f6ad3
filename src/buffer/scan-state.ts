/**
 * SQL fragments for a scan's state (docs/delivery.md, "The buffer"). The states are pending,
 * batched, delivered, failed and held; since migration 13 a delivered scan's row may still say
 * `batched`: a finished batch (`batches.state = 'done'`) does not rewrite its scans, so a
 * `batched` row of a done batch is delivered. These fragments are the only places that rule is
 * written in queries; Batches.finishBatch (batches.ts) is where it is made.
 */

/**
 * The condition of the partial index scans_state (migration 13): pending, failed and held scans.
 * SQLite uses a partial index only for a query whose WHERE clause contains this very term, so
 * every query of scans by one of those states adds it. `alias` is the table's alias with its dot
 * (`'s.'`), or nothing.
 */
export const indexedState = (alias = ''): string => `${alias}state NOT IN ('delivered', 'batched')`;

/**
 * The scan's state as people read it: `delivered` for a `batched` row whose batch is done, else
 * the row's. One primary-key lookup of its batch per batched row. `alias` as in {@link indexedState}.
 */
export const scanStateSql = (alias = ''): string =>
  `CASE WHEN ${alias}state = 'batched' AND (SELECT state FROM batches WHERE id = ${alias}batch_id) = 'done' THEN 'delivered' ELSE ${alias}state END`;

/**
 * Scans in flight, `batched` in a batch not yet done: found by batch (index scans_batch) from the
 * open batches, a handful, never by walking the delivered scans. `alias` as in {@link indexedState}.
 */
export const inFlight = (alias = ''): string =>
  `${alias}batch_id IN (SELECT id FROM batches WHERE state <> 'done') AND ${alias}state = 'batched'`;
