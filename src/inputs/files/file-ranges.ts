import { createHash } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { readBlocks } from './file-format.js';

/** Reading byte ranges of an open inbox file: a few bytes, a hash, where its complete lines end. */

/** Leading bytes of a file (or of its appended part) kept as `raw` of a file-level rejection. */
export const FILE_REJECTION_RAW_BYTES = 4096;

export const CR = 0x0d;
export const LF = 0x0a;

/** Bytes `[start, end)` of an open file (for small ranges). */
export async function readRange(handle: FileHandle, start: number, end: number): Promise<Buffer> {
  if (end <= start) return Buffer.alloc(0);
  const buffer = Buffer.alloc(end - start);
  const { bytesRead } = await handle.read(buffer, 0, end - start, start);
  return buffer.subarray(0, bytesRead);
}

/** SHA-256 (hex) of bytes `[start, end)` of an open file; streamed (memory: one 64 KiB block). */
export async function hashRange(handle: FileHandle, start: number, end: number): Promise<string> {
  const hash = createHash('sha256');
  for await (const block of readBlocks(handle, start, end, 256 * 1024, true)) hash.update(block);
  return hash.digest('hex');
}

/**
 * The offset just after the last line break in `[from, to)`, or undefined when there is none. A
 * CR as the very last byte does not count (its LF may still come).
 */
export async function completeLinesEnd(
  handle: FileHandle,
  from: number,
  to: number,
): Promise<number | undefined> {
  const block = 64 * 1024;
  for (let high = to; high > from; high -= block) {
    const low = Math.max(from, high - block);
    const buffer = Buffer.alloc(high - low);
    const { bytesRead } = await handle.read(buffer, 0, high - low, low);
    for (let i = bytesRead - 1; i >= 0; i--) {
      const byte = buffer[i];
      if (byte === LF) return low + i + 1;
      if (byte === CR && low + i !== to - 1) return low + i + 1;
    }
  }
  return undefined;
}
