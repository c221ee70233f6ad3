import type Database from 'better-sqlite3';
import { isDiskFull } from '../errors.js';

const ROLLBACK = Symbol('rollback');

/**
 * The buffer's file as room on a disk: what the disk guard (disk-guard.ts) and back-pressure
 * (back-pressure.ts) do to and ask of the database file itself (pages, the write-ahead log's
 * checkpoint, vacuum, a probe of free room), as opposed to its rows. Built by `BufferStore.open` on
 * its connection; the probe's statement is prepared once, here (the rest are pragmas).
 */
export class BufferSpace {
  private readonly probe: Database.Statement;

  constructor(private readonly db: Database.Database) {
    this.probe = db.prepare(`INSERT INTO space_probe (pad) VALUES (zeroblob(65536))`);
  }

  /**
   * Whether the disk has room again after SQLITE_FULL: writes 64 KiB and rolls back. Answers false
   * while SQLite still reports the disk full; other errors are thrown.
   */
  probeSpace(): boolean {
    try {
      this.db
        .transaction(() => {
          this.probe.run();
          throw ROLLBACK;
        })
        .immediate();
    } catch (err) {
      if (err === ROLLBACK) return true;
      if (isDiskFull(err)) return false;
      throw err;
    }
    return true;
  }

  /**
   * Whether more than 90 % of `max_page_count` is used (pages less free pages); false when no
   * limit below SQLite's default is set (tests and embedded limits set one).
   */
  nearPageLimit(): boolean {
    const max = this.db.pragma('max_page_count', { simple: true }) as number;
    if (max >= 1_000_000_000) return false;
    const used = (this.db.pragma('page_count', { simple: true }) as number) - this.freePages();
    return used > max * 0.9;
  }

  /** Bytes of the pages in use (`page_count` less `freelist_count`, times `page_size`): what rows take. */
  usedBytes(): number {
    const pageSize = this.db.pragma('page_size', { simple: true }) as number;
    const pages = this.db.pragma('page_count', { simple: true }) as number;
    return (pages - this.freePages()) * pageSize;
  }

  /** Bytes of the free pages inside the file, which `incremental_vacuum` returns to the disk. */
  freeBytes(): number {
    return this.freePages() * (this.db.pragma('page_size', { simple: true }) as number);
  }

  /** Pages free inside the file (`freelist_count`). */
  freePages(): number {
    return this.db.pragma('freelist_count', { simple: true }) as number;
  }

  /** `wal_checkpoint(TRUNCATE)`: copies the log into the database file and empties it. Throws what SQLite throws. */
  checkpointTruncate(): void {
    this.db.pragma('wal_checkpoint(TRUNCATE)');
  }

  /** Returns up to `pages` free pages to the file system (`incremental_vacuum`). Throws what SQLite throws. */
  incrementalVacuum(pages: number): void {
    this.db.pragma(`incremental_vacuum(${pages})`);
  }

  /** Whether the file is in `auto_vacuum = INCREMENTAL` (freed pages can be returned). */
  incrementalAutoVacuum(): boolean {
    return (this.db.pragma('auto_vacuum', { simple: true }) as number) === 2;
  }

  /**
   * Switches the file to `auto_vacuum = INCREMENTAL`: one `VACUUM`, which rewrites the whole file
   * (about its size again in free space), then a checkpoint. Throws what SQLite throws.
   */
  switchToIncrementalVacuum(): void {
    this.db.pragma('auto_vacuum = INCREMENTAL');
    this.db.exec('VACUUM');
    this.db.pragma('wal_checkpoint(TRUNCATE)');
  }
}
