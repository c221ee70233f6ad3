import { lstat, mkdir, opendir, readdir, readlink, stat, type FileHandle } from 'node:fs/promises';
import { basename, join, relative, resolve, sep } from 'node:path';
import { watch, type FSWatcher } from 'chokidar';
import type { FilesInputConfig } from '../../config/schema.js';
import { ErrorCodes, GatewayError, isGatewayError, isTooLargeForBuffer } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { FileChunk, InputAdapter, InputProgress, InputRejection, InputState, InputStatus, IntakeItem, IntakeSink, SubmitResult } from '../types.js';
import type { FileParseContext, ItemsOut } from './file-format.js';
import type { FILE_CHUNK_ROWS } from './file-format.js';
import { FILE_REJECTION_RAW_BYTES, GrowthWatch, hashRange, readRange } from './file-growth.js';
import { FAILED_DIR, failedTarget, moveToFailed, moveToProcessed, PROCESSED_DIR, processedTarget } from './file-moves.js';
import { IngestLedger } from './ingest-ledger.js';
import { openInboxFile, type OpenedFile } from './safe-open.js';
import type { ByteRange } from './parse-lines.js';
import { parseCsvFile } from './parse-csv.js';
import { parseJsonFile, parseNdjsonFile } from './parse-json.js';
import { parseLinesFile } from './parse-lines.js';

/**
 * `submit` with the options the buffer's Intake takes as its second argument (the file's content
 * hash, recorded in the commit's own transaction). Sinks without it ignore the extra argument.
 */

export interface FilesInputOptions {
  config: FilesInputConfig;
  sink: IntakeSink;
  logger: Logger;
  /** Clock for `receivedAt` and the `processed/YYYY-MM-DD` folder; defaults to the system clock. */
  now?: () => Date;
  /** Cuts known secrets out of the `failed/*.error.txt` text (the log's scrubber, issue 11). */
  scrub?: (text: string) => string;
  /** First delay before retrying a file (buffer refused it) or the folder, in ms; doubles. Default 1000. */
  retryBaseMs?: number;
  /** Longest retry delay, in ms. Default 30 000. */
  retryMaxMs?: number;
  /**
   * How often the folder itself is checked, in ms (default 2000): chokidar does not report the
   * watched folder being removed or replaced, or a network share going away.
   */
  folderCheckMs?: number;
  /**
   * How long a file moved to `processed/` is still watched for growth after its last change, in
   * ms (a writer that paused longer than `stableMs` and goes on appending). Default
   * {@link defaultGrowthWatchMs}.
   */
  growthWatchMs?: number;
}

/** How long a taken file is watched for growth: 10 × `stableMs`, at least 10 s. */
export function defaultGrowthWatchMs(stableMs: number): number {
  return Math.max(10_000, 10 * stableMs);
}

interface QueuedFile {
  path: string;
  /** Found by the start-up scan, not by chokidar's awaitWriteFinish: stability still to check. */
  checkStable: boolean;
  /** Its items are committed; only the move to processed/ is left. */
  committed: boolean;
  attempt: number;
  /** Size and mtime of the file as stored (the growth watch starts from there). */
  stored?: { size: number; mtimeMs: number };
  /** Where the move after the commit goes (named in a rejection already committed). */
  target?: string;
  /** Rejected as a whole (the rejection committed): only the move to `failed/` is left. */
  failure?: { reason: string; target: string; stored: number };
}

type Outcome = 'done' | 'again' | 'retry' | 'stopped';

/**
 * Most files queued (known) at once. Past it, further files stay in the folder unqueued (logged
 * once) and the folder is listed again once the queue has drained.
 */
export const MAX_QUEUED_FILES = 10_000;

/** Most sub-folder names remembered for their once-only warning; past it, no further warnings. */
export const MAX_SUBFOLDERS_WARNED = 1000;

/** Thrown through a parse to end it when the input stops between two chunks of a file. */
const STOPPED = Symbol('input stopped');

/** File-system errors that mean "this file cannot be read", as opposed to a passing I/O fault. */
const UNREADABLE_CODES = new Set(['EACCES', 'EPERM', 'EISDIR', 'ELOOP', 'ENAMETOOLONG', 'EFBIG']);

/**
 * Input adapter for dropped files: watches `config.dir` (not its sub-folders) with chokidar and
 * turns each file into reads: `lines` = one barcode per line, `csv` = header row then rows,
 * `ndjson` = one JSON read per line, `json` = an array of JSON reads.
 *
 * A file is taken once writing finished (size unchanged for `stableMs`); dotfiles, `*.tmp` and
 * `*.part` are ignored so a writer can drop a file atomically by renaming. Files are processed one
 * at a time in order of arrival (files present at start: oldest first).
 *
 * Only regular files are read, each opened once through {@link openInboxFile} (`O_NOFOLLOW |
 * O_NONBLOCK`, type checked on the open descriptor); every hash, parse and read of it goes through
 * that descriptor. A symbolic link (wherever it points), FIFO, socket or device goes to `failed/`
 * with a reason naming its kind, counted as a rejection; not a byte is read through it.
 *
 * A file is parsed as a stream and committed in chunks of {@link FILE_CHUNK_ROWS} items, each
 * chunk one submit and one transaction that also records how far the file is committed (by
 * content hash), so after a crash the file goes on after its last committed chunk: no row lost,
 * none stored twice. Memory holds a chunk or two, not the file. A chunk the buffer refuses (quota,
 * full disk) is retried with backoff while the file keeps its place (back-pressure); only a single
 * item larger than the whole quota fails the file. Once its last chunk committed the file is moved
 * to `processed/YYYY-MM-DD/`, where it is watched for growth for a while ({@link GrowthWatch}: a
 * writer that paused longer than `stableMs` may go on appending). A file over `maxFileBytes`, or
 * one that cannot be read or parsed at all, goes to `failed/` with a `<name>.error.txt` giving
 * the reason, after an input-level rejection saying the same was committed (counted, listed by
 * `failures`). Sub-folders are named once in a warning and not read.
 *
 * A file whose content (SHA-256) was committed within `rememberFilesDays` is not ingested again:
 * it is moved to `processed/`, counted as a rejection naming the earlier file. The hash goes to `<dir>/.ingested.json` after the
 * commit ({@link IngestLedger}), in each read's `origin.sha256`, and to the sink's submit (the
 * buffer records it in the same transaction as the rows, which also covers a crash between the
 * commit and the ledger write). Without that, such a crash re-reads the file once: at-least-once.
 *
 * `setPaused(true)` leaves new files in the folder until `setPaused(false)`.
 */
export class FilesInput implements InputAdapter {
  readonly id: string;
  readonly type = 'files';

  private readonly config: FilesInputConfig;
  /** `config.dir` normalised, so it compares equal to the paths chokidar reports. */
  private readonly dir: string;
  private readonly sink: IntakeSink;
  private readonly log: Logger;
  private readonly now: () => Date;
  private readonly scrub: ((text: string) => string) | undefined;
  private readonly retryBaseMs: number;
  private readonly retryMaxMs: number;
  private readonly folderCheckMs: number;
  private folderCheck: NodeJS.Timeout | undefined;
  /** Identity of the folder being watched; another inode at the same path means it was replaced. */
  private folderId: string | undefined;

  private state: InputState = 'starting';
  private lastError: string | undefined;
  private lastErrorAt: string | undefined;
  private watcher: FSWatcher | undefined;
  private watchAttempt = 0;
  private stopping = false;

  private readonly queue: QueuedFile[] = [];
  private readonly known = new Map<string, QueuedFile>();
  private current: QueuedFile | undefined;
  private draining: Promise<void> | undefined;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly sleepers = new Set<() => void>();
  private fileRetryPending = false;
  private readonly ledger: IngestLedger;
  private ledgerLoaded = false;
  private paused = false;
  private readonly growth: GrowthWatch;
  /** Sub-folders already warned about (by name). */
  private readonly subfoldersWarned = new Set<string>();
  /** Files were left unqueued at {@link MAX_QUEUED_FILES}: list the folder again once the queue drained. */
  private overflowed = false;
  /** The file being read and committed in chunks, for the status. */
  private progress: InputProgress | undefined;

  constructor(options: FilesInputOptions) {
    this.config = options.config;
    this.dir = resolve(options.config.dir);
    this.id = options.config.id;
    this.sink = options.sink;
    this.log = options.logger.child({ component: 'input.files', inputId: options.config.id });
    this.now = options.now ?? (() => new Date());
    this.scrub = options.scrub;
    this.retryBaseMs = options.retryBaseMs ?? 1000;
    this.retryMaxMs = options.retryMaxMs ?? 30_000;
    this.folderCheckMs = options.folderCheckMs ?? 2000;
    this.ledger = new IngestLedger(this.dir, this.config.rememberFilesDays, this.log, this.now);
    const stableMs = this.config.stableMs;
    this.growth = new GrowthWatch({
      inputId: this.id,
      dir: this.dir,
      format: this.config.format,
      stableMs,
      watchMs: options.growthWatchMs ?? defaultGrowthWatchMs(stableMs),
      pollMs: this.config.usePolling ? 1000 : Math.max(100, Math.min(500, Math.floor(stableMs / 2))),
      rememberFilesDays: this.config.rememberFilesDays,
      sink: this.sink,
      ledger: this.ledger,
      log: this.log,
      now: this.now,
      parse: (path, ctx, range) => this.parse(path, ctx, range),
      paused: () => this.paused,
      maxReadLength: this.config.maxReadLength,
    });
  }

  /** Back-pressure: while paused, files stay in the folder (a file being read waits before its next chunk). */
  setPaused(paused: boolean): void {
    if (this.paused === paused) return;
    this.paused = paused;
    if (this.state === 'up' || this.state === 'paused') this.state = paused ? 'paused' : 'up';
    this.log.info({ paused }, paused ? 'paused: new files stay in the folder' : 'resumed');
    if (!paused) this.kick();
  }

  /** Creates the folder if missing, starts watching and queues the files already there. A folder
   *  that cannot be watched makes the input `down` (retried with backoff), not a start failure. */
  async start(): Promise<void> {
    this.stopping = false;
    this.growth.start();
    await this.openWatcher();
  }

  /**
   * Stops watching; a chunk whose submit is in flight is finished before this resolves (a file whose
   * last chunk committed is moved). A file stopped between two chunks stays in the folder with its
   * committed chunks recorded: the next start goes on after them.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    for (const wake of this.sleepers) wake();
    await this.closeWatcher();
    await this.draining;
    await this.growth.stop();
    this.state = 'stopped';
  }

  status(): InputStatus {
    return {
      id: this.id,
      type: this.type,
      state: this.state,
      ...(this.state === 'down' && this.lastError !== undefined ? { lastError: this.lastError, lastErrorAt: this.lastErrorAt } : {}),
      source: this.config.dir,
      ...(this.progress ? { progress: { ...this.progress } } : {}),
    };
  }

  // ---- watching -------------------------------------------------------------------------------

  private async openWatcher(): Promise<void> {
    if (this.stopping) return;
    const dir = this.dir;
    try {
      await mkdir(join(dir, PROCESSED_DIR), { recursive: true });
      await mkdir(join(dir, FAILED_DIR), { recursive: true });
      const watcher = watch(dir, {
        depth: 0,
        ignoreInitial: true, // the start-up scan below orders existing files oldest first
        ignored: (path, stats) => this.isIgnored(path) || (path !== dir && stats?.isDirectory() === true && this.subfolderSeen(path)),
        awaitWriteFinish: this.config.stableMs > 0 ? { stabilityThreshold: this.config.stableMs, pollInterval: 100 } : false,
        usePolling: this.config.usePolling,
        // A link is reported as the link (lstat), never followed: it goes to failed/ unread.
        followSymlinks: false,
        // Polling a network share every 100 ms (chokidar's default) is needless load on the server.
        ...(this.config.usePolling ? { interval: 1000, binaryInterval: 1000 } : {}),
      });
      this.watcher = watcher;
      // One listener from the start: chokidar also reports single entries it cannot stat (a
      // symbolic link loop) as 'error', during the first scan too; only a folder that cannot be
      // listed fails the start, and an 'error' without a listener would be thrown.
      let ready = false;
      let failStart: ((err: unknown) => void) | undefined;
      watcher.on('error', (err) => {
        if (ready) void this.onWatchError(err);
        else void this.onWatchError(err, failStart);
      });
      await new Promise<void>((resolve, reject) => {
        failStart = reject;
        watcher.once('ready', () => {
          ready = true;
          resolve();
        });
      });
      watcher.on('add', (path) => this.enqueue(path, false));
      watcher.on('change', (path) => this.enqueue(path, false));
      watcher.on('unlink', (path) => this.forget(path));
      if (this.stopping) return;
      const folder = await stat(dir);
      this.folderId = `${folder.dev}:${folder.ino}`;
      this.folderCheck = setInterval(() => void this.checkFolder(), this.folderCheckMs);
      if (!this.ledgerLoaded) {
        await this.ledger.load();
        this.ledgerLoaded = true;
      }
      this.state = this.paused ? 'paused' : 'up';
      this.watchAttempt = 0;
      this.log.info({ dir, format: this.config.format, usePolling: this.config.usePolling }, 'watching folder');
      await this.scanExisting();
    } catch (err) {
      await this.watchFailed(err);
    }
  }

  private async checkFolder(): Promise<void> {
    try {
      const folder = await stat(this.dir);
      if (!folder.isDirectory()) throw new GatewayError(ErrorCodes.INPUT, 'is no longer a folder');
      if (`${folder.dev}:${folder.ino}` !== this.folderId) throw new GatewayError(ErrorCodes.INPUT, 'was replaced by another folder');
    } catch (err) {
      await this.watchFailed(err);
    }
  }

  private async closeWatcher(): Promise<void> {
    clearInterval(this.folderCheck);
    this.folderCheck = undefined;
    const watcher = this.watcher;
    this.watcher = undefined;
    await watcher?.close().catch((err: unknown) => this.log.warn({ err }, 'closing the folder watcher failed'));
  }

  /**
   * chokidar reports single-file trouble here too; only a folder we can no longer list is "down"
   * (before the watcher is ready: `failStart`, the start fails and is retried). An entry of the
   * folder that cannot be followed (a symbolic link loop) is queued, so it is reported.
   */
  private async onWatchError(err: unknown, failStart?: (err: unknown) => void): Promise<void> {
    try {
      await readdir(this.dir);
    } catch (dirErr) {
      if (failStart) failStart(dirErr);
      else await this.watchFailed(dirErr);
      return;
    }
    const path = (err as NodeJS.ErrnoException).path;
    if (typeof path === 'string' && relative(this.dir, path) === basename(path) && !this.isIgnored(path)) {
      this.log.warn({ err, file: basename(path) }, 'folder watcher cannot follow a file; trying to read it');
      this.enqueue(path, true);
      return;
    }
    this.log.warn({ err }, 'folder watcher reported an error');
  }

  private async watchFailed(err: unknown): Promise<void> {
    if (this.stopping || this.state === 'down') return;
    this.state = 'down';
    this.lastError = `${this.dir}: ${err instanceof Error ? err.message : String(err)}`;
    this.lastErrorAt = this.now().toISOString();
    const delayMs = this.backoff(this.watchAttempt++);
    this.log.warn({ err, dir: this.dir, retryInMs: delayMs }, 'cannot watch folder; retrying');
    await this.closeWatcher();
    this.after(delayMs, () => {
      this.state = 'connecting';
      void this.openWatcher();
    });
  }

  /**
   * Queues the entries already in the folder, oldest first (the order they arrived in), as they
   * are (lstat): a symbolic link, FIFO, socket or device is queued too, so it is reported and
   * moved to failed/ (never followed, never read); sub-folders are reported once and not read.
   */
  private async scanExisting(): Promise<void> {
    const found: { path: string; mtimeMs: number }[] = [];
    // Listed as a stream and at most MAX_QUEUED_FILES taken: a folder of a million files costs no
    // more memory than the queue's bound (the rest is listed again once these are taken; the order
    // of arrival then holds within each listing).
    for await (const entry of await opendir(this.dir)) {
      if (found.length + this.known.size >= MAX_QUEUED_FILES) {
        this.overflowed = true;
        break;
      }
      const path = join(this.dir, entry.name);
      if (this.isIgnored(path)) continue;
      if (entry.isDirectory()) {
        this.subfolderSeen(path);
        continue;
      }
      try {
        found.push({ path, mtimeMs: (await lstat(path)).mtimeMs });
      } catch {
        // Gone between listing and lstat: nothing to take.
      }
    }
    found.sort((a, b) => a.mtimeMs - b.mtimeMs || (a.path < b.path ? -1 : 1));
    for (const { path } of found) this.enqueue(path, true);
  }

  /**
   * A sub-folder of the watched folder (not `processed/` or `failed/`): its files are not read.
   * Warned about once per name, so files dropped into it by mistake do not go unnoticed.
   * Answers true (chokidar: ignore it).
   */
  private subfolderSeen(path: string): boolean {
    const rel = relative(this.dir, path);
    if (rel === '' || rel.includes(sep)) return true;
    if (rel === PROCESSED_DIR || rel === FAILED_DIR || this.subfoldersWarned.has(rel)) return true;
    if (this.subfoldersWarned.size >= MAX_SUBFOLDERS_WARNED) return true;
    this.subfoldersWarned.add(rel);
    this.log.warn({ folder: rel, dir: this.dir }, `sub-folder "${rel}" is not read; drop files into the folder itself (${this.dir})`);
    return true;
  }

  private isIgnored(path: string): boolean {
    const rel = relative(this.dir, path);
    if (rel === '') return false;
    const first = rel.split(sep)[0];
    if (first === PROCESSED_DIR || first === FAILED_DIR) return true;
    const name = basename(path);
    const lower = name.toLowerCase();
    return name.startsWith('.') || lower.endsWith('.tmp') || lower.endsWith('.part');
  }

  // ---- queue ----------------------------------------------------------------------------------

  private enqueue(path: string, checkStable: boolean): void {
    if (this.stopping || this.isIgnored(path) || this.known.has(path)) return;
    if (this.known.size >= MAX_QUEUED_FILES) {
      if (!this.overflowed) this.log.warn({ queued: this.known.size }, `more than ${MAX_QUEUED_FILES} files waiting; further files stay in the folder and are listed again once these are taken`);
      this.overflowed = true;
      return;
    }
    const entry: QueuedFile = { path, checkStable, committed: false, attempt: 0 };
    this.known.set(path, entry);
    this.queue.push(entry);
    this.kick();
  }

  /** The file was removed from the folder before we took it (an operator, or our own move). */
  private forget(path: string): void {
    const entry = this.known.get(path);
    if (!entry || entry === this.current) return;
    // A late unlink (chokidar delays them) must not drop a new file dropped under the same name.
    void lstat(path).then(
      () => undefined,
      () => {
        if (this.known.get(path) === entry && entry !== this.current) this.dropQueued(entry);
      },
    );
  }

  private dropQueued(entry: QueuedFile): void {
    this.known.delete(entry.path);
    const index = this.queue.indexOf(entry);
    if (index >= 0) this.queue.splice(index, 1);
  }

  private kick(): void {
    if (this.draining || this.stopping || this.paused || this.fileRetryPending || this.queue.length === 0) return;
    this.draining = this.drain()
      .catch((err: unknown) => this.log.error({ err }, 'file queue failed'))
      .finally(() => {
        this.draining = undefined;
        this.kick();
      });
  }

  private async drain(): Promise<void> {
    while (!this.stopping && !this.paused) {
      const entry = this.queue[0];
      if (!entry) {
        if (!this.overflowed) return;
        // Files were left in the folder at the queue's bound: list it again (they are queued now).
        this.overflowed = false;
        await this.scanExisting();
        continue;
      }
      this.current = entry;
      let outcome: Outcome;
      try {
        outcome = await this.processFile(entry);
      } catch (err) {
        // Not expected (processFile sorts its errors); retry with backoff rather than spin.
        this.log.error({ err, file: basename(entry.path) }, 'processing file failed; retrying');
        outcome = 'retry';
      } finally {
        this.current = undefined;
      }
      if (outcome === 'stopped') return;
      if (outcome === 'again') continue;
      if (outcome === 'retry') {
        // The head waits and so do the files behind it: order of arrival is kept.
        const delayMs = this.backoff(entry.attempt++);
        this.fileRetryPending = true;
        this.after(delayMs, () => {
          this.fileRetryPending = false;
          this.kick();
        });
        return;
      }
      this.dropQueued(entry);
    }
  }

  // ---- one file -------------------------------------------------------------------------------

  private async processFile(entry: QueuedFile): Promise<Outcome> {
    const { path } = entry;
    const name = basename(path);
    if (entry.failure) return this.moveFailed(entry, entry.failure.reason, entry.failure.target, entry.failure.stored);
    if (entry.checkStable) {
      const stable = await this.waitUntilStable(path);
      if (stable === 'stopped') return 'stopped';
      if (stable === 'gone') return 'done';
      entry.checkStable = false;
    }

    if (!entry.committed) {
      const receivedAt = this.now();
      let opened: OpenedFile;
      try {
        // The one way an inbox file is opened: a regular file only, never through a link, never
        // waiting on a FIFO (safe-open.ts).
        opened = await openInboxFile(path, name);
      } catch (err) {
        return this.readFailed(entry, err);
      }
      let outcome: Outcome | 'committed';
      try {
        outcome = await this.takeFile(entry, opened, receivedAt);
      } finally {
        this.progress = undefined;
        await opened.handle.close().catch(() => undefined);
      }
      if (outcome !== 'committed') return outcome;
    }
    return this.moveProcessed(entry);
  }

  /**
   * Hashes, parses and commits one opened file in chunks ({@link FILE_CHUNK_ROWS} items per
   * submit and transaction, each recording the file's progress), going on after the chunks a
   * crash left committed. Reads bytes `[0, size)` as found when opened (the bytes hashed); what a
   * writer appends meanwhile is the growth watch's. Answers 'committed' once its last chunk is.
   */
  private async takeFile(entry: QueuedFile, opened: OpenedFile, receivedAt: Date): Promise<Outcome | 'committed'> {
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
      return this.readFailed(entry, err, handle);
    }
    const earlier = remember ? this.ledger.find(sha256) : undefined;
    if (earlier) return this.sameContent(entry, sha256, earlier, receivedAt, handle);

    const before = this.sink.fileProgress?.(this.id, sha256);
    entry.stored = { size, mtimeMs: stats.mtimeMs };
    if (remember && before?.complete === true) {
      // Its last chunk committed before a restart, the move did not happen: only the move is left.
      this.log.warn({ file: name, sha256 }, 'file with this content was stored before; not stored again');
      entry.committed = true;
      await this.ledger.record(sha256, name).catch((err: unknown) => this.log.warn({ err, file: name }, 'cannot write the ingested-files ledger'));
      return 'committed';
    }
    const skip = before && !before.complete ? before.items : 0;
    if (skip > 0) this.log.info({ file: name, sha256, items: skip }, 'file was partly stored before a restart; going on after its last committed chunk');

    const tally = { items: skip, seen: 0, rejections: 0, scans: 0, known: true };
    this.progress = { file: name, rows: skip, bytes: size, startedAt: receivedAt.toISOString() };
    // One chunk is held back, so the last one goes as `final` (the file complete in its transaction).
    let held: IntakeItem[] | undefined;
    const commitHeld = async (final: boolean): Promise<void> => {
      const items = held ?? [];
      held = undefined;
      if (items.length === 0 && !(final && tally.items > 0)) return;
      await this.commitChunk(items, { inputId: this.id, hash: sha256, name, itemsBefore: tally.items, final, remember }, tally);
      if (this.progress) this.progress.rows = tally.items;
    };
    const out = async (items: IntakeItem[]): Promise<void> => {
      const from = tally.seen;
      tally.seen += items.length;
      if (tally.seen <= skip) return; // committed before a restart
      await commitHeld(false);
      held = from < skip ? items.slice(skip - from) : items;
    };
    const ctx = { inputId: this.id, fileName: name, receivedAt, maxReadLength: this.config.maxReadLength, sha256 };
    try {
      // A CSV can turn out unreadable as a whole late in the file (a quote never closed, a record
      // over 1 MiB): a first pass that commits nothing finds that, so such a file goes to failed/
      // with none of its rows stored, as before chunks, and dropping it again fixed stores each
      // row once. (lines, ndjson and json fail as a whole only before their first item.)
      if (this.config.format === 'csv') await this.parse(handle, ctx, { end: size }, async () => undefined);
      await this.parse(handle, ctx, { end: size }, out);
      await commitHeld(true);
    } catch (err) {
      if (err === STOPPED) return 'stopped';
      return this.readFailed(entry, err, handle, tally.items);
    }
    entry.committed = true;
    const reads = tally.items - skip - tally.rejections;
    this.log.info({ file: name, reads, ...(tally.known ? { scans: tally.scans } : {}), rejections: tally.rejections, bytes: size, ...(skip > 0 ? { resumedAfter: skip } : {}) }, 'file stored');
    if (remember) {
      await this.ledger.record(sha256, name).catch((err: unknown) => this.log.warn({ err, file: name }, 'cannot write the ingested-files ledger'));
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
  private async commitChunk(items: IntakeItem[], chunk: FileChunk, tally: { items: number; rejections: number; scans: number; known: boolean }): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      while (this.paused) if (!(await this.sleep(250))) throw STOPPED;
      if (this.stopping) throw STOPPED;
      let result: SubmitResult | void;
      try {
        result = await this.sink.submit(items, { fileChunk: chunk });
      } catch (err) {
        if (isTooLargeForBuffer(err)) {
          if (items.length <= 1) throw err;
          const half = Math.ceil(items.length / 2);
          await this.commitChunk(items.slice(0, half), { ...chunk, final: false }, tally);
          await this.commitChunk(items.slice(half), { ...chunk, itemsBefore: chunk.itemsBefore + half }, tally);
          return;
        }
        const delayMs = this.backoff(attempt);
        this.log.error({ err, file: chunk.name, items: items.length, committed: chunk.itemsBefore, retryInMs: delayMs }, 'buffer refused a chunk of the file; the file stays in the folder and the chunk is retried');
        if (!(await this.sleep(delayMs))) throw STOPPED;
        continue;
      }
      tally.items += items.length;
      tally.rejections += items.filter((i) => i.kind === 'rejection').length;
      if (result) {
        tally.rejections += result.outcomes.filter((o, i) => o.outcome === 'rejected' && items[i]?.kind === 'read').length;
        tally.scans += result.outcomes.filter((o) => o.outcome === 'scan').length;
      } else {
        tally.known = false;
      }
      return;
    }
  }

  private async moveProcessed(entry: QueuedFile): Promise<Outcome> {
    const { path } = entry;
    const name = basename(path);
    try {
      const target = await moveToProcessed(path, this.dir, this.now(), entry.target);
      this.log.debug({ file: name, to: target }, 'file moved to processed');
      // A writer that paused longer than stableMs may still be appending: watch for growth.
      if (entry.stored) this.growth.watch(target, name, entry.stored.size, entry.stored.mtimeMs);
      return 'done';
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
        this.log.warn({ file: name }, 'stored file disappeared before it could be moved to processed/');
        return 'done';
      }
      // Its rows are stored: only the move is retried, never the submit.
      this.log.error({ err, file: name }, 'cannot move stored file to processed/; retrying');
      return 'retry';
    }
  }

  /**
   * Content stored before (ledger): counted as a rejection naming the earlier file (not submitted
   * with the hash, which the intake would drop as the earlier file's), then moved to processed/.
   */
  private async sameContent(entry: QueuedFile, sha256: string, earlier: { at: string; name: string }, receivedAt: Date, handle: FileHandle): Promise<Outcome | 'committed'> {
    const name = basename(entry.path);
    const reason = `same content as ${earlier.name} stored at ${earlier.at}; not stored again`;
    entry.target ??= await processedTarget(entry.path, this.dir, this.now());
    const origin = { file: name, sha256, movedTo: relative(this.dir, entry.target) };
    const raw = await readRange(handle, 0, FILE_REJECTION_RAW_BYTES).catch(() => Buffer.alloc(0));
    if (!(await this.commitFileRejection(entry.path, raw, reason, origin, receivedAt, 'the note of a file stored before'))) return 'retry';
    this.log.warn({ file: name, sha256, ingestedAt: earlier.at, as: earlier.name }, 'file with this content was ingested before; not ingested again (counted as a rejection)');
    entry.committed = true;
    return 'committed';
  }

  /** Parses bytes `range` of an open file: to `out` in chunks, or (without) all items returned. */
  private parse(handle: FileHandle, ctx: FileParseContext, range: ByteRange = {}, out?: ItemsOut): Promise<IntakeItem[]> {
    const c = this.config;
    switch (c.format) {
      case 'csv':
        return parseCsvFile(
          handle,
          ctx,
          {
            barcodeColumn: c.barcodeColumn,
            timeColumn: c.timeColumn,
            delimiter: c.delimiter,
            dcpColumn: c.dcpColumn,
            parentColumn: c.parentColumn,
            attributeColumns: c.attributeColumns,
          },
          range,
          out,
        );
      case 'ndjson':
        return parseNdjsonFile(handle, ctx, c.fields, range, out);
      case 'json':
        return parseJsonFile(handle, ctx, c.fields, out);
      case 'lines':
        return parseLinesFile(handle, ctx, range, out);
    }
  }

  /**
   * A file that cannot be taken: to failed/ with the reason (after its rejection is committed).
   * `handle`: the file opened (its first bytes go in the rejection); none for an entry that is not
   * a regular file (nothing of it is read). `stored`: items of it committed before the failure
   * (chunks before a broken CSV record): they stay stored, and the reason says so.
   */
  private async readFailed(entry: QueuedFile, err: unknown, handle?: FileHandle, stored = 0): Promise<Outcome> {
    const name = basename(entry.path);
    const code = (err as NodeJS.ErrnoException).code;
    let reason: string;
    if (code === 'ENOENT') {
      const dangling = await danglingLink(entry.path);
      if (dangling === undefined) {
        this.log.info({ file: name }, 'file removed before it was read');
        return 'done';
      }
      reason = dangling;
    } else if (!isGatewayError(err) && !(code !== undefined && UNREADABLE_CODES.has(code))) {
      this.log.warn({ err, file: name }, 'reading file failed; retrying');
      return 'retry';
    } else {
      reason = err instanceof Error ? err.message : String(err);
    }
    if (stored > 0) reason += `; the file's first ${stored} items (reads and rejected rows) were stored before this and stay stored`;
    // Counted and inspectable: an input-level rejection with the file's first bytes, committed
    // before the file moves to failed/ (if the buffer refuses, the file stays and is retried).
    let target: string;
    try {
      target = await failedTarget(entry.path, this.dir);
    } catch (targetErr) {
      this.log.error({ err: targetErr, file: name, reason }, 'file cannot be taken and failed/ cannot be used; retrying');
      return 'retry';
    }
    const origin = { file: name, movedTo: relative(this.dir, target) };
    const raw = handle ? await readRange(handle, 0, FILE_REJECTION_RAW_BYTES).catch(() => Buffer.alloc(0)) : Buffer.alloc(0);
    if (!(await this.commitFileRejection(entry.path, raw, reason, origin, this.now(), 'the rejection of a file that cannot be taken'))) return 'retry';
    entry.failure = { reason, target, stored };
    return this.moveFailed(entry, reason, target, stored);
  }

  /**
   * Commits one input-level rejection for a whole file (its first bytes, the reason, where it goes),
   * so it is counted and listed by `failures` before the file moves. Answers false when the buffer
   * refused it: the file then stays in the folder and is retried.
   */
  private async commitFileRejection(path: string, raw: Buffer, reason: string, origin: Record<string, string>, receivedAt: Date, what: string): Promise<boolean> {
    const rejection: InputRejection = { inputId: this.id, raw, receivedAt, reason, origin };
    try {
      await this.sink.submit([{ kind: 'rejection', rejection }]);
      return true;
    } catch (err) {
      this.log.error({ err, file: basename(path), reason }, `buffer refused ${what}; it stays in the folder and is retried`);
      return false;
    }
  }

  private async moveFailed(entry: QueuedFile, reason: string, target: string, stored = 0): Promise<Outcome> {
    const name = basename(entry.path);
    try {
      const to = await moveToFailed(entry.path, this.dir, reason, { inputId: this.id, at: this.now(), scrub: this.scrub, stored }, target);
      this.log.warn({ file: name, reason, to }, 'file cannot be taken; moved to failed/ (stored as a rejection)');
    } catch (moveErr) {
      // Left in place (its rejection is stored): a later change to the file, or the next start,
      // tries it again.
      this.log.error({ err: moveErr, file: name, reason }, 'file cannot be taken and cannot be moved to failed/');
    }
    return 'done';
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
      if (!(await this.sleep(Math.max(stableMs, 50)))) return 'stopped';
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

  // ---- timers ---------------------------------------------------------------------------------

  private backoff(attempt: number): number {
    return Math.min(this.retryMaxMs, this.retryBaseMs * 2 ** Math.min(attempt, 30));
  }

  private after(delayMs: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.stopping) fn();
    }, delayMs);
    this.timers.add(timer);
  }

  /** Resolves true after `ms`, or false at once when the input stops. */
  private sleep(ms: number): Promise<boolean> {
    if (this.stopping) return Promise.resolve(false);
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.sleepers.delete(wake);
        resolve(false);
      };
      const timer = setTimeout(() => {
        this.sleepers.delete(wake);
        resolve(true);
      }, ms);
      this.sleepers.add(wake);
    });
  }
}

/** The reason for a dangling symbolic link at `path`, or undefined when it is not one. */
async function danglingLink(path: string): Promise<string | undefined> {
  try {
    if (!(await lstat(path)).isSymbolicLink()) return undefined;
    return `symbolic link to ${await readlink(path)}, which does not exist (or cannot be reached)`;
  } catch {
    return undefined;
  }
}
