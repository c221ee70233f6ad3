import type { Stats } from 'node:fs';

/**
 * What kind of file `stats` (from lstat or fstat) describes, in words, for a reason shown to a
 * person: "a FIFO (named pipe)", "a character device", "a folder"… Used where only a regular file
 * may be read (a files inbox, the configuration file).
 */
export function fileKind(stats: Stats): string {
  if (stats.isFile()) return 'a regular file';
  if (stats.isSymbolicLink()) return 'a symbolic link';
  if (stats.isDirectory()) return 'a folder';
  if (stats.isFIFO()) return 'a FIFO (named pipe)';
  if (stats.isSocket()) return 'a socket';
  if (stats.isCharacterDevice()) return 'a character device';
  if (stats.isBlockDevice()) return 'a block device';
  return 'not a regular file';
}
