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
];
