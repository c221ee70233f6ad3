import { statSync } from 'node:fs';

/**
 * How much of its disk the buffer takes: the one measurement every part uses (the status and its
 * metric, `buffer stats`, the byte quota derived from the disk, the start's vacuum decision, the
 * commit's checkpoint rule), so that they cannot disagree.
 *
 * The buffer is three files: the database, its write-ahead log (`-wal`) and the log's index
 * (`-shm`). The `-shm` counts: it is a real file in the buffer's folder, on the buffer's file
 * system, that SQLite keeps at its largest size until the last connection closes (32 KiB for
 * every 4,096 pages the log held), so `df` and `du` count its blocks, and room it takes is room
 * neither intake nor the reserve has. It is small beside the other two, but leaving it out made
 * the status's "size on disk" and the quota's view of the buffer differ for no reason.
 */

/** Bytes of each of the buffer's files at `path` (0 for one that is missing), and their sum. */
export interface BufferFiles {
  /** The database file. */
  db: number;
  /** The write-ahead log; missing after a clean close. */
  wal: number;
  /** The log's shared-memory index; missing after a clean close or before the first write. */
  shm: number;
  /** `db + wal + shm`. */
  total: number;
}

/**
 * Bytes of the database file alone (0 when there is none): what the write-ahead log's pages are
 * compared with to know how far they reach beyond its end (intake-writes.ts). One `stat`, as it
 * runs before every commit of reads.
 */
export function databaseFileBytes(path: string): number {
  return sizeOf(path);
}

/** Bytes of one file, 0 when there is none. */
function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    // A missing -wal or -shm is normal (clean close, or never opened for writing).
    return 0;
  }
}

/** The sizes of the buffer's files at `path` (see the module's comment for why `-shm` counts). */
export function bufferFiles(path: string): BufferFiles {
  const db = sizeOf(path);
  const wal = sizeOf(`${path}-wal`);
  const shm = sizeOf(`${path}-shm`);
  return { db, wal, shm, total: db + wal + shm };
}

/** Bytes of the buffer on disk: database, write-ahead log and its index ({@link bufferFiles}`.total`). */
export function bufferFileBytes(path: string): number {
  return bufferFiles(path).total;
}
