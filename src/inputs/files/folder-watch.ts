import { ErrorCodes, GatewayError } from '../../errors.js';
import { lstat, mkdir, opendir, readdir, stat } from 'node:fs/promises';
import { basename, join, relative, sep } from 'node:path';
import { watch, type FSWatcher } from 'chokidar';
import type { Logger } from '../../log.js';
import { FAILED_DIR, PROCESSED_DIR } from './file-moves.js';
import type { InputTimers } from './input-timers.js';

/** Most sub-folder names remembered for their once-only warning; past it, no further warnings. */
export const MAX_SUBFOLDERS_WARNED = 1000;

/** What {@link FolderWatch.listExisting} found: entries oldest first, and whether more were left unlisted. */
export interface ListedEntries {
  /** Absolute paths, oldest `mtime` first (ties by path): the order they arrived in. */
  paths: string[];
  /** The listing stopped at its room: more entries are still in the folder. */
  more: boolean;
}

/** What {@link FolderWatch} needs: the folder, its polling settings, and where to report. */
export interface FolderWatchOptions {
  /** The watched folder, absolute and normalised (compares equal to the paths chokidar reports). */
  dir: string;
  /** Size unchanged this long (ms) before chokidar reports a file; 0 = at once. */
  stableMs: number;
  /** Poll instead of file-system events (network shares), every 1000 ms. */
  usePolling: boolean;
  /** How often (ms) the folder itself is checked: chokidar does not report it removed or replaced. */
  folderCheckMs: number;
  log: Logger;
  timers: InputTimers;
  /**
   * An entry to take: `checkStable` true when its stability is still to check (found by a listing
   * or an error, not by chokidar's `awaitWriteFinish`). Never called for ignored entries.
   */
  onEntry: (path: string, checkStable: boolean) => void;
  /** chokidar reported the entry removed (possibly late: the path may hold a new file by now). */
  onGone: (path: string) => void;
  /**
   * The watcher is ready: called in order, inside the start's error handling (a throw makes the
   * folder down and retried). The input loads its ledger and lists the folder here.
   */
  onReady: () => Promise<void>;
  /** The folder cannot be watched (`message` names the folder and why); retried with backoff. */
  onDown: (message: string) => void;
  /** The backoff after {@link onDown} ended; the watch is being opened again. */
  onRetry: () => void;
}

/**
 * The folder half of a files input: watches one folder (not its sub-folders) with chokidar, checks
 * every `folderCheckMs` that the folder is still the same folder, lists the entries already there
 * oldest first, and names each sub-folder once in a warning (files dropped into one by mistake do
 * not go unnoticed). `processed/` and `failed/` are created here and never reported; dotfiles,
 * `*.tmp` and `*.part` are ignored so a writer can drop a file atomically by renaming.
 *
 * Entries are reported as they are (lstat, `followSymlinks: false`): a symbolic link, FIFO, socket
 * or device is reported too, so the take of the file can move it to failed/ unread.
 *
 * A folder that cannot be watched (missing and not creatable, unlistable, removed or replaced while
 * watched) is reported through `onDown` and opened again after a backoff (`timers.backoff`), never
 * thrown: the input is `down`, not failed.
 */
export class FolderWatch {
  private readonly dir: string;
  private readonly options: FolderWatchOptions;
  private readonly log: Logger;
  private readonly timers: InputTimers;
  private watcher: FSWatcher | undefined;
  private folderCheck: NodeJS.Timeout | undefined;
  /** Identity of the folder being watched; another inode at the same path means it was replaced. */
  private folderId: string | undefined;
  private watchAttempt = 0;
  /** Reported down and waiting out the backoff: further errors meanwhile are the same trouble. */
  private down = false;
  /** Sub-folders already warned about (by name). */
  private readonly subfoldersWarned = new Set<string>();

  constructor(options: FolderWatchOptions) {
    this.options = options;
    this.dir = options.dir;
    this.log = options.log;
    this.timers = options.timers;
  }

  /** Creates `processed/` and `failed/` if missing and starts watching; never throws (see the class). */
  async start(): Promise<void> {
    this.down = false;
    await this.open();
  }

  /** Stops the folder check and closes the watcher (a close error is logged, not thrown). */
  async stop(): Promise<void> {
    await this.close();
  }

  /**
   * Lists the folder's entries (lstat, as they are), at most `room` of them, oldest first. Sub-folders
   * are warned about (once each) and not listed; ignored names are skipped. Throws what `opendir`
   * throws (the folder cannot be listed).
   */
  async listExisting(room: number): Promise<ListedEntries> {
    const found: { path: string; mtimeMs: number }[] = [];
    let more = false;
    // Listed as a stream and at most `room` taken: a folder of a million files costs no more memory
    // than the queue's bound (the rest is listed again once these are taken; the order of arrival
    // then holds within each listing).
    for await (const entry of await opendir(this.dir)) {
      if (found.length >= room) {
        more = true;
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
    return { paths: found.map((f) => f.path), more };
  }

  private async open(): Promise<void> {
    if (this.timers.stopping) return;
    const dir = this.dir;
    const { stableMs, usePolling } = this.options;
    try {
      await mkdir(join(dir, PROCESSED_DIR), { recursive: true });
      await mkdir(join(dir, FAILED_DIR), { recursive: true });
      const watcher = watch(dir, {
        depth: 0,
        ignoreInitial: true, // the start-up listing orders existing files oldest first
        ignored: (path, stats) =>
          this.isIgnored(path) ||
          (path !== dir && stats?.isDirectory() === true && this.subfolderSeen(path)),
        awaitWriteFinish:
          stableMs > 0 ? { stabilityThreshold: stableMs, pollInterval: 100 } : false,
        usePolling,
        // A link is reported as the link (lstat), never followed: it goes to failed/ unread.
        followSymlinks: false,
        // Polling a network share every 100 ms (chokidar's default) is needless load on the server.
        ...(usePolling ? { interval: 1000, binaryInterval: 1000 } : {}),
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
      // chokidar does not emit ignored paths; the check stays so that no ignored entry is ever taken.
      watcher.on('add', (path) => this.report(path, false));
      watcher.on('change', (path) => this.report(path, false));
      watcher.on('unlink', (path) => this.options.onGone(path));
      if (this.timers.stopping) return;
      const folder = await stat(dir);
      this.folderId = `${folder.dev}:${folder.ino}`;
      this.folderCheck = setInterval(() => void this.checkFolder(), this.options.folderCheckMs);
      await this.options.onReady();
    } catch (err) {
      await this.failed(err);
    }
  }

  /**
   * Marks the watch up again (the next failure starts its backoff from the first delay). Called by
   * the input once it is up, before its start-up listing.
   */
  resetBackoff(): void {
    this.watchAttempt = 0;
  }

  private report(path: string, checkStable: boolean): void {
    if (this.isIgnored(path)) return;
    this.options.onEntry(path, checkStable);
  }

  private async checkFolder(): Promise<void> {
    try {
      const folder = await stat(this.dir);
      if (!folder.isDirectory()) throw new GatewayError(ErrorCodes.INPUT, 'is no longer a folder');
      if (`${folder.dev}:${folder.ino}` !== this.folderId)
        throw new GatewayError(ErrorCodes.INPUT, 'was replaced by another folder');
    } catch (err) {
      await this.failed(err);
    }
  }

  private async close(): Promise<void> {
    clearInterval(this.folderCheck);
    this.folderCheck = undefined;
    const watcher = this.watcher;
    this.watcher = undefined;
    await watcher
      ?.close()
      .catch((err: unknown) => this.log.warn({ err }, 'closing the folder watcher failed'));
  }

  /**
   * chokidar reports single-file trouble here too; only a folder we can no longer list is "down"
   * (before the watcher is ready: `failStart`, the start fails and is retried). An entry of the
   * folder that cannot be followed (a symbolic link loop) is reported, so it is taken and rejected.
   */
  private async onWatchError(err: unknown, failStart?: (err: unknown) => void): Promise<void> {
    try {
      await readdir(this.dir);
    } catch (dirErr) {
      if (failStart) failStart(dirErr);
      else await this.failed(dirErr);
      return;
    }
    const path = (err as NodeJS.ErrnoException).path;
    if (
      typeof path === 'string' &&
      relative(this.dir, path) === basename(path) &&
      !this.isIgnored(path)
    ) {
      this.log.warn(
        { err, file: basename(path) },
        'folder watcher cannot follow a file; trying to read it',
      );
      this.report(path, true);
      return;
    }
    this.log.warn({ err }, 'folder watcher reported an error');
  }

  private async failed(err: unknown): Promise<void> {
    if (this.timers.stopping || this.down) return;
    this.down = true;
    this.options.onDown(`${this.dir}: ${err instanceof Error ? err.message : String(err)}`);
    const delayMs = this.timers.backoff(this.watchAttempt++);
    this.log.warn({ err, dir: this.dir, retryInMs: delayMs }, 'cannot watch folder; retrying');
    await this.close();
    this.timers.after(delayMs, () => {
      this.down = false;
      this.options.onRetry();
      void this.open();
    });
  }

  /**
   * A sub-folder of the watched folder (not `processed/` or `failed/`): its files are not read.
   * Warned about once per name, at most {@link MAX_SUBFOLDERS_WARNED} names. Answers true
   * (chokidar: ignore it).
   */
  private subfolderSeen(path: string): boolean {
    const rel = relative(this.dir, path);
    if (rel === '' || rel.includes(sep)) return true;
    if (rel === PROCESSED_DIR || rel === FAILED_DIR || this.subfoldersWarned.has(rel)) return true;
    if (this.subfoldersWarned.size >= MAX_SUBFOLDERS_WARNED) return true;
    this.subfoldersWarned.add(rel);
    this.log.warn(
      { folder: rel, dir: this.dir },
      `sub-folder "${rel}" is not read; drop files into the folder itself (${this.dir})`,
    );
    return true;
  }

  /** `processed/`, `failed/` and what is under them; dotfiles, `*.tmp`, `*.part` (a writer's temporary names). */
  private isIgnored(path: string): boolean {
    const rel = relative(this.dir, path);
    if (rel === '') return false;
    const first = rel.split(sep)[0];
    if (first === PROCESSED_DIR || first === FAILED_DIR) return true;
    const name = basename(path);
    const lower = name.toLowerCase();
    return name.startsWith('.') || lower.endsWith('.tmp') || lower.endsWith('.part');
  }
}
