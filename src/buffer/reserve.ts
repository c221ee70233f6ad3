import {
  closeSync,
  fsyncSync,
  openSync,
  statSync,
  truncateSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import type { Logger } from '../log.js';

const CHUNK = 64 * 1024;

/**
 * The disk guard's reserve (disk-guard.ts): a file `<buffer>.reserve` of real (not sparse) bytes
 * that the gateway owns. When SQLite reports the disk full it is cut to its last part and the
 * write-ahead log checkpointed (`checkpoint`), so that the deletes of early pruning and delivery's
 * batch updates find room in the log; the last part goes when a checkpoint fails with SQLITE_FULL
 * after that. It is written again once the file system has room for it.
 */
export class ReserveFile {
  /** Bytes of the file held now (while released: its last part, then 0). */
  held = 0;
  /** Released on a full disk; false again once written again. */
  released = false;

  constructor(
    readonly path: string,
    /** Bytes of the whole reserve; 0: no reserve. */
    readonly size: number,
    private readonly logger: Logger,
    /** `wal_checkpoint(TRUNCATE)` of the buffer; throws what SQLite throws. */
    private readonly checkpoint: () => void,
  ) {}

  /**
   * Releases the reserve but its last part ({@link lastResortBytes}): that is kept for the
   * write-ahead log's checkpoint, see {@link releaseLastResort}.
   */
  release(): void {
    if (this.released || this.size === 0) return;
    const keep = this.lastResortBytes();
    try {
      truncateSync(this.path, keep);
      this.held = keep;
    } catch {
      // Already gone (removed by hand): nothing to release.
      this.held = 0;
    }
    this.released = true;
    // The log first, before any prune, vacuum step or status write appends to it: the reserve's
    // room is what its checkpoint needs to copy pages beyond the end of the database file.
    try {
      this.checkpoint();
    } catch {
      // Still no room (or a reader holds the log): the guard's returnPages tries again at the check that follows.
    }
    this.logger.warn(
      { path: this.path },
      'buffer disk full: released the reserve so that delivery and pruning can write',
    );
  }

  /**
   * The reserve's last part, kept when the rest is released: a sixteenth, at most 256 KiB. Small,
   * as the rest must take one intake commit's new pages (about 3.7 MB measured, 1,000 scans of
   * 600-character references); enough for the few new pages a prune or a delivery step adds.
   */
  private lastResortBytes(): number {
    return Math.min(256 * 1024, Math.floor(this.size / 16));
  }

  /**
   * A checkpoint failed with SQLITE_FULL after the reserve was released: what was written since
   * (a delivery step's updates can fill the disk to its last byte) left no room for the log's
   * few pages beyond the end of the database file, and without the checkpoint the log is never
   * emptied. Its last part is deleted and the log checkpointed at once, before anything else
   * writes (seen before on the MQTT tmpfs test: stuck for good for want of two pages).
   */
  releaseLastResort(): void {
    if (!this.released || this.held === 0) return;
    try {
      unlinkSync(this.path);
    } catch {
      // Already gone.
    }
    this.held = 0;
    try {
      this.checkpoint();
    } catch {
      // The caller logs the failure; the next check tries again.
    }
    this.logger.warn(
      { path: this.path },
      'buffer disk full: released the last of the reserve for the write-ahead log checkpoint',
    );
  }

  /** Writes the reserve with real bytes (a sparse file would free nothing when deleted). */
  write(): void {
    if (this.size === 0) return;
    let fd: number | undefined;
    try {
      let have = 0;
      try {
        have = statSync(this.path).size;
      } catch {
        have = 0;
      }
      if (have < this.size) {
        fd = openSync(this.path, 'a', 0o600);
        const zeros = Buffer.alloc(CHUNK, 0xa5);
        for (let n = have; n < this.size; n += CHUNK)
          writeSync(fd, zeros, 0, Math.min(CHUNK, this.size - n));
        fsyncSync(fd);
      }
      const wasReleased = this.released;
      this.held = this.size;
      this.released = false;
      if (wasReleased)
        this.logger.info(
          { path: this.path, bytes: this.size },
          'buffer disk has room again: reserve written again',
        );
    } catch (err) {
      // No room for it (yet): held as released, written again at a later check.
      try {
        unlinkSync(this.path);
      } catch {
        // nothing written
      }
      this.released = true;
      this.held = 0;
      this.logger.warn(
        { err, path: this.path },
        'cannot write the buffer reserve; will try again when there is room',
      );
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }
}
