import type Database from 'better-sqlite3';
import { databaseFileBytes } from './disk-usage.js';
import type { ScanInsert } from './scan-insert.js';
import type { ContainerRecords } from './containers.js';
import type { CommittedFile, CommittedMessage, IntakeRecord } from './rows.js';

/**
 * What the write-ahead log may hold beyond the end of the database file (bytes) before a commit of
 * reads checkpoints it first (see {@link IntakeWrites.commitIntake}): 64 pages at 4 KiB.
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
    bytes +=
      r.raw.length +
      (r.scan ? (r.scan.bytes ?? 3 * r.scan.body.length) : 0) +
      3 *
        ((r.reason?.length ?? 0) +
          textLength(r.parents) +
          textLength(r.attributes && Object.entries(r.attributes).flat()));
    if (bytes > SMALL_COMMIT_BYTES) return false;
  }
  return true;
}

/**
 * The buffer's side of intake (src/intake/): commits groups of reads with their scans, the files
 * and MQTT messages they came in, and answers what intake asks before a commit (a file or message
 * committed before, a file's progress, the scans of the duplicate window). Built by
 * `BufferStore.open` on its connection; every statement is prepared once, here.
 */
export class IntakeWrites {
  private readonly read: Database.Statement;
  private readonly file: Database.Statement;
  private readonly progress: Database.Statement;
  private readonly progressDone: Database.Statement;
  private readonly message: Database.Statement;
  private readonly knownMessageStatement: Database.Statement;
  private readonly forgetMessagesStatement: Database.Statement;
  private readonly knownFileStatement: Database.Statement;
  private readonly fileProgressStatement: Database.Statement;
  private readonly recentScansStatement: Database.Statement;
  private readonly pageCount: Database.Statement;
  private readonly addCounter: Database.Statement;
  private pageSize: number | undefined;

  constructor(
    private readonly db: Database.Database,
    /** The buffer's file (`:memory:` has no log to checkpoint). */
    private readonly path: string,
    private readonly scans: ScanInsert,
    private readonly containers: ContainerRecords,
  ) {
    this.read = db.prepare(
      `INSERT INTO reads (input_id, received_at, raw, source_time, dcp_key, origin, outcome, reason, source_dcp_key, parents, attributes, input_level, leader_epoch, possible_duplicate)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.addCounter = db.prepare(
      `INSERT INTO counters (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = value + excluded.value`,
    );
    this.file = db.prepare(
      `INSERT OR IGNORE INTO files (input_id, hash, name, committed_at, items) VALUES (?, ?, ?, ?, ?)`,
    );
    this.progress = db.prepare(
      `INSERT INTO file_progress (input_id, hash, name, items, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (input_id, hash) DO UPDATE SET name = excluded.name, items = excluded.items, updated_at = excluded.updated_at`,
    );
    this.progressDone = db.prepare(`DELETE FROM file_progress WHERE input_id = ? AND hash = ?`);
    this.message = db.prepare(
      `INSERT OR REPLACE INTO mqtt_messages (input_id, packet_id, topic, payload_sha256, committed_at) VALUES (?, ?, ?, ?, ?)`,
    );
    this.knownMessageStatement = db.prepare(
      `SELECT 1 FROM mqtt_messages WHERE input_id = ? AND packet_id = ? AND topic = ? AND payload_sha256 = ?`,
    );
    this.forgetMessagesStatement = db.prepare(`DELETE FROM mqtt_messages WHERE input_id = ?`);
    this.knownFileStatement = db.prepare(`SELECT 1 FROM files WHERE input_id = ? AND hash = ?`);
    this.fileProgressStatement = db.prepare(
      `SELECT items FROM file_progress WHERE input_id = ? AND hash = ?`,
    );
    this.recentScansStatement = db.prepare(
      `SELECT dcp_key AS dcpKey, reference, time_utc AS timeUtc, created_at AS createdAt FROM scan_rows ORDER BY id DESC`,
    );
    this.pageCount = db.prepare('PRAGMA page_count').pluck();
  }

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
  commitIntake(
    records: readonly IntakeRecord[],
    nowMs: number,
    files: readonly CommittedFile[] = [],
    messages: readonly CommittedMessage[] = [],
    leaderEpoch?: number,
  ): void {
    if (
      this.path !== ':memory:' &&
      (!smallCommit(records) || this.bytesBeyondEnd() > CHECKPOINT_BEYOND_END_BYTES)
    )
      this.db.pragma('wal_checkpoint(PASSIVE)');
    const { read, file, progress, progressDone, message } = this;
    this.db
      .transaction(() => {
        let possibleDuplicates = 0;
        for (const r of records) {
          if (r.possibleDuplicate) possibleDuplicates++;
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
            r.attributes && Object.keys(r.attributes).length > 0
              ? JSON.stringify(r.attributes)
              : null,
            r.inputLevel ? 1 : 0,
            leaderEpoch ?? null,
            r.possibleDuplicate ? 1 : 0,
          );
          if (r.scan) {
            // Most scans are timed by their reception (no source time): the same instant, formatted once.
            const time =
              r.scan.instant.getTime() === r.receivedAt.getTime()
                ? receivedAt
                : r.scan.instant.toISOString();
            this.scans.run(
              info.lastInsertRowid,
              r.scan.dcpKey,
              r.scan.reference,
              time,
              r.scan.body,
              r.scan.bytes ?? Buffer.byteLength(r.scan.body),
              nowMs,
              r.raw,
              r.scan.gs1,
            );
          }
          if (r.containers) this.containers.write(r.containers);
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
        for (const m of messages)
          message.run(m.inputId, m.packetId, m.topic, m.payloadSha256, nowMs);
        // A lifetime count beside the batches' possible duplicates (counters), kept across restarts.
        if (possibleDuplicates > 0)
          this.addCounter.run('haPossibleDuplicateReads', possibleDuplicates);
      })
      .immediate();
  }

  /**
   * Bytes of the pages the write-ahead log holds beyond the end of the database file: what a
   * checkpoint must find new room for (`page_count` counts the log's pages, the file's size does
   * not). 0 when the file reaches as far or further (a vacuum not yet checkpointed).
   */
  bytesBeyondEnd(): number {
    this.pageSize ??= this.db.pragma('page_size', { simple: true }) as number;
    const pages = this.pageCount.get() as number;
    return Math.max(0, pages * this.pageSize - databaseFileBytes(this.path));
  }

  /**
   * The checkpoint the next {@link commitIntake} would run first, run now when the log holds more
   * than {@link CHECKPOINT_BEYOND_END_BYTES} beyond the database file's end: intake calls it once
   * the sources of a commit were acknowledged, so that the copy of the log into the database file
   * and its fsync are not between a read and its acknowledgement. The next commit still checks
   * and is refused on SQLITE_FULL: an error here (a full disk) is left to it, so it is ignored.
   * Nothing is done once the buffer is closed.
   */
  checkpointAfterCommit(): void {
    if (this.path === ':memory:' || !this.db.open) return;
    try {
      if (this.bytesBeyondEnd() > CHECKPOINT_BEYOND_END_BYTES)
        this.db.pragma('wal_checkpoint(PASSIVE)');
    } catch {
      // The next commit's own checkpoint meets the same error and refuses that commit.
    }
  }

  /**
   * Whether this message (same input, packet id, topic and payload) was committed before and its
   * identity not yet replaced by a later message under the same packet id, nor forgotten.
   */
  knownMessage(m: CommittedMessage): boolean {
    return (
      this.knownMessageStatement.get(m.inputId, m.packetId, m.topic, m.payloadSha256) !== undefined
    );
  }

  /**
   * Forgets the message identities of an input: its broker holds no session for it any more
   * (CONNACK without session present), so nothing committed before can be sent again. Answers the
   * rows removed.
   */
  forgetMessages(inputId: string): number {
    return this.forgetMessagesStatement.run(inputId).changes;
  }

  /**
   * Scans committed at or after `sinceMs` (`created_at`), newest first, at most `limit`: walks the
   * scans by id from the newest and stops at the first older one (ids follow commit order). What
   * intake rebuilds its duplicate window from at start.
   */
  recentScans(
    sinceMs: number,
    limit: number,
  ): { dcpKey: string; reference: string; timeUtc: string; createdAt: number }[] {
    const out: { dcpKey: string; reference: string; timeUtc: string; createdAt: number }[] = [];
    const rows = this.recentScansStatement.iterate() as IterableIterator<{
      dcpKey: string;
      reference: string;
      timeUtc: string;
      createdAt: number;
    }>;
    for (const row of rows) {
      if (row.createdAt < sinceMs || out.length >= limit) break;
      out.push(row);
    }
    return out;
  }

  /** Items committed so far of a file in progress (committed in chunks), or undefined when none is recorded. */
  fileProgress(inputId: string, hash: string): number | undefined {
    const row = this.fileProgressStatement.get(inputId, hash) as { items: number } | undefined;
    return row?.items;
  }

  /** Whether a file with this content hash was committed for this input before (and not yet pruned). */
  knownFile(inputId: string, hash: string): boolean {
    return this.knownFileStatement.get(inputId, hash) !== undefined;
  }
}
