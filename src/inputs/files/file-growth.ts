import type { FileHandle } from 'node:fs/promises';
import { openInboxFile } from './safe-open.js';
import { storeGrowth, type GrowthPartOptions, type Watched } from './growth-part.js';

export { GROWTH_PART_BYTES, type GrowthPartOptions } from './growth-part.js';
export { completeLinesEnd, FILE_REJECTION_RAW_BYTES, hashRange, readRange } from './file-ranges.js';

/** Most files watched for growth at once; past it the oldest watch ends early (logged). */
export const MAX_GROWTH_WATCHES = 1000;

/** What a {@link GrowthWatch} needs of its files input. */
export interface GrowthWatchOptions extends GrowthPartOptions {
  stableMs: number;
  /** How long a moved file is watched after its last change, in ms. */
  watchMs: number;
  /** How often it is looked at, in ms. */
  pollMs: number;
  /** Back-pressure: no part is stored while this answers true. */
  paused: () => boolean;
  /** The input's `allowHardLinks`: a file of more than one name is watched only then. */
  allowHardLinks?: boolean;
}

/**
 * Watches files after they were stored and moved to `processed/`, for a writer that was still
 * writing (it paused longer than `stableMs`, the file was taken, and it went on appending to the
 * moved file through its open handle). Such a file is looked at every `pollMs` until it has not
 * changed for `watchMs`. When it grew:
 *
 * - `lines`, `ndjson`, `csv`: once the growth has been still for `stableMs`, the appended complete
 *   lines are parsed (CSV with the file's header) and submitted as a part of their own, with their
 *   own content hash (SHA-256 of the file from its start up to the end of the part), recorded by
 *   the intake and the ledger like a file's, so a part is never stored twice. Line numbers go on
 *   from the file's. When the watch ends, a last line without a line break is taken too. If the
 *   file had been taken in the middle of a line, that whole line is stored as a rejection (its
 *   first part was already stored on its own).
 * - `json` (one array cannot be read in parts), or a part that cannot be parsed: an input-level
 *   rejection saying the file grew after it was taken and where it is.
 *
 * Every growth is logged as a warning: writers should write under a temporary name and rename,
 * or `stableMs` should be raised. The watch is in memory: after a restart, growth of files moved
 * before it is not looked at.
 */
export class GrowthWatch {
  private readonly watched = new Map<string, Watched>();
  private stopping = false;

  constructor(private readonly o: GrowthWatchOptions) {}

  /** Takes watches again after {@link stop} (the input was started again). */
  start(): void {
    this.stopping = false;
  }

  /** Starts watching a file just moved to `movedTo`, of which `taken` bytes are stored. */
  watch(movedTo: string, name: string, taken: number, mtimeMs: number): void {
    if (this.stopping) return;
    const w: Watched = {
      path: movedTo,
      name,
      taken,
      size: taken,
      mtimeMs,
      changedAt: Date.now(),
      timer: undefined,
      running: undefined,
      failures: 0,
      retryAt: 0,
    };
    if (this.watched.size >= MAX_GROWTH_WATCHES) {
      // Bounded: the oldest watch (Map order) ends early; a check in progress finishes.
      const oldest = this.watched.values().next().value;
      if (oldest) {
        this.o.log.warn(
          { file: oldest.name, path: oldest.path, watching: this.watched.size },
          `more than ${MAX_GROWTH_WATCHES} taken files watched for growth; the oldest watch ends early`,
        );
        this.end(oldest);
      }
    }
    this.watched.set(movedTo, w);
    this.schedule(w);
  }

  /** Files being watched (for tests and the log). */
  get size(): number {
    return this.watched.size;
  }

  /**
   * Ends every watch: waits for a check in progress, then stores what was appended and not yet
   * stored (complete lines as a part; a last incomplete line, or a `json` file's growth, as a
   * rejection), so stopping loses nothing that is on disk.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    const all = [...this.watched.values()];
    for (const w of all) clearTimeout(w.timer);
    await Promise.all(all.flatMap((w) => (w.running ? [w.running] : [])));
    for (const w of all) {
      try {
        await this.check(w, 'stopping');
      } catch (err) {
        this.o.log.error(
          { err, file: w.name, path: w.path },
          'cannot store the part appended to a file after it was taken',
        );
      }
    }
    this.watched.clear();
  }

  private schedule(w: Watched): void {
    w.timer = setTimeout(() => {
      w.timer = undefined;
      w.running = this.check(w, 'tick')
        .catch((err: unknown) =>
          this.o.log.error(
            { err, file: w.name, path: w.path },
            'checking a taken file for growth failed',
          ),
        )
        .finally(() => {
          w.running = undefined;
          if (!this.stopping && this.watched.get(w.path) === w) this.schedule(w);
        });
    }, this.o.pollMs);
  }

  private end(w: Watched): void {
    clearTimeout(w.timer);
    this.watched.delete(w.path);
  }

  private async check(w: Watched, mode: 'tick' | 'stopping'): Promise<void> {
    let opened;
    try {
      // The same safe open as the inbox's: replaced by a link or a FIFO, it is not read.
      opened = await openInboxFile(w.path, w.name, { allowHardLinks: this.o.allowHardLinks });
    } catch {
      // Moved away, deleted or replaced by someone: nothing more to watch.
      this.end(w);
      return;
    }
    try {
      await this.checkOpen(w, mode, opened.handle, opened.stats);
    } finally {
      await opened.handle.close();
    }
  }

  private async checkOpen(
    w: Watched,
    mode: 'tick' | 'stopping',
    handle: FileHandle,
    current: { size: number; mtimeMs: number },
  ): Promise<void> {
    const nowMs = Date.now();
    if (current.size !== w.size || current.mtimeMs !== w.mtimeMs) {
      w.size = current.size;
      w.mtimeMs = current.mtimeMs;
      w.changedAt = nowMs;
    }
    if (current.size < w.taken) {
      this.o.log.warn(
        { file: w.name, path: w.path, size: current.size, stored: w.taken },
        'a taken file was cut shorter after it was taken; not watched any longer',
      );
      this.end(w);
      return;
    }
    const quietMs = nowMs - w.changedAt;
    const expired = quietMs >= this.o.watchMs;
    if (current.size === w.taken) {
      if (expired && mode === 'tick') this.end(w);
      return;
    }
    if (mode === 'tick') {
      if (quietMs < this.o.stableMs || this.o.paused() || nowMs < w.retryAt) {
        if (expired && this.o.paused()) w.changedAt = nowMs - this.o.stableMs; // kept while paused
        return;
      }
    }
    const final = expired || mode === 'stopping';
    try {
      await storeGrowth(this.o, handle, w, current.size, final, mode === 'stopping');
      w.failures = 0;
    } catch (err) {
      w.failures += 1;
      w.retryAt = Date.now() + Math.min(30_000, 500 * 2 ** Math.min(w.failures, 10));
      w.changedAt = Math.max(w.changedAt, nowMs - this.o.watchMs + this.o.pollMs * 2); // not given up while refused
      this.o.log.error(
        { err, file: w.name, path: w.path },
        'buffer refused the part appended to a taken file; retrying',
      );
      if (mode === 'stopping') throw err;
    }
  }
}
