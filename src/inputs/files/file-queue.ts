import { lstat } from 'node:fs/promises';
import { basename } from 'node:path';
import type { Logger } from '../../log.js';
import type { ListedEntries } from './folder-watch.js';
import type { InputTimers } from './input-timers.js';

/**
 * Most files queued (known) at once. Past it, further files stay in the folder unqueued (logged
 * once) and the folder is listed again once the queue has drained.
 */
export const MAX_QUEUED_FILES = 10_000;

/**
 * One file's state across attempts to take it (kept by the queue while the file waits for a
 * retry), so that a retry does only what is left: a committed file is only moved, a rejected one
 * only moved to `failed/`.
 */
export interface FileEntry {
  /** Absolute path in the watched folder. */
  path: string;
  /** Found by a listing, not by chokidar's awaitWriteFinish: stability still to check. */
  checkStable: boolean;
  /** Its items are committed; only the move to processed/ is left. */
  committed: boolean;
  /** Size (bytes) and mtime (ms since the epoch) of the file as stored (the growth watch starts from there). */
  stored?: { size: number; mtimeMs: number };
  /** Where the move after the commit goes (named in a rejection already committed). */
  target?: string;
  /** Rejected as a whole (the rejection committed): only the move to `failed/` is left. */
  failure?: { reason: string; target: string; stored: number };
}

/**
 * What became of one attempt to take a file: `done` (moved, rejected or gone: off the queue),
 * `retry` (a passing fault: the file keeps its place and is tried again after a backoff),
 * `stopped` (the input stops; the file stays in the folder, its committed chunks recorded).
 */
export type TakeOutcome = 'done' | 'retry' | 'stopped';

/** What {@link FileQueue} needs: how to take a file and how to list the folder again. */
export interface FileQueueOptions {
  log: Logger;
  timers: InputTimers;
  /** Takes one file (see `FileTaker.take`); its outcome decides what the queue does next. */
  take: (entry: FileEntry) => Promise<TakeOutcome>;
  /** Lists the folder, at most `room` entries, oldest first (`FolderWatch.listExisting`). */
  list: (room: number) => Promise<ListedEntries>;
  /** Back-pressure: while true, no file is started (a file being taken waits in its own loop). */
  paused: () => boolean;
}

/** A queued file: what its take keeps across attempts, and the queue's own count of retries. */
interface Queued {
  entry: FileEntry;
  /** Retries so far (the backoff's exponent). */
  attempt: number;
}

/**
 * The work queue of a files input: files are taken one at a time, in order of arrival. A file
 * whose take answers `retry` keeps its place at the head and waits a backoff (`timers.backoff`),
 * and the files behind it wait too, so the order of arrival holds. At most
 * {@link MAX_QUEUED_FILES} files are known at once; past that they stay in the folder and the
 * folder is listed again once the queue has drained. Nothing is started while paused or stopping.
 */
export class FileQueue {
  private readonly options: FileQueueOptions;
  private readonly log: Logger;
  private readonly timers: InputTimers;
  private readonly queue: Queued[] = [];
  private readonly known = new Map<string, Queued>();
  private current: Queued | undefined;
  private draining: Promise<void> | undefined;
  private fileRetryPending = false;
  /** Files were left unqueued at {@link MAX_QUEUED_FILES}: list the folder again once the queue drained. */
  private overflowed = false;

  constructor(options: FileQueueOptions) {
    this.options = options;
    this.log = options.log;
    this.timers = options.timers;
  }

  /**
   * Queues a file at `path` (absolute) unless it is queued already, the queue is full (it stays in
   * the folder and is listed again later) or the input is stopping. `checkStable`: its stability
   * is still to check (found by a listing, not reported after `stableMs` of quiet).
   */
  add(path: string, checkStable: boolean): void {
    if (this.timers.stopping || this.known.has(path)) return;
    if (this.known.size >= MAX_QUEUED_FILES) {
      if (!this.overflowed)
        this.log.warn(
          { queued: this.known.size },
          `more than ${MAX_QUEUED_FILES} files waiting; further files stay in the folder and are listed again once these are taken`,
        );
      this.overflowed = true;
      return;
    }
    const queued: Queued = { entry: { path, checkStable, committed: false }, attempt: 0 };
    this.known.set(path, queued);
    this.queue.push(queued);
    this.kick();
  }

  /**
   * Lists the folder (as much as the queue has room for) and queues what it holds, oldest first,
   * each with its stability still to check. Throws what the listing throws.
   */
  async addListed(): Promise<void> {
    const { paths, more } = await this.options.list(MAX_QUEUED_FILES - this.known.size);
    if (more) this.overflowed = true;
    for (const path of paths) this.add(path, true);
  }

  /** The file was removed from the folder before it was taken (an operator, or our own move). */
  forget(path: string): void {
    const queued = this.known.get(path);
    if (!queued || queued === this.current) return;
    // A late unlink (chokidar delays them) must not drop a new file dropped under the same name.
    void lstat(path).then(
      () => undefined,
      () => {
        if (this.known.get(path) === queued && queued !== this.current) this.drop(queued);
      },
    );
  }

  /** Starts taking files if there are any and nothing holds the queue (paused, a retry pending, stopping). */
  kick(): void {
    if (
      this.draining ||
      this.timers.stopping ||
      this.options.paused() ||
      this.fileRetryPending ||
      this.queue.length === 0
    )
      return;
    this.draining = this.drain()
      .catch((err: unknown) => this.log.error({ err }, 'file queue failed'))
      .finally(() => {
        this.draining = undefined;
        this.kick();
      });
  }

  /** Resolves once the file being taken (if any) is finished; call after `timers.stop()`. */
  async idle(): Promise<void> {
    await this.draining;
  }

  private drop(queued: Queued): void {
    this.known.delete(queued.entry.path);
    const index = this.queue.indexOf(queued);
    if (index >= 0) this.queue.splice(index, 1);
  }

  private async drain(): Promise<void> {
    while (!this.timers.stopping && !this.options.paused()) {
      const queued = this.queue[0];
      if (!queued) {
        if (!this.overflowed) return;
        // Files were left in the folder at the queue's bound: list it again (they are queued now).
        this.overflowed = false;
        await this.addListed();
        continue;
      }
      this.current = queued;
      let outcome: TakeOutcome;
      try {
        outcome = await this.options.take(queued.entry);
      } catch (err) {
        // Not expected (the take sorts its errors); retry with backoff rather than spin.
        this.log.error(
          { err, file: basename(queued.entry.path) },
          'processing file failed; retrying',
        );
        outcome = 'retry';
      } finally {
        this.current = undefined;
      }
      if (outcome === 'stopped') return;
      if (outcome === 'retry') {
        // The head waits and so do the files behind it: order of arrival is kept.
        const delayMs = this.timers.backoff(queued.attempt++);
        this.fileRetryPending = true;
        this.timers.after(delayMs, () => {
          this.fileRetryPending = false;
          this.kick();
        });
        return;
      }
      this.drop(queued);
    }
  }
}
