import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { ErrorCodes, GatewayError, isDiskFull } from '../errors.js';
import { attachConnection } from './connection.js';
import { MIGRATIONS } from './migrations.js';
import { permissionHint, unopenable } from './open-errors.js';
import { indexedState } from './scan-state.js';
import { arrayBytes, BATCH_COLUMNS, type BatchMode, type BatchRow, type BatchState, type BufferTotals, type CommittedFile, type CommittedMessage, type IntakeRecord, type PendingHead, type PendingScanRow } from './rows.js';
import { BufferReports } from './reports.js';

/** `wal_autocheckpoint` of the buffer, in pages (1 MiB at the 4 KiB page size). */
export const WAL_AUTOCHECKPOINT_PAGES = 256;

/**
 * What the write-ahead log may hold beyond the end of the database file (bytes) before a commit of
 * reads checkpoints it first (see {@link BufferStore.commitIntake}): 64 pages at 4 KiB.
 */
export const CHECKPOINT_BEYOND_END_BYTES = 256 * 1024;

/**
 * A commit of at most this many reads, and at most {@link SMALL_COMMIT_BYTES}, may skip the
 * checkpoint before it while the log holds no more than {@link CHECKPOINT_BEYOND_END_BYTES} beyond
 * the database file's end. Bigger commits always checkpoint first, as every commit did before.
 */
export const SMALL_COMMIT_RECORDS = 64;
/** Bytes of a small commit ({@link SMALL_COMMIT_RECORDS}): raw reads, scan bodies, reasons, parents and attributes. */
export const SMALL_COMMIT_BYTES = 32 * 1024;

function textLength(texts: readonly string[] | undefined): number {
  let n = 0;
  for (const t of texts ?? []) n += t.length;
  return n;
}

/** Whether a commit of these records is small (see {@link SMALL_COMMIT_RECORDS}). */
function smallCommit(records: readonly IntakeRecord[]): boolean {
  if (records.length > SMALL_COMMIT_RECORDS) return false;
  let bytes = 0;
  for (const r of records) {
    // A string's UTF-8 length is at most 3 bytes per UTF-16 unit: an upper bound where not given.
    bytes += r.raw.length + (r.scan ? (r.scan.bytes ?? 3 * r.scan.body.length) : 0) + 3 * ((r.reason?.length ?? 0) + textLength(r.parents) + textLength(r.attributes && Object.entries(r.attributes).flat()));
    if (bytes > SMALL_COMMIT_BYTES) return false;
  }
  return true;
}

/** Rows per page of {@link BufferStore.pendingScans}. */
export const PENDING_PAGE_ROWS = 2_000;

/** Bytes of a file (0 when there is none). */
function fileBytes(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

export type { IntakeRecord, CommittedFile, CommittedMessage, BatchMode, BatchState, BatchRow, BufferTotals, PendingHead, PendingScanRow } from './rows.js';
export { arrayBytes };


const ROLLBACK = Symbol('rollback');

/**
 * The durable buffer: an outbox in SQLite (WAL, `synchronous=FULL`). Every read is written before
 * its source is acknowledged; scans leave the outbox only when upstream reports them processed,
 * and even then stay for audit until retention prunes them (retention.ts).
 *
 * A second process (the `replay` command) may open the same file while the daemon runs: WAL lets
 * readers go on, and `busy_timeout` makes writers wait for each other instead of failing.
 *
 * `options.migrate: false` (a second process beside the daemon): a buffer of an older schema is
 * refused instead of migrated, because a migration may change what the running (older) daemon
 * writes: since version 12, `scans` is a view it cannot insert into.
 *
 * @throws GatewayError `SCANGW_E_BUFFER` when the file cannot be opened, migrated or written (a
 *   file the gateway's user may not write: the message names the user and what to chown);
 *   `SCANGW_E_BUFFER_DISK_FULL` when a migration ran out of disk space (undone whole).
 */
export class BufferStore {
  private readonly db: Database.Database;
  /** Read-only reports over this buffer (src/buffer/reports.ts): health page, metrics, status. */
  readonly reports: BufferReports;

  constructor(
    readonly path: string,
    options: { readonly?: boolean; fileMustExist?: boolean; migrate?: boolean } = {},
  ) {
    try {
      if (path !== ':memory:' && !options.fileMustExist) mkdirSync(dirname(path), { recursive: true });
      this.db = new Database(path, { fileMustExist: options.fileMustExist ?? false });
      // A new buffer returns pruned pages to the file system (disk-guard.ts); this takes effect only
      // while the file is empty (before the WAL header is written). Older buffers are switched by
      // one VACUUM at start.
      if ((this.db.pragma('user_version', { simple: true }) as number) === 0 && !options.readonly) this.db.pragma('auto_vacuum = INCREMENTAL');
      this.db.pragma('journal_mode = WAL');
      this.db.pragma('synchronous = FULL');
      this.db.pragma('busy_timeout = 5000');
      this.db.pragma('foreign_keys = ON');
      // After a checkpoint the write-ahead log is cut back to this size instead of keeping the room
      // it grew to: on a full disk that room is what intake and delivery need.
      this.db.pragma('journal_size_limit = 1048576');
      // Checkpoint at 256 pages (1 MiB at 4 KiB), not SQLite's 1000: what the log holds beyond the
      // end of the database file must fit in the disk guard's reserve (4 MiB) when the disk is full,
      // or the checkpoint that would free the log can never run (see commitIntake).
      this.db.pragma(`wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_PAGES}`);
      attachConnection(this, this.db);
      this.migrate(options.migrate ?? true);
    } catch (err) {
      throw new GatewayError(isDiskFull(err) ? ErrorCodes.BUFFER_DISK_FULL : unopenable(err) ? ErrorCodes.BUFFER_UNOPENABLE : ErrorCodes.BUFFER, `cannot open the buffer ${path}: ${(err as Error).message}${permissionHint(path, err)}`, {
        cause: err,
      });
    }
    this.reports = new BufferReports(this.db, path);
    if (!options.readonly && path !== ':memory:') this.assertWritable();
  }

  /** Interim: the constructor still opens; the split of the store moves that here. */
  open(): void {}

  /** False once closed (or after a failed write check). */
  get isOpen(): boolean {
    return this.db.open;
  }

  /**
   * SQLite opens a file it may not write read-only without a word; the first commit would fail,
   * and a later chmod would not help the open connection. A write rolled back tells now.
   */
  private assertWritable(): void {
    try {
      this.db.transaction(() => {
        this.db.prepare('INSERT INTO space_probe (pad) VALUES (NULL)').run();
        throw ROLLBACK;
      }).immediate();
    } catch (err) {
      if (err === ROLLBACK) return;
      this.db.close();
      const code = isDiskFull(err) ? ErrorCodes.BUFFER_DISK_FULL : unopenable(err) ? ErrorCodes.BUFFER_UNOPENABLE : ErrorCodes.BUFFER;
      throw new GatewayError(code, `cannot write the buffer ${this.path}: ${(err as Error).message}${permissionHint(this.path, err)}`, { cause: err });
    }
  }

  private migrate(allowed: boolean): void {
    const version = this.db.pragma('user_version', { simple: true }) as number;
    if (version > MIGRATIONS.length) {
      throw new GatewayError(
        ErrorCodes.BUFFER_UNOPENABLE,
        `the buffer has schema version ${version}, newer than this gateway knows (${MIGRATIONS.length}); downgrade is not supported`,
      );
    }
    if (!allowed && version > 0 && version < MIGRATIONS.length) {
      throw new GatewayError(
        ErrorCodes.BUFFER_UNOPENABLE,
        `the buffer has schema version ${version}, older than this gateway's (${MIGRATIONS.length}): an older gateway may still be running on it. Restart the service (\`systemctl restart scan-gateway\`): its start migrates the buffer; then run this again`,
      );
    }
    for (let v = version; v < MIGRATIONS.length; v++) {
      try {
        this.db.transaction(() => {
          this.db.exec(MIGRATIONS[v]!);
          this.db.pragma(`user_version = ${v + 1}`);
        }).immediate();
      } catch (err) {
        if (!isDiskFull(err)) throw err;
        // A step may rewrite a table (version 12 rewrites the scans: the log holds about the
        // buffer's size until it commits). Rolled back whole, so the person needs to know only that.
        throw new GatewayError(
          ErrorCodes.BUFFER_DISK_FULL,
          `the upgrade of its schema from version ${v} to ${v + 1} ran out of disk space and was undone (the buffer is as it was); free about twice the buffer's size on its disk (\`df -h\`) and start again`,
          { cause: err },
        );
      }
    }
  }

  private statements?: {
    read: Database.Statement;
    file: Database.Statement;
    progress: Database.Statement;
    progressDone: Database.Statement;
    message: Database.Statement;
  };

  /**
   * Commits a group of reads (and their scans), the files they came from and the identities of the
   * MQTT messages they came in, in one transaction. A message's identity replaces the one stored
   * under the same input and packet id (the broker reuses a packet id only after its PUBACK).
   * Throws on failure (`isDiskFull(err)` for a full disk); nothing is then written.
   *
   * Before it, the write-ahead log is checkpointed (PASSIVE) unless it holds at most
   * {@link CHECKPOINT_BEYOND_END_BYTES} of pages beyond the end of the database file and this
   * commit is small ({@link SMALL_COMMIT_RECORDS}); an SQLITE_FULL of that checkpoint refuses the
   * commit like a full disk. So the log never holds more new pages beyond the end of the database
   * file than one big commit adds (3.7 MB for 1,000 scans of 600-character references, measured), or
   * 256 KiB and one small commit (at most 304 KiB measured; test/unit/buffer-checkpoint.test.ts holds it under 1 MiB),
   * within the 4 MiB reserve: those are the pages a checkpoint needs new room for on a full disk.
   * SQLite's own automatic checkpoint ignores its errors: near a full disk it fails to
   * extend the database file while the commits still fit in the log, which then grew to 8 MB, 7.3
   * MB of it pages beyond the end of the database file (measured on the MQTT tmpfs test). Its
   * checkpoint needed more room than the 4 MiB reserve gives, nothing could write or checkpoint
   * again, and delivery stopped for good.
   *
   * Why not before every commit: a checkpoint costs two fsyncs (log and
   * database file) on the thread that commits, and at 500 reads/s one commit per read made that
   * 430 to 770 fsyncs a second, the event loop's longest stalls (docs/performance.md, section 10).
   */
  commitIntake(records: readonly IntakeRecord[], nowMs: number, files: readonly CommittedFile[] = [], messages: readonly CommittedMessage[] = []): void {
    if (this.path !== ':memory:' && (!smallCommit(records) || this.bytesBeyondEnd() > CHECKPOINT_BEYOND_END_BYTES)) this.db.pragma('wal_checkpoint(PASSIVE)');
    this.statements ??= {
      read: this.db.prepare(
        `INSERT INTO reads (input_id, received_at, raw, source_time, dcp_key, origin, outcome, reason, source_dcp_key, parents, attributes, input_level)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      file: this.db.prepare(`INSERT OR IGNORE INTO files (input_id, hash, name, committed_at, items) VALUES (?, ?, ?, ?, ?)`),
      progress: this.db.prepare(
        `INSERT INTO file_progress (input_id, hash, name, items, updated_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (input_id, hash) DO UPDATE SET name = excluded.name, items = excluded.items, updated_at = excluded.updated_at`,
      ),
      progressDone: this.db.prepare(`DELETE FROM file_progress WHERE input_id = ? AND hash = ?`),
      message: this.db.prepare(`INSERT OR REPLACE INTO mqtt_messages (input_id, packet_id, topic, payload_sha256, committed_at) VALUES (?, ?, ?, ?, ?)`),
    };
    const { read, file, progress, progressDone, message } = this.statements;
    this.db.transaction(() => {
      for (const r of records) {
        const receivedAt = r.receivedAt.toISOString();
        const info = read.run(
          r.inputId,
          receivedAt,
          r.raw,
          r.sourceTime ?? null,
          r.scan?.dcpKey ?? r.dcpKey ?? null,
          r.origin ? JSON.stringify(r.origin) : null,
          r.outcome,
          r.reason ?? null,
          r.dcpKey ?? null,
          r.parents && r.parents.length > 0 ? JSON.stringify(r.parents) : null,
          r.attributes && Object.keys(r.attributes).length > 0 ? JSON.stringify(r.attributes) : null,
          r.inputLevel ? 1 : 0,
        );
        if (r.scan) {
          // Most scans are timed by their reception (no source time): the same instant, formatted once.
          const time = r.scan.instant.getTime() === r.receivedAt.getTime() ? receivedAt : r.scan.instant.toISOString();
          this.insertScan(info.lastInsertRowid, r.scan.dcpKey, r.scan.reference, time, r.scan.body, r.scan.bytes ?? Buffer.byteLength(r.scan.body), nowMs);
        }
      }
      const at = new Date(nowMs).toISOString();
      for (const f of files) {
        if (f.inProgress === true) {
          progress.run(f.inputId, f.hash, f.name ?? null, f.items, at);
          continue;
        }
        progressDone.run(f.inputId, f.hash);
        if (f.remember !== false) file.run(f.inputId, f.hash, f.name ?? null, at, f.items);
      }
      for (const m of messages) message.run(m.inputId, m.packetId, m.topic, m.payloadSha256, nowMs);
    }).immediate();
  }

  /**
   * Bytes of the pages the write-ahead log holds beyond the end of the database file: what a
   * checkpoint must find new room for (`page_count` counts the log's pages, the file's size does
   * not). 0 when the file reaches as far or further (a vacuum not yet checkpointed).
   */
  bytesBeyondEnd(): number {
    this.pageCountStatement ??= this.db.prepare('PRAGMA page_count').pluck();
    this.pageSize ??= this.db.pragma('page_size', { simple: true }) as number;
    const pages = this.pageCountStatement.get() as number;
    return Math.max(0, pages * this.pageSize - fileBytes(this.path));
  }
  private pageCountStatement: Database.Statement | undefined;
  private pageSize: number | undefined;

  /**
   * The checkpoint the next {@link commitIntake} would run first, run now when the log holds more
   * than {@link CHECKPOINT_BEYOND_END_BYTES} beyond the database file's end: intake calls it once
   * the sources of a commit were acknowledged, so that the copy of the log into the database file
   * and its fsync are not between a read and its acknowledgement. The next commit still checks
   * and is refused on SQLITE_FULL: an error here (a full disk) is left to it, so it is ignored.
   * Nothing is done once closed.
   */
  checkpointAfterCommit(): void {
    if (this.path === ':memory:' || !this.db.open) return;
    try {
      if (this.bytesBeyondEnd() > CHECKPOINT_BEYOND_END_BYTES) this.db.pragma('wal_checkpoint(PASSIVE)');
    } catch {
      // The next commit's own checkpoint meets the same error and refuses that commit.
    }
  }

  /**
   * Whether this message (same input, packet id, topic and payload) was committed before and its
   * identity not yet replaced by a later message under the same packet id, nor forgotten.
   */
  knownMessage(m: CommittedMessage): boolean {
    this.knownMessageStatement ??= this.db.prepare(`SELECT 1 FROM mqtt_messages WHERE input_id = ? AND packet_id = ? AND topic = ? AND payload_sha256 = ?`);
    return this.knownMessageStatement.get(m.inputId, m.packetId, m.topic, m.payloadSha256) !== undefined;
  }
  private knownMessageStatement: Database.Statement | undefined;

  /**
   * Forgets the message identities of an input: its broker holds no session for it any more
   * (CONNACK without session present), so nothing committed before can be sent again. Answers the
   * rows removed.
   */
  forgetMessages(inputId: string): number {
    return this.db.prepare(`DELETE FROM mqtt_messages WHERE input_id = ?`).run(inputId).changes;
  }

  /** Deletes message identities committed before `beforeMs` (retention); answers how many. */
  pruneMessages(beforeMs: number): number {
    return this.db.prepare(`DELETE FROM mqtt_messages WHERE committed_at < ?`).run(beforeMs).changes;
  }

  /**
   * Scans committed at or after `sinceMs` (`created_at`), newest first, at most `limit`: walks the
   * scans by id from the newest and stops at the first older one (ids follow commit order).
   */
  recentScans(sinceMs: number, limit: number): { dcpKey: string; reference: string; timeUtc: string; createdAt: number }[] {
    const out: { dcpKey: string; reference: string; timeUtc: string; createdAt: number }[] = [];
    const rows = this.db
      .prepare(`SELECT dcp_key AS dcpKey, reference, time_utc AS timeUtc, created_at AS createdAt FROM scan_rows ORDER BY id DESC`)
      .iterate() as IterableIterator<{ dcpKey: string; reference: string; timeUtc: string; createdAt: number }>;
    for (const row of rows) {
      if (row.createdAt < sinceMs || out.length >= limit) break;
      out.push(row);
    }
    return out;
  }

  /** Items committed so far of a file in progress (committed in chunks), or undefined when none is recorded. */
  fileProgress(inputId: string, hash: string): number | undefined {
    const row = this.db.prepare(`SELECT items FROM file_progress WHERE input_id = ? AND hash = ?`).get(inputId, hash) as { items: number } | undefined;
    return row?.items;
  }

  /** Whether a file with this content hash was committed for this input before (and not yet pruned). */
  knownFile(inputId: string, hash: string): boolean {
    return this.db.prepare(`SELECT 1 FROM files WHERE input_id = ? AND hash = ?`).get(inputId, hash) !== undefined;
  }

  /** Undelivered scans and their bytes, from the trigger-maintained totals: one row read. */
  totals(): BufferTotals {
    // Prepared once: intake asks for the totals on every submit (back-pressure).
    this.totalsStatement ??= this.db.prepare(
      `SELECT pending_scans AS pendingScans, pending_bytes AS pendingBytes,
         undelivered_scans AS undeliveredScans, undelivered_bytes AS undeliveredBytes FROM buffer_totals WHERE id = 1`,
    );
    return this.totalsStatement.get() as BufferTotals;
  }
  private totalsStatement: Database.Statement | undefined;

  /**
   * `created_at` (ms) of the oldest scan not yet delivered: pending, or in a batch the service has
   * not finished; null when there is none. What "how far behind is delivery" is measured by.
   */
  oldestUndeliveredCreatedAt(): number | null {
    const times = [this.oldestCreatedAt('pending'), this.oldestCreatedAt('batched')].filter((t): t is number => t !== null);
    return times.length > 0 ? Math.min(...times) : null;
  }

  /** Count of scans not yet in a batch, and the `created_at` (ms) of the oldest. */
  pending(): { count: number; oldestCreatedAt: number | null } {
    const count = this.totals().pendingScans;
    return { count, oldestCreatedAt: count === 0 ? null : this.oldestCreatedAt('pending') };
  }

  /**
   * `created_at` (ms) of the first scan in `state`, or null: a pending one by id through the
   * scans_state index; a batched one (in flight) as the earliest of each open batch's first scan
   * (scans_batch, one index step per batch: the status page asks on every refresh, and walking
   * every in-flight scan took about 4 ms at 40,000 of them).
   */
  private oldestCreatedAt(state: 'pending' | 'batched'): number | null {
    const sql =
      state === 'pending'
        ? `SELECT created_at FROM scan_rows WHERE state = 'pending' AND ${indexedState()} ORDER BY id LIMIT 1`
        : `SELECT min((SELECT created_at FROM scan_rows WHERE batch_id = b.id AND state = 'batched' ORDER BY id LIMIT 1)) FROM batches b WHERE b.state <> 'done'`;
    return (this.db.prepare(sql).pluck().get() as number | null | undefined) ?? null;
  }

  /**
   * Pending scans (not yet in a batch) in id order, read in pages of {@link PENDING_PAGE_ROWS} as
   * the loop asks for them, so a backlog of millions is never held in memory (at most one page
   * beyond what the loop takes). Pages rather than a cursor: `.all()` of 2,000 rows costs less
   * per row than stepping a cursor (measured: 11.1 -> 9.3 ms CPU to pack a 10,000-scan batch,
   * min of 10). Run it inside {@link atomically} when the rows must be one snapshot (the pages are
   * separate statements). The packing rule that consumes it lives in `src/delivery/batcher.ts`.
   */
  *pendingScans(): IterableIterator<PendingScanRow> {
    this.pendingPage ??= this.db.prepare(`SELECT id, reference, bytes FROM scan_rows WHERE state = 'pending' AND ${indexedState()} AND id > ? ORDER BY id LIMIT ?`);
    let afterId = -1;
    for (;;) {
      const rows = this.pendingPage.all(afterId, PENDING_PAGE_ROWS) as PendingScanRow[];
      yield* rows;
      if (rows.length < PENDING_PAGE_ROWS) return;
      afterId = rows[rows.length - 1]!.id;
    }
  }
  private pendingPage: Database.Statement | undefined;

  /**
   * The first `limit` pending scans in id order, summed up in SQL without reading them out: how
   * many, how many distinct references among them, the sum of their stored JSON lengths, the first
   * and the last id. {@link formBatch} forms a batch from this alone when the head of the queue can
   * go whole (measured: 7 ms per 10,000 scans read into JavaScript, 1.8 ms summed in SQL). Run it
   * inside {@link atomically} with the {@link writeBatch} that uses it.
   */
  pendingHead(limit: number): PendingHead {
    this.pendingHeadStatement ??= this.db.prepare(
      `SELECT count(*) AS scans, count(DISTINCT reference) AS "references", coalesce(sum(bytes), 0) AS scanBytes, min(id) AS firstId, max(id) AS lastId
         FROM (SELECT id, reference, bytes FROM scan_rows WHERE state = 'pending' AND ${indexedState()} ORDER BY id LIMIT ?)`,
    );
    return this.pendingHeadStatement.get(limit) as PendingHead;
  }
  private pendingHeadStatement: Database.Statement | undefined;

  /**
   * Writes a new `ready` batch (its JSON array `bytes` long) and holds the scans in `hold` with
   * their reasons, in one transaction. The batch's scans are `scanIds`, or `range`: every pending
   * scan from `range.first` to `range.last`, `range.count` of them (from {@link pendingHead}).
   * With neither, or none in them, only the holds are written.
   * `scanBytes`, the sum of the scans' stored lengths, saves reading them again for the totals.
   * `gapless` says `scanIds` are every pending scan from the first id to the last (packScans
   * knows): they are then moved by that id range instead of by the list of ids. Either way every
   * scan must move, or nothing is written.
   *
   * @returns the new batch, or undefined when there is no scan to batch.
   * @throws GatewayError `SCANGW_E_BUFFER` when the scans that would move are not exactly
   *   `scanIds` or `range.count` (one of them is not pending, or a range claimed gapless holds others).
   */
  writeBatch(opts: {
    mode: BatchMode;
    scanIds?: readonly number[];
    range?: { first: number; last: number; count: number };
    bytes: number;
    scanBytes?: number;
    gapless?: boolean;
    nowIso: string;
    hold?: readonly { id: number; reason: string }[];
  }): BatchRow | undefined {
    const ids = opts.scanIds ?? [];
    const range = opts.range ?? (opts.gapless && ids.length > 0 ? { first: ids[0]!, last: ids[ids.length - 1]!, count: ids.length } : undefined);
    const count = range ? range.count : ids.length;
    return this.db.transaction(() => {
      if (opts.hold && opts.hold.length > 0) {
        const hold = this.db.prepare(`UPDATE scan_rows SET state = 'held', failure_reason = ? WHERE id = ?`);
        for (const o of opts.hold) hold.run(o.reason, o.id);
      }
      if (count === 0) return undefined;
      // An SFTP batch is stored as mode 'presigned' with route 'sftp': the `mode` column's CHECK
      // cannot take 'sftp' (see the SFTP delivery migration in migrations.ts).
      const info = this.db
        .prepare(`INSERT INTO batches (mode, route, state, scan_count, bytes, created_at) VALUES (?, ?, 'ready', ?, ?, ?)`)
        .run(opts.mode === 'sftp' ? 'presigned' : opts.mode, opts.mode === 'sftp' ? 'sftp' : null, count, opts.bytes, opts.nowIso);
      const batchId = Number(info.lastInsertRowid);
      // One set-based statement: per-row updates were most of the drain's CPU. The counting
      // triggers skip pending -> batched (migration 10): the totals move once, here.
      const moved = range
        ? this.db
            .prepare(`UPDATE scan_rows SET state = 'batched', batch_id = ? WHERE id BETWEEN ? AND ? AND state = 'pending'`)
            .run(batchId, range.first, range.last).changes
        : this.db
            .prepare(`UPDATE scan_rows SET state = 'batched', batch_id = ? WHERE id IN (SELECT value FROM json_each(?)) AND state = 'pending'`)
            .run(batchId, JSON.stringify(ids)).changes;
      if (moved !== count) {
        throw new GatewayError(ErrorCodes.BUFFER, `writeBatch: ${moved} scans would have moved for the ${count} given; nothing was batched`);
      }
      const sum = opts.scanBytes ?? (this.db.prepare(`SELECT coalesce(sum(bytes), 0) FROM scan_rows WHERE batch_id = ?`).pluck().get(batchId) as number);
      this.db.prepare(`UPDATE buffer_totals SET pending_scans = pending_scans - ?, pending_bytes = pending_bytes - ? WHERE id = 1`).run(moved, sum);
      return this.batch(batchId);
    }).immediate();
  }

  /**
   * Runs `fn` in one transaction (a savepoint when nested): a read through {@link pendingScans}
   * and the {@link writeBatch} that follows it see the same buffer. `fn` must be synchronous.
   *
   * Every write transaction of the store (and of retention) begins IMMEDIATE: it takes the write
   * lock before its first read. A second writer on the file (`scan-gateway replay`) then waits for
   * it (`busy_timeout`) instead of committing between its read and its write, which would fail
   * the daemon's write with SQLITE_BUSY_SNAPSHOT (a WAL reader cannot write from a stale
   * snapshot, and no busy handler helps that).
   */
  atomically<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  /** The exact bytes sent for a batch: its scans' stored JSON, in id order, as one array. */
  batchBody(batchId: number): string {
    const bodies = this.db.prepare(`SELECT b.body FROM scan_rows r JOIN scan_bodies b ON b.id = r.id WHERE r.batch_id = ? ORDER BY r.id`).pluck().all(batchId) as string[];
    return `[${bodies.join(',')}]`;
  }

  /**
   * One page of a batch's body, for streaming it without building it whole (SFTP; the
   * pre-signed PUT): the stored JSON of at most `limit` of its scans with an id above `afterId`, in
   * id order, joined by commas, as the bytes to send (with a comma before the first with
   * `leadingComma`: a page that does not start the array); `lastId` is the id to go on after,
   * `scans` how many it holds. Undefined when no scan of the batch is left after `afterId`. Each call is a
   * short statement of its own, so the connection is free for intake between pages.
   *
   * SQLite joins the page and hands it over as one blob: no row objects, no JavaScript string per
   * scan, no UTF-8 decoding and encoding again of bytes that are only passed on (measured: the
   * drain's body reading was about a tenth of the gateway's CPU as rows joined in JavaScript).
   */
  batchBodyPage(batchId: number, afterId: number, limit: number, leadingComma = false): { lastId: number; scans: number; bytes: Buffer } | undefined {
    this.bodyPageStatement ??= this.db.prepare(
      `SELECT max(id) AS lastId, count(*) AS scans, CAST(? || group_concat(body, ',' ORDER BY id) AS BLOB) AS bytes
         FROM (SELECT r.id, b.body FROM scan_rows r JOIN scan_bodies b ON b.id = r.id WHERE r.batch_id = ? AND r.id > ? ORDER BY r.id LIMIT ?)`,
    );
    const page = this.bodyPageStatement.get(leadingComma ? ',' : '', batchId, afterId, limit) as { lastId: number | null; scans: number; bytes: Buffer | null };
    return page.scans === 0 || page.lastId === null || page.bytes === null ? undefined : { lastId: page.lastId, scans: page.scans, bytes: page.bytes };
  }
  private bodyPageStatement: Database.Statement | undefined;

  /** The SFTP batch whose remote file has the name `fileName` (the last part of its `remotePath`). */
  batchByRemoteName(fileName: string): BatchRow | undefined {
    if (fileName.includes('/')) return undefined;
    return this.db
      .prepare(`SELECT ${BATCH_COLUMNS} FROM batches WHERE remote_path IS NOT NULL AND (remote_path = ? OR remote_path LIKE ? ESCAPE '\\') ORDER BY id DESC LIMIT 1`)
      .get(fileName, `%/${fileName.replace(/[\\%_]/g, (c) => `\\${c}`)}`) as BatchRow | undefined;
  }

  /**
   * The SFTP batch ended `transferred` (no word from the service yet) that holds every one of
   * `references`, newest first; undefined when none does. The scans are found by their references
   * (index `scans_reference`), so the cost grows with the scans that carry those references, not
   * with the transferred batches: a status event of another gateway is checked against it
   * (delivery/status-events.ts), and a search through every transferred batch's scans took 17 ms
   * per event with 500 batches of 200 scans.
   */
  transferredBatchOfReferences(references: readonly string[]): BatchRow | undefined {
    if (references.length === 0) return undefined;
    const unique = [...new Set(references)];
    const id = this.db
      .prepare(
        // CROSS JOIN keeps this order (references → scans → batches): left to itself the planner
        // starts from the done batches and reads every one's scans.
        `SELECT s.batch_id FROM json_each(?) r CROSS JOIN scan_rows s ON s.reference = r.value CROSS JOIN batches b ON b.id = s.batch_id
          WHERE b.route = 'sftp' AND b.state = 'done' AND b.upstream_state = 'transferred'
          GROUP BY s.batch_id HAVING count(DISTINCT s.reference) = ?
          ORDER BY s.batch_id DESC LIMIT 1`,
      )
      .pluck()
      .get(JSON.stringify(unique), unique.length) as number | undefined;
    return id === undefined ? undefined : this.batch(id);
  }

  batch(id: number): BatchRow | undefined {
    return this.db.prepare(`SELECT ${BATCH_COLUMNS} FROM batches WHERE id = ?`).get(id) as BatchRow | undefined;
  }

  batchesInState(...states: BatchState[]): BatchRow[] {
    return this.db
      .prepare(`SELECT ${BATCH_COLUMNS} FROM batches WHERE state IN (${states.map(() => '?').join(',')}) ORDER BY id`)
      .all(...states) as BatchRow[];
  }

  /** The newest batch that carries `requestId` (contract §2.6, §2.7), whatever its state. */
  batchByRequestId(requestId: string): BatchRow | undefined {
    return this.db.prepare(`SELECT ${BATCH_COLUMNS} FROM batches WHERE request_id = ? ORDER BY id DESC LIMIT 1`).get(requestId) as BatchRow | undefined;
  }

  /**
   * Status events: the next offset to read of each partition of `topic`, as stored by
   * {@link saveEventPosition}; a partition never read is absent.
   */
  eventPositions(topic: string): Map<number, bigint> {
    const rows = this.db.prepare(`SELECT partition, next_offset AS next FROM status_event_positions WHERE topic = ?`).all(topic) as { partition: number; next: string }[];
    return new Map(rows.map((r) => [r.partition, BigInt(r.next)]));
  }

  /** Stores the next offset to read of one partition; called in the transaction that applied the events before it. */
  saveEventPosition(topic: string, partition: number, next: bigint, nowIso: string): void {
    this.db
      .prepare(
        `INSERT INTO status_event_positions (topic, partition, next_offset, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (topic, partition) DO UPDATE SET next_offset = excluded.next_offset, updated_at = excluded.updated_at`,
      )
      .run(topic, partition, next.toString(), nowIso);
  }

  recentBatches(limit: number): BatchRow[] {
    return this.db.prepare(`SELECT ${BATCH_COLUMNS} FROM batches ORDER BY id DESC LIMIT ?`).all(limit) as BatchRow[];
  }

  /**
   * Updates the named columns of a batch (camelCase keys of BatchRow). With `possibleDuplicate`,
   * the same transaction counts the batch as possibly sent twice (its upload's answer was lost and
   * it is sent again): `batches.possible_duplicate` and the lifetime counters both grow.
   */
  updateBatch(id: number, fields: Partial<Omit<BatchRow, 'id' | 'possibleDuplicate'>>, opts: { possibleDuplicate?: boolean } = {}): void {
    const entries = Object.entries(fields);
    const sets = entries.map(([k]) => `${k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)} = ?`);
    if (opts.possibleDuplicate) sets.push('possible_duplicate = possible_duplicate + 1');
    if (sets.length === 0) return;
    const update = () => this.db.prepare(`UPDATE batches SET ${sets.join(', ')} WHERE id = ?`).run(...entries.map(([, v]) => v), id);
    if (!opts.possibleDuplicate) {
      update();
      return;
    }
    this.db.transaction(() => {
      update();
      const scans = (this.db.prepare(`SELECT scan_count FROM batches WHERE id = ?`).pluck().get(id) as number | undefined) ?? 0;
      this.addCounter('possibleDuplicateUploads', 1);
      this.addCounter('possibleDuplicateScans', scans);
    }).immediate();
  }

  private addCounter(name: string, by: number): void {
    this.db.prepare(`INSERT INTO counters (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = value + excluded.value`).run(name, by);
  }

  /** Lifetime counts of uploads (and their scans) that were sent again after their answer was lost. */
  possibleDuplicates(): { uploads: number; scans: number } {
    const rows = this.db.prepare(`SELECT name, value FROM counters WHERE name LIKE 'possibleDuplicate%'`).all() as { name: string; value: number }[];
    const get = (n: string) => rows.find((r) => r.name === n)?.value ?? 0;
    return { uploads: get('possibleDuplicateUploads'), scans: get('possibleDuplicateScans') };
  }

  /**
   * Halves a batch the service refused as too large (413): the newer half goes back to pending and
   * the batch is sent again without any address it had. Answers false for a single scan.
   */
  splitBatch(id: number): boolean {
    return this.db.transaction(() => {
      const ids = this.db.prepare(`SELECT id FROM scan_rows WHERE batch_id = ? ORDER BY id`).pluck().all(id) as number[];
      if (ids.length < 2) return false;
      const keep = ids.slice(0, Math.ceil(ids.length / 2));
      const release = ids.slice(keep.length);
      const reset = this.db.prepare(`UPDATE scan_rows SET state = 'pending', batch_id = NULL WHERE id = ?`);
      for (const sid of release) reset.run(sid);
      const sum = (this.db.prepare(`SELECT sum(bytes) FROM scan_rows WHERE batch_id = ?`).pluck().get(id) as number) ?? 0;
      this.updateBatch(id, {
        scanCount: keep.length,
        bytes: arrayBytes(keep.length, sum),
        state: 'ready',
        requestId: null,
        presignedUrl: null,
        presignedExpiresAt: null,
        putStartedAt: null,
        nextAttemptAt: 0,
      });
      return true;
    }).immediate();
  }

  /** Holds a batch the service refused for good (a 4xx other than 401/408/413/429): kept, never dropped. */
  holdBatch(id: number, error: string): void {
    this.db.transaction(() => {
      this.updateBatch(id, { state: 'held', lastError: error });
      this.db.prepare(`UPDATE scan_rows SET state = 'held', failure_reason = ? WHERE batch_id = ?`).run(error, id);
    }).immediate();
  }

  /**
   * Records a terminal status (contract §2.8): each failure's reason on the scan with that
   * reference, the other scans delivered. The delivered scans' rows are not written: a `batched`
   * row of a done batch is delivered (migration 13, src/buffer/scan-state.ts). When the batch
   * becomes done its batched scans are counted delivered here, once (buffer_totals,
   * scan_state_counts); a scan moved on from there (refused, now or in a report on a batch already
   * done, such as an SFTP batch `transferred`) is counted by the triggers as leaving `delivered`.
   */
  finishBatch(
    id: number,
    status: { state: string; description?: string | undefined; processed?: number | undefined; failed?: number | undefined; failures?: { reference: string; reason: string }[] | undefined },
    nowIso: string,
  ): void {
    this.db.transaction(() => {
      const wasDone = this.batch(id)?.state === 'done';
      this.updateBatch(id, {
        state: 'done',
        upstreamState: status.state,
        description: status.description ?? null,
        processed: status.processed ?? null,
        failed: status.failed ?? null,
        finishedAt: nowIso,
        // An error on the way (a 429 to a status check, say) is history once the batch is done.
        lastError: null,
      });
      // One walk of the batch's scans counts the batched ones (delivered from now on, which no
      // trigger counts) and those in any other state but delivered (rare; written below).
      const moving = this.db
        .prepare(
          `SELECT count(*) FILTER (WHERE state = 'batched') AS n, coalesce(sum(bytes) FILTER (WHERE state = 'batched'), 0) AS bytes,
                  count(*) FILTER (WHERE state NOT IN ('batched', 'delivered')) AS others
             FROM scan_rows WHERE batch_id = ?`,
        )
        .get(id) as { n: number; bytes: number; others: number };
      if (!wasDone && moving.n > 0) {
        this.db.prepare(`UPDATE buffer_totals SET undelivered_scans = undelivered_scans - ?, undelivered_bytes = undelivered_bytes - ? WHERE id = 1`).run(moving.n, moving.bytes);
        this.db.prepare(`INSERT INTO scan_state_counts (state, scans) VALUES ('delivered', ?) ON CONFLICT (state) DO UPDATE SET scans = scans + excluded.scans`).run(moving.n);
      }
      const failures = status.failures ?? [];
      if (status.state === 'Failed' && failures.length === 0) {
        this.db.prepare(`UPDATE scan_rows SET state = 'failed', failure_reason = ? WHERE batch_id = ?`).run(status.description ?? 'batch failed', id);
        return;
      }
      if (moving.others > 0) this.db.prepare(`UPDATE scan_rows SET state = 'delivered' WHERE batch_id = ? AND state NOT IN ('batched', 'delivered')`).run(id);
      const fail = this.db.prepare(`UPDATE scan_rows SET state = 'failed', failure_reason = ? WHERE batch_id = ? AND reference = ?`);
      for (const f of failures) fail.run(f.reason, id, f.reference);
    }).immediate();
  }

  /** When the latest batch was uploaded (ISO 8601), or null before the first; by index (migration 3). */
  lastUploadAt(): string | null {
    return (this.db.prepare(`SELECT max(uploaded_at) FROM batches`).pluck().get() as string | null) ?? null;
  }

  /** Scan counts by state; dead letters that were replayed are counted as `replayed`, not `failed`/`held`. */
  scanCounts(): Record<string, number> {
    const counts: Record<string, number> = {};
    // Kept by triggers (migration 3): a GROUP BY over a month of delivered scans blocked the event
    // loop for about 150 ms per million rows on every health refresh.
    const totals = this.totals();
    if (totals.pendingScans > 0) counts.pending = totals.pendingScans;
    if (totals.undeliveredScans > totals.pendingScans) counts.batched = totals.undeliveredScans - totals.pendingScans;
    for (const r of this.db.prepare(`SELECT state, scans AS n FROM scan_state_counts WHERE scans > 0`).all() as { state: string; n: number }[]) counts[r.state] = r.n;
    // INDEXED BY: for the GROUP BY the planner otherwise walks scans_state, every row of it.
    const replayed = this.db.prepare(`SELECT state, count(*) AS n FROM scan_rows INDEXED BY scans_replayed WHERE replayed_by IS NOT NULL GROUP BY state`).all() as { state: string; n: number }[];
    for (const r of replayed) {
      counts[r.state] = (counts[r.state] ?? 0) - r.n;
      if (counts[r.state] === 0) delete counts[r.state];
      counts.replayed = (counts.replayed ?? 0) + r.n;
    }
    return counts;
  }

  /** The latest failed scans (not yet replayed) and rejected reads, newest first, for people. */
  recentProblems(limit: number): { kind: 'failed' | 'rejected'; inputId: string; reference?: string; reason: string; raw: Buffer; at: string; origin?: string }[] {
    return this.db
      .prepare(
        // Each part limited before the union and the join, each by an index in reverse (the latest
        // failed and held scans by scan id, the latest rejections by read id): sorting every dead
        // letter with its raw read took about 50 ms at 10,000 of them, on each health refresh.
        `SELECT * FROM (
           SELECT 'failed' AS kind, r.input_id AS inputId, s.reference AS reference, s.failure_reason AS reason, r.raw AS raw, r.received_at AS at, r.origin AS origin, r.id AS rid
             FROM (SELECT * FROM (SELECT id, read_id, reference, failure_reason FROM scan_rows WHERE state = 'failed' AND ${indexedState()} AND replayed_by IS NULL ORDER BY id DESC LIMIT ?)
                   UNION ALL
                   SELECT * FROM (SELECT id, read_id, reference, failure_reason FROM scan_rows WHERE state = 'held' AND ${indexedState()} AND replayed_by IS NULL ORDER BY id DESC LIMIT ?)) s
             JOIN reads r ON r.id = s.read_id
           UNION ALL
           SELECT * FROM (SELECT 'rejected', input_id, NULL, reason, raw, received_at, origin, id FROM reads WHERE outcome = 'rejected' ORDER BY id DESC LIMIT ?)
         ) ORDER BY rid DESC LIMIT ?`,
      )
      .all(limit, limit, limit, limit) as { kind: 'failed' | 'rejected'; inputId: string; reference?: string; reason: string; raw: Buffer; at: string; origin?: string }[];
  }

  /**
   * Whether the disk has room again after SQLITE_FULL: writes 64 KiB and rolls back. Answers false
   * while SQLite still reports the disk full; other errors are thrown.
   */
  probeSpace(): boolean {
    try {
      this.db.transaction(() => {
        this.db.prepare(`INSERT INTO space_probe (pad) VALUES (zeroblob(65536))`).run();
        throw ROLLBACK;
      }).immediate();
    } catch (err) {
      if (err === ROLLBACK) return true;
      if (isDiskFull(err)) return false;
      throw err;
    }
    return true;
  }

  /**
   * Queues the new scan of a replayed dead letter as pending (src/buffer/replay.ts) and marks what
   * it replaces: the failed or held scan `replaces.scanId` (`replayed_by`), or else the rejected
   * read, which becomes a scan read with `reason` as its audit note. Runs inside the caller's
   * transaction. Answers the new scan's id.
   */
  queueReplayedScan(
    replaces: { scanId: number | null; readId: number },
    scan: { dcpKey: string; reference: string; timeUtc: string; body: string },
    reason: string,
    nowMs: number,
  ): number {
    const st = (this.replayStatements ??= {
      markScan: this.db.prepare(`UPDATE scan_rows SET replayed_by = ? WHERE id = ? AND replayed_by IS NULL`),
      markRead: this.db.prepare(`UPDATE reads SET outcome = 'scan', dcp_key = ?, reason = ? WHERE id = ? AND outcome = 'rejected'`),
    });
    const newId = this.insertScan(replaces.readId, scan.dcpKey, scan.reference, scan.timeUtc, scan.body, Buffer.byteLength(scan.body), nowMs);
    if (replaces.scanId !== null) st.markScan.run(newId, replaces.scanId);
    else st.markRead.run(scan.dcpKey, reason, replaces.readId);
    return newId;
  }

  private replayStatements: { markScan: Database.Statement; markRead: Database.Statement } | undefined;

  /**
   * Inserts one scan as the schema stores it (migration 12): its row in `scan_rows` and its JSON
   * (`bytes` long in UTF-8) in `scan_bodies` under the same id. Runs inside the caller's
   * transaction; the only place scans are written, for intake and replay alike. Answers the id.
   */
  private insertScan(readId: number | bigint, dcpKey: string, reference: string, timeUtc: string, body: string, bytes: number, nowMs: number): number {
    this.scanInserts ??= {
      row: this.db.prepare(`INSERT INTO scan_rows (read_id, dcp_key, reference, time_utc, bytes, created_at) VALUES (?, ?, ?, ?, ?, ?)`),
      body: this.db.prepare(`INSERT INTO scan_bodies (id, body) VALUES (?, ?)`),
    };
    const id = this.scanInserts.row.run(readId, dcpKey, reference, timeUtc, bytes, nowMs).lastInsertRowid;
    this.scanInserts.body.run(id, body);
    return Number(id);
  }

  private scanInserts: { row: Database.Statement; body: Database.Statement } | undefined;

  close(): void {
    if (this.db.open) this.db.close();
  }
}
