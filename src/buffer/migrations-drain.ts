/**
 * Migrations 10 to 13 of the buffer (see migrations.ts): the drain's SQLite floor, what
 * delivering a large backlog costs in SQLite (counting triggers, partial indexes, scan bodies
 * apart, delivered by the batch's state). They change how rows are stored, not what is stored.
 * Released: never edited. New steps go at the end (the last: the high-availability columns of
 * `reads`, what each read was taken under).
 */
export const DRAIN_MIGRATIONS: readonly string[] = [
  // Drain: the two bulk moves of delivery, pending -> batched (forming a batch) and
  // batched -> delivered (a batch finished), no longer run the per-row counting triggers: the
  // store's statements that make them (Batches.writeBatch, finishBatch in batches.ts, the only places that
  // do) adjust buffer_totals and scan_state_counts once per batch, in the same transaction. The
  // triggers cost about 40% of each of these 10,000-row updates (measured 71 -> 43 ms and
  // 68 -> 42 ms per batch); every other change of state is still counted by them.
  `
  DROP TRIGGER scans_totals_update;
  CREATE TRIGGER scans_totals_update AFTER UPDATE OF state ON scans
    WHEN OLD.state <> NEW.state
      AND NOT (OLD.state = 'pending' AND NEW.state = 'batched')
      AND NOT (OLD.state = 'batched' AND NEW.state = 'delivered')
  BEGIN
    UPDATE buffer_totals SET
      pending_scans = pending_scans + (NEW.state = 'pending') - (OLD.state = 'pending'),
      pending_bytes = pending_bytes + (NEW.state = 'pending') * NEW.bytes - (OLD.state = 'pending') * OLD.bytes,
      undelivered_scans = undelivered_scans + (NEW.state IN ('pending', 'batched')) - (OLD.state IN ('pending', 'batched')),
      undelivered_bytes = undelivered_bytes + (NEW.state IN ('pending', 'batched')) * NEW.bytes - (OLD.state IN ('pending', 'batched')) * OLD.bytes
    WHERE id = 1;
  END;

  DROP TRIGGER scans_states_update;
  CREATE TRIGGER scans_states_update AFTER UPDATE OF state ON scans
    WHEN OLD.state <> NEW.state
      AND NOT (OLD.state = 'pending' AND NEW.state = 'batched')
      AND NOT (OLD.state = 'batched' AND NEW.state = 'delivered')
  BEGIN
    UPDATE scan_state_counts SET scans = scans - 1 WHERE state = OLD.state;
    INSERT INTO scan_state_counts (state, scans) SELECT NEW.state, 1 WHERE NEW.state NOT IN ('pending', 'batched')
      ON CONFLICT (state) DO UPDATE SET scans = scans + 1;
  END;
  `,

  // The drain's SQLite floor (partial indexes): the two indexes that the drain's bulk moves
  // rewrite keep only the scans their readers look up. `scans_state` leaves delivered scans out
  // (nothing looks them up by state: retention and the reports find them by batch), so
  // batched -> delivered drops an entry instead of moving it; `scans_batch` leaves scans without a
  // batch out (the pending ones), so pending -> batched adds an entry instead of moving one. Both
  // moves, each committed, measured on copies of a 1M-scan buffer over 100 batches of 10,000
  // (2 runs): 48 + 38 -> 40 + 33 ms CPU per batch. The indexes also shrink to the undelivered scans
  // and dead letters. SQLite uses a partial index only for a query whose WHERE contains the index's
  // condition (`batch_id = ?` implies `batch_id IS NOT NULL`): every query of scans by state says
  // `state <> 'delivered'` as well. Rebuilding both reads the scans once (about 1 s per million).
  `
  DROP INDEX scans_state;
  CREATE INDEX scans_state ON scans (state, id) WHERE state <> 'delivered';
  DROP INDEX scans_batch;
  CREATE INDEX scans_batch ON scans (batch_id) WHERE batch_id IS NOT NULL;
  `,

  // The drain's SQLite floor (scan bodies apart): a scan's body lives in a table of its own, so the
  // drain's two moves of every scan (pending -> batched, batched -> delivered) rewrite rows of about
  // 80 bytes instead of 350: 11 scans to a 4 KiB page became about 45, and each 10,000-scan move
  // writes about a quarter of the table pages to the log it did (the drain benchmark's SQLite floor
  // per 10,000-scan batch: 54.5 + 46.2 -> 31.6 + 24.1 ms, docs/performance.md section 3). `scans` stays what every
  // operator (and test) queries, as a view of the two tables with the columns in their old order.
  // SQLite flattens the view, so the indexes of `scan_rows` (they keep their names) serve its
  // queries, but it still looks up each row's body even where none is read: the gateway's own
  // queries name `scan_rows` and join `scan_bodies` only to read bodies (an older buffer opened
  // read-only gets both names as temporary views, BufferReader).
  // The scans are rewritten once, in this one transaction: 4.0 s per million scans, the log holds
  // about the buffer's size until the commit, and the file grows by the bodies' size (the rows shrink
  // in place). A full disk undoes it whole (open.ts says so; docs/operations.md §6).
  `
  DROP TRIGGER scans_parents_insert;
  CREATE TABLE scan_bodies (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
  INSERT INTO scan_bodies (id, body) SELECT id, body FROM scans;
  ALTER TABLE scans DROP COLUMN body;
  ALTER TABLE scans RENAME TO scan_rows;
  CREATE VIEW scans AS
    SELECT r.id, r.read_id, r.dcp_key, r.reference, r.time_utc, b.body, r.bytes, r.state, r.batch_id, r.failure_reason, r.created_at, r.replayed_by
      FROM scan_rows r LEFT JOIN scan_bodies b ON b.id = r.id;

  -- As scans_parents_insert did on scans: most bodies name no parent, which a text search tells.
  CREATE TRIGGER scan_bodies_parents_insert AFTER INSERT ON scan_bodies
    WHEN instr(NEW.body, '"parents":[]') = 0 AND json_valid(NEW.body)
  BEGIN
    INSERT OR IGNORE INTO scan_parents (parent, scan_id)
      SELECT value, NEW.id FROM json_each(NEW.body, '$.parents') WHERE type = 'text';
  END;

  CREATE TRIGGER scan_rows_body_delete AFTER DELETE ON scan_rows
  BEGIN
    DELETE FROM scan_bodies WHERE id = OLD.id;
  END;
  `,

  // The drain's SQLite floor (delivered by the batch's state): a finished batch no longer moves
  // its scans from batched to delivered, one row at a time (about 25 ms per 10,000-scan batch, a
  // quarter of the drain's CPU). A scan whose row says `batched` is delivered once its batch is `done`
  // (src/buffer/scan-state.ts): Batches.finishBatch counts the batch's scans delivered then
  // (buffer_totals, scan_state_counts), once, and writes only the scans the service refused. Rows
  // already `delivered` stay so; both mean the same. The counting triggers of migrations 2, 3 and
  // 10 learn the rule: a change or delete of such a row counts it as leaving `delivered` (a
  // failure reported after an SFTP transfer; retention), with no row written first, since on a
  // full disk a longer row could need a page that retention is there to free. `scans`, the view
  // operators query, shows the derived state. The partial index scans_state leaves batched scans
  // out as well: those of finished batches would otherwise stay in it for the whole retention
  // period; the readers of batched scans find them by batch (scans_batch) from the batches not
  // done. Rebuilding the index reads the scans once (about 1 s per million).
  `
  DROP INDEX scans_state;
  CREATE INDEX scans_state ON scan_rows (state, id) WHERE state NOT IN ('delivered', 'batched');

  DROP VIEW scans;
  CREATE VIEW scans AS
    SELECT r.id, r.read_id, r.dcp_key, r.reference, r.time_utc, b.body, r.bytes,
           CASE WHEN r.state = 'batched' AND (SELECT state FROM batches WHERE id = r.batch_id) = 'done' THEN 'delivered' ELSE r.state END AS state,
           r.batch_id, r.failure_reason, r.created_at, r.replayed_by
      FROM scan_rows r LEFT JOIN scan_bodies b ON b.id = r.id;

  -- The triggers as they were, for every row but a batched one of a done batch (the batch's
  -- state looked up last: pending -> batched, the bulk move, is ruled out before it).
  DROP TRIGGER scans_totals_update;
  CREATE TRIGGER scans_totals_update AFTER UPDATE OF state ON scan_rows
    WHEN OLD.state <> NEW.state
      AND NOT (OLD.state = 'pending' AND NEW.state = 'batched')
      AND NOT (OLD.state = 'batched' AND NEW.state = 'delivered')
      AND NOT (OLD.state = 'batched' AND (SELECT state FROM batches WHERE id = OLD.batch_id) IS 'done')
  BEGIN
    UPDATE buffer_totals SET
      pending_scans = pending_scans + (NEW.state = 'pending') - (OLD.state = 'pending'),
      pending_bytes = pending_bytes + (NEW.state = 'pending') * NEW.bytes - (OLD.state = 'pending') * OLD.bytes,
      undelivered_scans = undelivered_scans + (NEW.state IN ('pending', 'batched')) - (OLD.state IN ('pending', 'batched')),
      undelivered_bytes = undelivered_bytes + (NEW.state IN ('pending', 'batched')) * NEW.bytes - (OLD.state IN ('pending', 'batched')) * OLD.bytes
    WHERE id = 1;
  END;

  DROP TRIGGER scans_states_update;
  CREATE TRIGGER scans_states_update AFTER UPDATE OF state ON scan_rows
    WHEN OLD.state <> NEW.state
      AND NOT (OLD.state = 'pending' AND NEW.state = 'batched')
      AND NOT (OLD.state = 'batched' AND NEW.state = 'delivered')
      AND NOT (OLD.state = 'batched' AND (SELECT state FROM batches WHERE id = OLD.batch_id) IS 'done')
  BEGIN
    UPDATE scan_state_counts SET scans = scans - 1 WHERE state = OLD.state;
    INSERT INTO scan_state_counts (state, scans) SELECT NEW.state, 1 WHERE NEW.state NOT IN ('pending', 'batched')
      ON CONFLICT (state) DO UPDATE SET scans = scans + 1;
  END;

  DROP TRIGGER scans_totals_delete;
  CREATE TRIGGER scans_totals_delete AFTER DELETE ON scan_rows
    WHEN OLD.state = 'pending' OR (OLD.state = 'batched' AND (SELECT state FROM batches WHERE id = OLD.batch_id) IS NOT 'done')
  BEGIN
    UPDATE buffer_totals SET
      pending_scans = pending_scans - (OLD.state = 'pending'),
      pending_bytes = pending_bytes - (OLD.state = 'pending') * OLD.bytes,
      undelivered_scans = undelivered_scans - 1,
      undelivered_bytes = undelivered_bytes - OLD.bytes
    WHERE id = 1;
  END;

  -- A batched row of a done batch leaves delivered (delivered -> batched never happens).
  CREATE TRIGGER scan_rows_delivered_update AFTER UPDATE OF state ON scan_rows
    WHEN OLD.state = 'batched' AND NEW.state NOT IN ('batched', 'delivered')
      AND (SELECT state FROM batches WHERE id = OLD.batch_id) IS 'done'
  BEGIN
    UPDATE buffer_totals SET
      pending_scans = pending_scans + (NEW.state = 'pending'),
      pending_bytes = pending_bytes + (NEW.state = 'pending') * NEW.bytes,
      undelivered_scans = undelivered_scans + (NEW.state = 'pending'),
      undelivered_bytes = undelivered_bytes + (NEW.state = 'pending') * NEW.bytes
    WHERE id = 1 AND NEW.state = 'pending';
    UPDATE scan_state_counts SET scans = scans - 1 WHERE state = 'delivered';
    INSERT INTO scan_state_counts (state, scans) SELECT NEW.state, 1 WHERE NEW.state <> 'pending'
      ON CONFLICT (state) DO UPDATE SET scans = scans + 1;
  END;

  CREATE TRIGGER scan_rows_delivered_delete AFTER DELETE ON scan_rows
    WHEN OLD.state = 'batched' AND (SELECT state FROM batches WHERE id = OLD.batch_id) IS 'done'
  BEGIN
    UPDATE scan_state_counts SET scans = scans - 1 WHERE state = 'delivered';
  END;
  `,
  // High availability: the leader epoch (the etcd revision of the leader key's creation) every
  // read was taken under, null without `ha`; and reads that came in a message the broker sent
  // again after a takeover, which the previous leader may have committed too (possible duplicates).
  `
  ALTER TABLE reads ADD COLUMN leader_epoch INTEGER;
  ALTER TABLE reads ADD COLUMN possible_duplicate INTEGER NOT NULL DEFAULT 0;
  CREATE INDEX reads_possible_duplicate ON reads (id) WHERE possible_duplicate = 1;
  `,

  // Lookup by any form of a GS1 identifier (src/buffer/item-keys.ts): the identifying AIs of each
  // scan (primary keys such as 00 SSCC and 01 GTIN, and key qualifiers such as 10 batch/lot and
  // 21 serial), taken from its read and its reference, so an item is found by its serial, its SSCC,
  // its lot or its GTIN, and by any carrier form, also when its reference is the raw read an older
  // configuration sent. Keyed by value first: a search by a value alone seeks it. Written by
  // ScanInsert; deleted with the scan. SQL cannot parse GS1: the scans stored before this step get
  // their keys right after the migrations, from fillStoredKeys (item-keys.ts), which this marks
  // with the last scan to fill and which drops the mark once done.
  `
  CREATE TABLE scan_keys (
    value TEXT NOT NULL,
    ai TEXT NOT NULL,
    scan_id INTEGER NOT NULL,
    PRIMARY KEY (value, ai, scan_id)
  ) WITHOUT ROWID;
  CREATE INDEX scan_keys_scan ON scan_keys (scan_id);
  CREATE TRIGGER scan_rows_keys_delete AFTER DELETE ON scan_rows
  BEGIN
    DELETE FROM scan_keys WHERE scan_id = OLD.id;
  END;
  CREATE TABLE scan_keys_fill (up_to INTEGER NOT NULL);
  INSERT INTO scan_keys_fill (up_to) SELECT coalesce(max(id), 0) FROM scan_rows;
  `,
  // Early pruning (disk-guard.ts) remembers what it took: when, why, how many delivered scans and
  // the span of their read times, so that the page, the metrics and `trace` can say so after a
  // restart. One row per episode of pressure, and the references of the scans it took (only the
  // shortfall's worth, so a few thousand at most), by the episode's time: `trace` of such an item
  // names the prune. A reference is kept as 64 bits of its SHA-256 with the prune's time in ms
  // (about 20 bytes a row): the references themselves (up to hundreds of characters) took as
  // much room as the prune freed on the MQTT tmpfs test. Both are kept for the audit period
  // (retention.ts deletes them after it).
  `
  CREATE TABLE early_prunes (
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    reason TEXT NOT NULL,
    scans INTEGER NOT NULL,
    first_read_at TEXT,
    last_read_at TEXT
  );
  CREATE TABLE early_pruned_refs (
    ref_hash INTEGER NOT NULL,
    pruned_at INTEGER NOT NULL,
    PRIMARY KEY (ref_hash, pruned_at)
  ) WITHOUT ROWID;
  `,
  // Containers (src/mapping/container-sessions.ts): each one a row, written with the read that
  // changed it (opened, a member more, closed), so the open ones are restored at start with their
  // count and members, and the closed ones say how they ended (complete, incomplete, abandoned,
  // who and why) to `trace`, the page and the metrics, for the audit period (retention.ts).
  `
  CREATE TABLE containers (
    id INTEGER PRIMARY KEY,
    container TEXT NOT NULL,
    per TEXT NOT NULL,
    station TEXT NOT NULL,
    parent TEXT NOT NULL,
    opened_at TEXT NOT NULL,
    last_read_at TEXT NOT NULL,
    members INTEGER NOT NULL,
    expected INTEGER,
    state TEXT NOT NULL CHECK (state IN ('open', 'complete', 'incomplete', 'closed', 'abandoned')),
    closed_at TEXT,
    why TEXT,
    closed_by TEXT,
    member_refs TEXT,
    UNIQUE (container, station, opened_at)
  );
  CREATE INDEX containers_parent ON containers (parent);
  CREATE INDEX containers_state ON containers (state, closed_at);
  `,
];
