import { lstat } from 'node:fs/promises';
import { basename } from 'node:path';
import type { FilesInputConfig } from './schema.js';
import { ErrorCodes, GatewayError, isTooLargeForBuffer } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { InputProgress, IntakeItem, SubmitResult } from '../types.js';
import type { FileChunk, FileSink } from './file-sink.js';
import { type GrowthWatch, hashRange } from './file-growth.js';
import { moveToProcessed } from './file-moves.js';
import type { FileEntry, TakeOutcome } from './file-queue.js';
import type { IngestLedger } from './ingest-ledger.js';
import type { InputTimers } from './input-timers.js';
import { FileRejects } from './reject-file.js';
import { openInboxFile, type OpenedFile } from './safe-open.js';
import { checkCsvFile } from './parse-csv.js';
import { csvFormatOf, parseInboxFile } from './parse-inbox.js';
import type { Clock } from '../../clock.js';

export { parseInboxFile } from './parse-inbox.js';

/** Thrown through a parse to end it when the input stops between two chunks of a file. */
const STOPPED = Symbol('input stopped');

/** What {@link FileTaker} needs: the input's config and the narrow parts it writes to. */
export interface FileTakerOptions {
  config: FilesInputConfig;
  /** The watched folder, absolute and normalised (`processed/` and `failed/` are under it). */
  dir: string;
  sink: FileSink;
  /** Content hashes of files stored within `rememberFilesDays` (loaded by the input at start). */
  ledger: IngestLedger;
  /** Where a file moved to `processed/` is handed on, to be watched for growth. */
  growth: GrowthWatch;
  log: Logger;
  /** Clock for `receivedAt` and the `processed/YYYY-MM-DD` folder. */
  now: Clock;
  /** Cuts known secrets out of the `failed/*.error.txt` text. */
  scrub: ((text: string) => string) | undefined;
  timers: InputTimers;
  /** Back-pressure: while true, the next chunk of a file waits. */
  paused: () => boolean;
}

/**
 * The processing of one file of a files input: waits until a file found by a listing is stable,
 * opens it safely (a regular file only, through {@link openInboxFile}), hashes it, parses it as a
 * stream and commits it in chunks of `FILE_CHUNK_ROWS` (file-format.ts) items (each chunk one submit and one
 * transaction recording how far the file is committed, so a restart goes on after its last
 * committed chunk), then moves it to `processed/YYYY-MM-DD/` and hands it to the growth watch.
 *
 * A file over `maxFileBytes`, one that is no regular file, or one that cannot be read or parsed
 * at all goes to `failed/` with a `<name>.error.txt`, after an input-level rejection saying the
 * same was committed (counted; listed by `failures`). A file whose content was stored within
 * `rememberFilesDays` goes to `processed/`, counted as a rejection naming the earlier file
 * (both through {@link FileRejects}).
 * A chunk the buffer refuses is retried with backoff while the file keeps its place.
 */
export class FileTaker {
  private readonly config: FilesInputConfig;
  private readonly id: string;
  private readonly dir: string;
  private readonly sink: FileSink;
  private readonly ledger: IngestLedger;
  private readonly growth: GrowthWatch;
  private readonly log: Logger;
  private readonly now: Clock;
  private readonly scrub: ((text: string) => string) | undefined;
  private readonly timers: InputTimers;
  private readonly paused: () => boolean;
  private readonly rejects: FileRejects;
  private progressNow: InputProgress | undefined;

  constructor(options: FileTakerOptions) {
    this.config = options.config;
    this.id = options.config.id;
    this.dir = options.dir;
    this.sink = options.sink;
    this.ledger = options.ledger;
    this.growth = options.growth;
    this.log = options.log;
    this.now = options.now;
    this.scrub = options.scrub;
    this.timers = options.timers;
    this.paused = options.paused;
    this.rejects = new FileRejects({
      inputId: this.id,
      dir: this.dir,
      sink: this.sink,
      log: this.log,
      now: this.now,
      scrub: this.scrub,
    });
  }

  /** The file being read and committed in chunks (rows committed so far, its size in bytes), for the status. */
  get progress(): InputProgress | undefined {
    return this.progressNow;
  }

  /**
   * Takes one file as far as it goes now (see the class); never throws for trouble with the file
   * itself (a fault it cannot sort is the queue's to retry).
   */
  async take(entry: FileEntry): Promise<TakeOutcome> {
    const { path } = entry;
    const name = basename(path);
    if (entry.failure)
      return this.rejects.moveFailed(
        entry,
        entry.failure.reason,
        entry.failure.target,
        entry.failure.stored,
      );
    if (entry.checkStable) {
      const stable = await this.waitUntilStable(path);
      if (stable === 'stopped') return 'stopped';
      if (stable === 'gone') return 'done';
      entry.checkStable = false;
    }

    if (!entry.committed) {
      const receivedAt = new Date(this.now());
      let opened: OpenedFile;
      try {
        // The one way an inbox file is opened: a regular file only, never through a link, never
        // waiting on a FIFO (safe-open.ts).
        opened = await openInboxFile(path, name, {
          allowHardLinks: this.config.allowHardLinks,
          inputId: this.id,
        });
      } catch (err) {
        return this.rejects.cannotTake(entry, err);
      }
      let outcome: TakeOutcome | 'committed';
      try {
        outcome = await this.takeFile(entry, opened, receivedAt);
      } finally {
        this.progressNow = undefined;
        await opened.handle.close().catch(() => undefined);
      }
      if (outcome !== 'committed') return outcome;
    }
    return this.moveProcessed(entry);
  }

  /**
   * Hashes, parses and commits one opened file in chunks (`FILE_CHUNK_ROWS` (file-format.ts) items per
   * submit and transaction, each recording the file's progress), going on after the chunks a
   * crash left committed. Reads bytes `[0, size)` as found when opened (the bytes hashed); what a
   * writer appends meanwhile is the growth watch's. Answers 'committed' once its last chunk is.
   */
  private async takeFile(
    entry: FileEntry,
    opened: OpenedFile,
    receivedAt: Date,
  ): Promise<TakeOutcome | 'committed'> {
    const name = basename(entry.path);
    const { handle, stats } = opened;
    const size = stats.size;
    const remember = this.config.rememberFilesDays > 0;
    let sha256: string;
    try {
      if (size > this.config.maxFileBytes) {
        throw new GatewayError(
          ErrorCodes.INPUT,
          `file of ${size} bytes is larger than maxFileBytes (${this.config.maxFileBytes}) of input ${this.id}; split it, or raise maxFileBytes`,
          { details: { file: name } },
        );
      }
      sha256 = await hashRange(handle, 0, size);
    } catch (err) {
      return this.rejects.cannotTake(entry, err, handle);
    }
    const earlier = remember ? this.ledger.find(sha256) : undefined;
    if (earlier) return this.rejects.seenBefore(entry, sha256, earlier, receivedAt, handle);

    const before = this.sink.fileProgress(this.id, sha256);
    entry.stored = { size, mtimeMs: stats.mtimeMs };
    if (remember && before?.complete === true) {
      // Its last chunk committed before a restart, the move did not happen: only the move is left.
      this.log.warn(
        { file: name, sha256 },
        'file with this content was stored before; not stored again',
      );
      entry.committed = true;
      await this.ledger
        .record(sha256, name)
        .catch((err: unknown) =>
          this.log.warn({ err, file: name }, 'cannot write the ingested-files ledger'),
        );
      return 'committed';
    }
    const skip = before && !before.complete ? before.items : 0;
    if (skip > 0)
      this.log.info(
        { file: name, sha256, items: skip },
        'file was partly stored before a restart; going on after its last committed chunk',
      );

    const tally = { items: skip, seen: 0, rejections: 0, scans: 0, known: true };
    this.progressNow = { file: name, rows: skip, bytes: size, startedAt: receivedAt.toISOString() };
    // One chunk is held back, so the last one goes as `final` (the file complete in its transaction).
    let held: IntakeItem[] | undefined;
    const commitHeld = async (final: boolean): Promise<void> => {
      const items = held ?? [];
      held = undefined;
      if (items.length === 0 && !(final && tally.items > 0)) return;
      await this.commitChunk(
        items,
        { inputId: this.id, hash: sha256, name, itemsBefore: tally.items, final, remember },
        tally,
      );
      if (this.progressNow) this.progressNow.rows = tally.items;
    };
    const out = async (items: IntakeItem[]): Promise<void> => {
      const from = tally.seen;
      tally.seen += items.length;
      if (tally.seen <= skip) return; // committed before a restart
      await commitHeld(false);
      held = from < skip ? items.slice(skip - from) : items;
    };
    const ctx = {
      inputId: this.id,
      fileName: name,
      receivedAt,
      maxReadLength: this.config.maxReadLength,
      sha256,
    };
    try {
      // A CSV can turn out unreadable as a whole late in the file (a quote never closed, a record
      // over 1 MiB): a first pass that commits nothing finds that, so such a file goes to failed/
      // with none of its rows stored, as before chunks, and dropping it again fixed stores each
      // row once. (lines, ndjson and json fail as a whole only before their first item.)
      const c = this.config;
      if (c.format === 'csv') await checkCsvFile(handle, ctx, csvFormatOf(c), { end: size });
      await parseInboxFile(this.config, handle, ctx, { end: size }, out);
      await commitHeld(true);
    } catch (err) {
      if (err === STOPPED) return 'stopped';
      return this.rejects.cannotTake(entry, err, handle, tally.items);
    }
    entry.committed = true;
    const reads = tally.items - skip - tally.rejections;
    this.log.info(
      {
        file: name,
        reads,
        ...(tally.known ? { scans: tally.scans } : {}),
        rejections: tally.rejections,
        bytes: size,
        ...(skip > 0 ? { resumedAfter: skip } : {}),
      },
      'file stored',
    );
    if (remember) {
      await this.ledger
        .record(sha256, name)
        .catch((err: unknown) =>
          this.log.warn({ err, file: name }, 'cannot write the ingested-files ledger'),
        );
    }
    return 'committed';
  }

  /**
   * Commits one chunk of a file, waiting as long as it takes: while the input is paused
   * (back-pressure) and while the buffer refuses it (quota, full disk: retried with backoff; the
   * file holds its place, and the files behind it wait). A chunk larger than the whole quota is
   * split; a single item that can never fit fails the file. Throws {@link STOPPED} when the input
   * stops meanwhile (the file stays; its committed chunks are recorded).
   */
  private async commitChunk(
    items: IntakeItem[],
    chunk: FileChunk,
    tally: { items: number; rejections: number; scans: number; known: boolean },
  ): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      while (this.paused()) if (!(await this.timers.sleep(250))) throw STOPPED;
      if (this.timers.stopping) throw STOPPED;
      let result: SubmitResult | void;
      try {
        result = await this.sink.submitChunk(items, chunk);
      } catch (err) {
        if (isTooLargeForBuffer(err)) {
          if (items.length <= 1) throw err;
          const half = Math.ceil(items.length / 2);
          await this.commitChunk(items.slice(0, half), { ...chunk, final: false }, tally);
          await this.commitChunk(
            items.slice(half),
            { ...chunk, itemsBefore: chunk.itemsBefore + half },
            tally,
          );
          return;
        }
        const delayMs = this.timers.backoff(attempt);
        this.log.error(
          {
            err,
            file: chunk.name,
            items: items.length,
            committed: chunk.itemsBefore,
            retryInMs: delayMs,
          },
          'buffer refused a chunk of the file; the file stays in the folder and the chunk is retried',
        );
        if (!(await this.timers.sleep(delayMs))) throw STOPPED;
        continue;
      }
      tally.items += items.length;
      tally.rejections += items.filter((i) => i.kind === 'rejection').length;
      if (result) {
        tally.rejections += result.outcomes.filter(
          (o, i) => o.outcome === 'rejected' && items[i]?.kind === 'read',
        ).length;
        tally.scans += result.outcomes.filter((o) => o.outcome === 'scan').length;
      } else {
        tally.known = false;
      }
      return;
    }
  }

  private async moveProcessed(entry: FileEntry): Promise<TakeOutcome> {
    const { path } = entry;
    const name = basename(path);
    try {
      const target = await moveToProcessed(path, this.dir, new Date(this.now()), entry.target);
      this.log.debug({ file: name, to: target }, 'file moved to processed');
      // A writer that paused longer than stableMs may still be appending: watch for growth.
      if (entry.stored) this.growth.watch(target, name, entry.stored.size, entry.stored.mtimeMs);
      return 'done';
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
        this.log.warn(
          { file: name },
          'stored file disappeared before it could be moved to processed/',
        );
        return 'done';
      }
      // Its rows are stored: only the move is retried, never the submit.
      this.log.error({ err, file: name }, 'cannot move stored file to processed/; retrying');
      return 'retry';
    }
  }

  /** Waits until size and mtime stay unchanged for `stableMs` (a file found at start may be half written). */
  private async waitUntilStable(path: string): Promise<'stable' | 'gone' | 'stopped'> {
    const stableMs = this.config.stableMs;
    let previous;
    try {
      // lstat: the entry itself (a link's target is never looked at; a link is reported when read).
      previous = await lstat(path);
    } catch {
      return 'gone';
    }
    if (!previous.isFile() || Date.now() - previous.mtimeMs >= stableMs) return 'stable';
    for (;;) {
      if (!(await this.timers.sleep(Math.max(stableMs, 50)))) return 'stopped';
      let current;
      try {
        current = await lstat(path);
      } catch {
        return 'gone';
      }
      if (current.size === previous.size && current.mtimeMs === previous.mtimeMs) return 'stable';
      previous = current;
    }
  }
}
