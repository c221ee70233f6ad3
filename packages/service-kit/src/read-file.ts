/*
 * Bounded reads of configuration files, shared by the daemon (its configuration, TLS files) and
 * the sandbox (its --config file): both must refuse a FIFO, a device or a huge file with a reason.
 */
import { closeSync, constants, fstatSync, openSync, readSync, statSync, type Stats } from 'node:fs';
import { ErrorCodes, GatewayError } from './errors.js';

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

/**
 * The largest configuration file read, in bytes (1 MiB). The biggest realistic site
 * configuration (many inputs, DCPs, rules and lookup tables) is tens of kB; a file larger than
 * this is not a configuration (a log, a data file, a device named by mistake), and reading and
 * parsing it whole would only cost memory before failing.
 */
export const CONFIG_MAX_BYTES = 1024 * 1024;

/**
 * Opening never waits: without `O_NONBLOCK`, opening a FIFO that has no writer blocks until one
 * comes. Symbolic links are followed (a link in /etc/scan-gateway to the real file is common).
 */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK;

/**
 * Reads a configuration file whole, at most `maxBytes` bytes. The file is opened first and its
 * type and size are taken with `fstat` on the open descriptor, so what is checked is what is read.
 *
 * @param file path of the file; a symbolic link to a regular file is read like the file.
 * @param maxBytes largest size accepted, in bytes; defaults to {@link CONFIG_MAX_BYTES}.
 * @returns the file's bytes.
 * @throws GatewayError `SCANGW_E_CONFIG` whose message (without the file name in front: callers
 *   prefix it) says what the file is when it is not a regular file (FIFO, device, socket, folder),
 *   or its size and the limit when it is larger than `maxBytes` (also when it grows past the limit
 *   while being read); nothing of such a file is read beyond `maxBytes + 1` bytes.
 * @throws the file system error when it cannot be opened or read (ENOENT, EACCES…).
 */
export function readConfigFile(file: string, maxBytes: number = CONFIG_MAX_BYTES): Buffer {
  let fd: number;
  try {
    fd = openSync(file, OPEN_FLAGS);
  } catch (err) {
    // A Unix socket cannot be opened at all (ENXIO): say what it is rather than the errno.
    if ((err as NodeJS.ErrnoException).code === 'ENXIO') {
      const stats = statOrUndefined(file);
      if (stats && !stats.isFile()) throw notRegularFile(fileKind(stats));
    }
    throw err;
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) throw notRegularFile(fileKind(stats));
    if (stats.size > maxBytes) throw tooLarge(`is ${stats.size} bytes`, maxBytes);
    // One byte more than the limit: a file that grew past it while being read is found without reading on.
    const buffer = Buffer.allocUnsafe(maxBytes + 1);
    let length = 0;
    while (length < buffer.length) {
      const n = readSync(fd, buffer, length, buffer.length - length, null);
      if (n === 0) break;
      length += n;
    }
    if (length > maxBytes) throw tooLarge('grew while being read', maxBytes);
    return buffer.subarray(0, length);
  } finally {
    closeSync(fd);
  }
}

function statOrUndefined(file: string) {
  try {
    return statSync(file);
  } catch {
    return undefined;
  }
}

function notRegularFile(kind: string): GatewayError {
  return new GatewayError(
    ErrorCodes.CONFIG,
    `is ${kind}, not a regular file: nothing was read; name the configuration file itself (a symbolic link to one is fine)`,
  );
}

function tooLarge(what: string, maxBytes: number): GatewayError {
  return new GatewayError(
    ErrorCodes.CONFIG,
    `${what}, more than the ${maxBytes}-byte limit for a configuration file (${formatMiB(maxBytes)}): nothing was parsed; ` +
      'a site configuration is tens of kB, so check that the path names the configuration and not another file',
  );
}

function formatMiB(bytes: number): string {
  return `${Number((bytes / (1024 * 1024)).toFixed(2))} MiB`;
}
