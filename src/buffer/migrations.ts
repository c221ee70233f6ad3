/**
 * Schema migrations of the SQLite buffer, by `PRAGMA user_version`. Append only: a released
 * migration is never edited, so a gateway upgraded in place walks every step once.
 */
export const MIGRATIONS: readonly string[] = [
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
];
