/**
 * Migrations 1 to 9 of the buffer (see migrations.ts): the outbox and what each feature added to
 * it (replay, quota, retention, counts, MQTT exactly-once, files in chunks, disk pressure,
 * status events, SFTP, item lookup). Released: never edited.
 */
export const SCHEMA_MIGRATIONS: readonly string[] = [
  // 1: reads (everything any input delivered, with its outcome), scans (the outbox), batches.
  `
  CREATE TABLE reads (
    id INTEGER PRIMARY KEY,
    input_id TEXT NOT NULL,
    received_at TEXT NOT NULL,
    raw BLOB NOT NULL,
    source_time TEXT,
    dcp_key TEXT,
    origin TEXT,
    outcome TEXT NOT NULL CHECK (outcome IN ('scan', 'rejected', 'noRead', 'duplicate')),
    reason TEXT
  );
  CREATE INDEX reads_outcome ON reads (outcome, id);

  CREATE TABLE batches (
    id INTEGER PRIMARY KEY,
    mode TEXT NOT NULL CHECK (mode IN ('direct', 'presigned')),
    state TEXT NOT NULL CHECK (state IN ('ready', 'uploading', 'presigned', 'uploaded', 'done', 'held')),
    scan_count INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    request_id TEXT,
    presigned_url TEXT,
    presigned_expires_at INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    possible_duplicate INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    uploaded_at TEXT,
    finished_at TEXT,
    upstream_state TEXT,
    description TEXT,
    processed INTEGER,
    failed INTEGER,
    polls INTEGER NOT NULL DEFAULT 0
  );
  CREATE INDEX batches_state ON batches (state, next_attempt_at);

  CREATE TABLE scans (
    id INTEGER PRIMARY KEY,
    read_id INTEGER NOT NULL REFERENCES reads (id),
    dcp_key TEXT NOT NULL,
    reference TEXT NOT NULL,
    time_utc TEXT NOT NULL,
    body TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'batched', 'delivered', 'failed', 'held')),
    batch_id INTEGER REFERENCES batches (id),
    failure_reason TEXT,
    created_at INTEGER NOT NULL
  );
  CREATE INDEX scans_state ON scans (state, id);
  CREATE INDEX scans_batch ON scans (batch_id);
  `,

  // 2: replay, quota, retention and exactly-once recovery.
  // - reads keep what replay needs to map a read again exactly as the source gave it: the DCP the
  //   source named (reads.dcp_key holds the mapped one), parents and attributes.
  //   reads.input_level marks rejections that never were a read (a CSV row without the barcode
  //   column): replay must not map those as barcodes. NULL on older rows: unknown, never replayed.
  // - scans.replayed_by links a dead letter to the scan that replaced it (no foreign key: retention
  //   prunes the replacement once delivered and old enough, together with what it replaced).
  // - batches.put_started_at: a PUT to the current pre-signed address may have reached the service.
  // - files: content hashes of committed files, so a file read again after a crash is not stored twice.
  // - counters: lifetime counts that must survive restarts (possible duplicates).
  // - space_probe: written and rolled back to learn whether a full disk has room again.
  // - buffer_totals: pending and undelivered scans and bytes, kept exact by triggers, so the quota
  //   check costs one row read, also when another process (replay) adds scans.
  `
  ALTER TABLE reads ADD COLUMN source_dcp_key TEXT;
  ALTER TABLE reads ADD COLUMN parents TEXT;
  ALTER TABLE reads ADD COLUMN attributes TEXT;
  ALTER TABLE scans ADD COLUMN replayed_by INTEGER;
  ALTER TABLE reads ADD COLUMN input_level INTEGER;
  CREATE INDEX scans_read ON scans (read_id);
  ALTER TABLE batches ADD COLUMN put_started_at INTEGER;
  CREATE INDEX batches_finished ON batches (finished_at) WHERE state = 'done';

  CREATE TABLE files (
    input_id TEXT NOT NULL,
    hash TEXT NOT NULL,
    name TEXT,
    committed_at TEXT NOT NULL,
    items INTEGER NOT NULL,
    PRIMARY KEY (input_id, hash)
  ) WITHOUT ROWID;

  CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
  CREATE INDEX scans_replayed ON scans (replayed_by) WHERE replayed_by IS NOT NULL;

  -- Written to and rolled back to find out whether the disk has room again after SQLITE_FULL.
  CREATE TABLE space_probe (pad BLOB);

  CREATE TABLE buffer_totals (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    pending_scans INTEGER NOT NULL,
    pending_bytes INTEGER NOT NULL,
    undelivered_scans INTEGER NOT NULL,
    undelivered_bytes INTEGER NOT NULL
  );
  INSERT INTO buffer_totals
    SELECT 1,
      coalesce(sum(state = 'pending'), 0), coalesce(sum((state = 'pending') * bytes), 0),
      count(*), coalesce(sum(bytes), 0)
    FROM scans WHERE state IN ('pending', 'batched');

  CREATE TRIGGER scans_totals_insert AFTER INSERT ON scans WHEN NEW.state IN ('pending', 'batched')
  BEGIN
    UPDATE buffer_totals SET
      pending_scans = pending_scans + (NEW.state = 'pending'),
      pending_bytes = pending_bytes + (NEW.state = 'pending') * NEW.bytes,
      undelivered_scans = undelivered_scans + 1,
      undelivered_bytes = undelivered_bytes + NEW.bytes
    WHERE id = 1;
  END;

  CREATE TRIGGER scans_totals_update AFTER UPDATE OF state ON scans WHEN OLD.state <> NEW.state
  BEGIN
    UPDATE buffer_totals SET
      pending_scans = pending_scans + (NEW.state = 'pending') - (OLD.state = 'pending'),
      pending_bytes = pending_bytes + (NEW.state = 'pending') * NEW.bytes - (OLD.state = 'pending') * OLD.bytes,
      undelivered_scans = undelivered_scans + (NEW.state IN ('pending', 'batched')) - (OLD.state IN ('pending', 'batched')),
      undelivered_bytes = undelivered_bytes + (NEW.state IN ('pending', 'batched')) * NEW.bytes - (OLD.state IN ('pending', 'batched')) * OLD.bytes
    WHERE id = 1;
  END;

  CREATE TRIGGER scans_totals_delete AFTER DELETE ON scans WHEN OLD.state IN ('pending', 'batched')
  BEGIN
    UPDATE buffer_totals SET
      pending_scans = pending_scans - (OLD.state = 'pending'),
      pending_bytes = pending_bytes - (OLD.state = 'pending') * OLD.bytes,
      undelivered_scans = undelivered_scans - 1,
      undelivered_bytes = undelivered_bytes - OLD.bytes
    WHERE id = 1;
  END;
  `,
  // 3: counts the health page, /healthz and the metrics read on every refresh, kept by triggers.
  // Grouping a month of delivered scans (and of batches, one a scan at a slow line) took about
  // 150 ms per million rows on the event loop, each refresh. Scans are always inserted 'pending'
  // (counted in buffer_totals); scan_state_counts holds the states they move on to.
  `
  CREATE TABLE scan_state_counts (state TEXT PRIMARY KEY, scans INTEGER NOT NULL) WITHOUT ROWID;
  INSERT INTO scan_state_counts SELECT state, count(*) FROM scans WHERE state NOT IN ('pending', 'batched') GROUP BY state;

  CREATE TRIGGER scans_states_insert AFTER INSERT ON scans WHEN NEW.state NOT IN ('pending', 'batched')
  BEGIN
    INSERT INTO scan_state_counts (state, scans) VALUES (NEW.state, 1) ON CONFLICT (state) DO UPDATE SET scans = scans + 1;
  END;

  CREATE TRIGGER scans_states_update AFTER UPDATE OF state ON scans WHEN OLD.state <> NEW.state
  BEGIN
    UPDATE scan_state_counts SET scans = scans - 1 WHERE state = OLD.state;
    INSERT INTO scan_state_counts (state, scans) SELECT NEW.state, 1 WHERE NEW.state NOT IN ('pending', 'batched')
      ON CONFLICT (state) DO UPDATE SET scans = scans + 1;
  END;

  CREATE TRIGGER scans_states_delete AFTER DELETE ON scans WHEN OLD.state NOT IN ('pending', 'batched')
  BEGIN
    UPDATE scan_state_counts SET scans = scans - 1 WHERE state = OLD.state;
  END;

  CREATE TABLE batch_counts (
    mode TEXT NOT NULL,
    label TEXT NOT NULL,
    batches INTEGER NOT NULL,
    PRIMARY KEY (mode, label)
  ) WITHOUT ROWID;
  INSERT INTO batch_counts
    SELECT mode, CASE WHEN state = 'done' THEN coalesce(upstream_state, 'done') ELSE state END, count(*) FROM batches GROUP BY 1, 2;

  CREATE TRIGGER batches_counts_insert AFTER INSERT ON batches
  BEGIN
    INSERT INTO batch_counts (mode, label, batches)
      VALUES (NEW.mode, CASE WHEN NEW.state = 'done' THEN coalesce(NEW.upstream_state, 'done') ELSE NEW.state END, 1)
      ON CONFLICT (mode, label) DO UPDATE SET batches = batches + 1;
  END;

  CREATE TRIGGER batches_counts_update AFTER UPDATE OF mode, state, upstream_state ON batches
    WHEN OLD.mode IS NOT NEW.mode OR OLD.state IS NOT NEW.state OR (NEW.state = 'done' AND OLD.upstream_state IS NOT NEW.upstream_state)
  BEGIN
    UPDATE batch_counts SET batches = batches - 1
      WHERE mode = OLD.mode AND label = CASE WHEN OLD.state = 'done' THEN coalesce(OLD.upstream_state, 'done') ELSE OLD.state END;
    INSERT INTO batch_counts (mode, label, batches)
      VALUES (NEW.mode, CASE WHEN NEW.state = 'done' THEN coalesce(NEW.upstream_state, 'done') ELSE NEW.state END, 1)
      ON CONFLICT (mode, label) DO UPDATE SET batches = batches + 1;
  END;

  CREATE TRIGGER batches_counts_delete AFTER DELETE ON batches
  BEGIN
    UPDATE batch_counts SET batches = batches - 1
      WHERE mode = OLD.mode AND label = CASE WHEN OLD.state = 'done' THEN coalesce(OLD.upstream_state, 'done') ELSE OLD.state END;
  END;

  CREATE INDEX batches_uploaded ON batches (uploaded_at);
  `,
  // MQTT exactly-once across gateway crashes: the identity of the last QoS 1 message
  // committed under each packet id of an input's session, written in the read's own transaction.
  // One row per (input, packet id): a packet id the broker hands out again replaces its row, so
  // the table never holds more than 65,535 rows per input (see docs/inputs.md, "mqtt").
  `
  CREATE TABLE mqtt_messages (
    input_id TEXT NOT NULL,
    packet_id INTEGER NOT NULL,
    topic TEXT NOT NULL,
    payload_sha256 BLOB NOT NULL,
    committed_at INTEGER NOT NULL,
    PRIMARY KEY (input_id, packet_id)
  ) WITHOUT ROWID;
  CREATE INDEX mqtt_messages_committed ON mqtt_messages (committed_at);
  `,

  // Files committed in chunks (files input): how many items of a file in progress are committed,
  // written in the same transaction as each chunk, so a file taken again after a crash goes on
  // after its last committed chunk (its first `items` parsed again and skipped). The row goes when
  // the file's last chunk commits (the whole file is then in `files`); left-over rows (a file
  // removed half-way) are pruned with `files`.
  `
  CREATE TABLE file_progress (
    input_id TEXT NOT NULL,
    hash TEXT NOT NULL,
    name TEXT,
    items INTEGER NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (input_id, hash)
  ) WITHOUT ROWID;
  `,

  // Disk pressure: pruned pages go back to the file system (auto_vacuum = INCREMENTAL with
  // incremental_vacuum after early pruning). New buffers get the mode at creation (open.ts);
  // for an existing one the mode takes effect only with a VACUUM, which cannot run inside this
  // migration's transaction: src/buffer/disk-guard.ts runs it at start, bounded in size and logged.
  `
  PRAGMA auto_vacuum = INCREMENTAL;
  `,

  // Status events (contract §6). The next offset to read of each partition of the status
  // topic, written in the same transaction as the effect of the events before it, so a restart goes
  // on after the last applied event and none is lost (delivery/status-events.ts). Offsets are
  // 64-bit: kept as decimal text. The index finds a batch by the requestId an event names.
  `
  CREATE TABLE status_event_positions (
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    next_offset TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (topic, partition)
  ) WITHOUT ROWID;
  CREATE INDEX batches_request_id ON batches (request_id) WHERE request_id IS NOT NULL;
  `,

  // SFTP delivery (contract §4.7). The `mode` column's CHECK cannot be widened without
  // rebuilding the table, so an SFTP batch keeps `mode = 'presigned'` (a large-batch route, no POST)
  // and `route = 'sftp'` says which; readers see `coalesce(route, mode)` (rows.ts BATCH_COLUMNS) and
  // the batch counts are rebuilt on that. `remote_path` is the batch's fixed remote file name
  // (so a batch exists on the server at most once) and `sha256` its body's hash, kept for audit.
  `
  ALTER TABLE batches ADD COLUMN route TEXT CHECK (route IS NULL OR route = 'sftp');
  ALTER TABLE batches ADD COLUMN remote_path TEXT;
  ALTER TABLE batches ADD COLUMN sha256 TEXT;
  CREATE INDEX batches_remote_path ON batches (remote_path) WHERE remote_path IS NOT NULL;

  DROP TRIGGER batches_counts_insert;
  DROP TRIGGER batches_counts_update;
  DROP TRIGGER batches_counts_delete;
  CREATE TRIGGER batches_counts_insert AFTER INSERT ON batches
  BEGIN
    INSERT INTO batch_counts (mode, label, batches)
      VALUES (coalesce(NEW.route, NEW.mode), CASE WHEN NEW.state = 'done' THEN coalesce(NEW.upstream_state, 'done') ELSE NEW.state END, 1)
      ON CONFLICT (mode, label) DO UPDATE SET batches = batches + 1;
  END;
  CREATE TRIGGER batches_counts_update AFTER UPDATE OF mode, route, state, upstream_state ON batches
    WHEN OLD.mode IS NOT NEW.mode OR OLD.route IS NOT NEW.route OR OLD.state IS NOT NEW.state OR (NEW.state = 'done' AND OLD.upstream_state IS NOT NEW.upstream_state)
  BEGIN
    UPDATE batch_counts SET batches = batches - 1
      WHERE mode = coalesce(OLD.route, OLD.mode) AND label = CASE WHEN OLD.state = 'done' THEN coalesce(OLD.upstream_state, 'done') ELSE OLD.state END;
    INSERT INTO batch_counts (mode, label, batches)
      VALUES (coalesce(NEW.route, NEW.mode), CASE WHEN NEW.state = 'done' THEN coalesce(NEW.upstream_state, 'done') ELSE NEW.state END, 1)
      ON CONFLICT (mode, label) DO UPDATE SET batches = batches + 1;
  END;
  CREATE TRIGGER batches_counts_delete AFTER DELETE ON batches
  BEGIN
    UPDATE batch_counts SET batches = batches - 1
      WHERE mode = coalesce(OLD.route, OLD.mode) AND label = CASE WHEN OLD.state = 'done' THEN coalesce(OLD.upstream_state, 'done') ELSE OLD.state END;
  END;
  `,

  // Item lookup ("what happened to this item?", src/queries/items.ts): scans by reference
  // (exact and prefix lookups walk this index), and each scan's parents in a table of their own,
  // kept by triggers, so the children of an item (the scans naming it as parent) are found by
  // index too. Filled here from the scans already stored: one pass over their bodies.
  // The station screen (src/queries/station.ts) finds a station's reads by the DCP they were mapped
  // to, or for a read with none (a rejection) by its input: one expression index serves both.
  `
  CREATE INDEX scans_reference ON scans (reference);
  CREATE INDEX reads_station ON reads (coalesce(dcp_key, '@' || input_id), id);
  CREATE TABLE scan_parents (
    parent TEXT NOT NULL,
    scan_id INTEGER NOT NULL,
    PRIMARY KEY (parent, scan_id)
  ) WITHOUT ROWID;
  CREATE INDEX scan_parents_scan ON scan_parents (scan_id);
  INSERT OR IGNORE INTO scan_parents (parent, scan_id)
    SELECT p.value, s.id FROM scans s, json_each(s.body, '$.parents') p
     WHERE json_valid(s.body) AND p.type = 'text';

  -- Most scans name no parent: intake writes them with "parents":[], which a text search tells
  -- apart without parsing the JSON (parsing every body cost intake about a tenth of its rate).
  CREATE TRIGGER scans_parents_insert AFTER INSERT ON scans
    WHEN instr(NEW.body, '"parents":[]') = 0 AND json_valid(NEW.body)
  BEGIN
    INSERT OR IGNORE INTO scan_parents (parent, scan_id)
      SELECT value, NEW.id FROM json_each(NEW.body, '$.parents') WHERE type = 'text';
  END;

  CREATE TRIGGER scans_parents_delete AFTER DELETE ON scans
  BEGIN
    DELETE FROM scan_parents WHERE scan_id = OLD.id;
  END;
  `,
];
