import { resolve } from 'node:path';
import type { FilesInputConfig } from './schema.js';
import type { Logger } from '../../log.js';
import type { InputAdapter, InputState, InputStatus } from '../types.js';
import type { FileSink } from './file-sink.js';
import { FileQueue } from './file-queue.js';
import { GrowthWatch } from './file-growth.js';
import { FolderWatch } from './folder-watch.js';
import { IngestLedger } from './ingest-ledger.js';
import { InputTimers } from './input-timers.js';
import { FileTaker, parseInboxFile } from './take-file.js';
import { type Clock, systemClock } from '../../clock.js';

/** What {@link FilesInput} is built from: its config, the buffer's intake, a logger; the rest are seams for tests. */
export interface FilesInputOptions {
  config: FilesInputConfig;
  /** The intake: commits each file's items with its hash or progress. */
  sink: FileSink;
  logger: Logger;
  /** Clock for `receivedAt` and the `processed/YYYY-MM-DD` folder; defaults to the system clock. */
  now?: Clock;
  /** Cuts known secrets out of the `failed/*.error.txt` text (the log's scrubber). */
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

/**
 * Input adapter for dropped files: watches `config.dir` (not its sub-folders) with chokidar and
 * turns each file into reads: `lines` = one barcode per line, `csv` = header row then rows,
 * `ndjson` = one JSON read per line, `json` = an array of JSON reads.
 *
 * A file is taken once writing finished (size unchanged for `stableMs`); dotfiles, `*.tmp` and
 * `*.part` are ignored so a writer can drop a file atomically by renaming. Files are processed one
 * at a time in order of arrival (files present at start: oldest first).
 *
 * Only regular files are read, each opened once through `openInboxFile` (safe-open.ts: `O_NOFOLLOW |
 * O_NONBLOCK`, type checked on the open descriptor); every hash, parse and read of it goes through
 * that descriptor. A symbolic link (wherever it points), FIFO, socket or device goes to `failed/`
 * with a reason naming its kind, counted as a rejection; not a byte is read through it.
 *
 * A file is parsed as a stream and committed in chunks of `FILE_CHUNK_ROWS` (file-format.ts) items, each
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
 * commit ({@link IngestLedger}), in each read's `origin.sha256`, and to the sink with the file's
 * items ({@link FileSink}: the buffer records it in the same transaction as the rows, which also covers a crash between the
 * commit and the ledger write). Without that, such a crash re-reads the file once: at-least-once.
 *
 * `setPaused(true)` leaves new files in the folder until `setPaused(false)`.
 *
 * Composed of three parts, each in its own file: {@link FolderWatch} (the folder: chokidar, folder
 * checks, start-up listing, sub-folder warnings), {@link FileQueue} (order, retries with backoff,
 * pause, one file at a time) and {@link FileTaker} (one file: safe open, hash, chunked commits,
 * moves, rejections); they share one {@link InputTimers}, so `stop()` ends every wait at once.
 */
export class FilesInput implements InputAdapter {
  readonly id: string;
  readonly type = 'files';

  private readonly config: FilesInputConfig;
  private readonly log: Logger;
  private readonly now: Clock;
  private readonly timers: InputTimers;
  private readonly ledger: IngestLedger;
  private readonly growth: GrowthWatch;
  private readonly folder: FolderWatch;
  private readonly queue: FileQueue;
  private readonly taker: FileTaker;

  private state: InputState = 'starting';
  private lastError: string | undefined;
  private lastErrorAt: string | undefined;
  private ledgerLoaded = false;
  private paused = false;

  constructor(options: FilesInputOptions) {
    const config = options.config;
    // Normalised, so it compares equal to the paths chokidar reports.
    const dir = resolve(config.dir);
    this.config = config;
    this.id = config.id;
    this.log = options.logger.child({ component: 'input.files', inputId: config.id });
    this.now = options.now ?? systemClock;
    this.timers = new InputTimers(options.retryBaseMs ?? 1000, options.retryMaxMs ?? 30_000);
    this.ledger = new IngestLedger(dir, config.rememberFilesDays, this.log, this.now);
    const stableMs = config.stableMs;
    const paused = (): boolean => this.paused;
    this.growth = new GrowthWatch({
      inputId: this.id,
      dir,
      format: config.format,
      stableMs,
      watchMs: options.growthWatchMs ?? defaultGrowthWatchMs(stableMs),
      pollMs: config.usePolling ? 1000 : Math.max(100, Math.min(500, Math.floor(stableMs / 2))),
      rememberFilesDays: config.rememberFilesDays,
      allowHardLinks: config.allowHardLinks,
      sink: options.sink,
      ledger: this.ledger,
      log: this.log,
      now: this.now,
      parse: (handle, ctx, range) => parseInboxFile(config, handle, ctx, range),
      paused,
      maxReadLength: config.maxReadLength,
    });
    this.taker = new FileTaker({
      config,
      dir,
      sink: options.sink,
      ledger: this.ledger,
      growth: this.growth,
      log: this.log,
      now: this.now,
      scrub: options.scrub,
      timers: this.timers,
      paused,
    });
    this.folder = new FolderWatch({
      dir,
      stableMs,
      usePolling: config.usePolling,
      folderCheckMs: options.folderCheckMs ?? 2000,
      log: this.log,
      timers: this.timers,
      onEntry: (path, checkStable) => this.queue.add(path, checkStable),
      onGone: (path) => this.queue.forget(path),
      onReady: () => this.folderReady(dir),
      onDown: (message) => {
        this.state = 'down';
        this.lastError = message;
        this.lastErrorAt = new Date(this.now()).toISOString();
      },
      onRetry: () => {
        this.state = 'connecting';
      },
    });
    this.queue = new FileQueue({
      log: this.log,
      timers: this.timers,
      take: (entry) => this.taker.take(entry),
      list: (room) => this.folder.listExisting(room),
      paused,
    });
  }

  /** Back-pressure: while paused, files stay in the folder (a file being read waits before its next chunk). */
  setPaused(paused: boolean): void {
    if (this.paused === paused) return;
    this.paused = paused;
    if (this.state === 'up' || this.state === 'paused') this.state = paused ? 'paused' : 'up';
    this.log.info({ paused }, paused ? 'paused: new files stay in the folder' : 'resumed');
    if (!paused) this.queue.kick();
  }

  /** Creates the folder if missing, starts watching and queues the files already there. A folder
   *  that cannot be watched makes the input `down` (retried with backoff), not a start failure. */
  async start(): Promise<void> {
    this.timers.start();
    this.growth.start();
    await this.folder.start();
  }

  /**
   * Stops watching; a chunk whose submit is in flight is finished before this resolves (a file whose
   * last chunk committed is moved). A file stopped between two chunks stays in the folder with its
   * committed chunks recorded: the next start goes on after them.
   */
  async stop(): Promise<void> {
    this.timers.stop();
    await this.folder.stop();
    await this.queue.idle();
    await this.growth.stop();
    this.state = 'stopped';
  }

  /** Files moved to `processed/` and still watched for growth ({@link GrowthWatch}; for tests). */
  get watchedForGrowth(): number {
    return this.growth.size;
  }

  status(): InputStatus {
    const progress = this.taker.progress;
    return {
      id: this.id,
      type: this.type,
      state: this.state,
      ...(this.state === 'down' && this.lastError !== undefined
        ? { lastError: this.lastError, lastErrorAt: this.lastErrorAt }
        : {}),
      source: this.config.dir,
      ...(progress ? { progress: { ...progress } } : {}),
    };
  }

  /** The folder is watched: the ledger loaded once, the input up, then the files already there queued. */
  private async folderReady(dir: string): Promise<void> {
    if (!this.ledgerLoaded) {
      await this.ledger.load();
      this.ledgerLoaded = true;
    }
    this.state = this.paused ? 'paused' : 'up';
    this.folder.resetBackoff();
    this.log.info(
      { dir, format: this.config.format, usePolling: this.config.usePolling },
      'watching folder',
    );
    await this.queue.addListed();
  }
}
