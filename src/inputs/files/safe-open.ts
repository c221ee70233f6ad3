import { constants, type Stats } from 'node:fs';
import { lstat, open, readlink, type FileHandle } from 'node:fs/promises';
import { ErrorCodes, GatewayError } from '../../errors.js';
import { fileKind } from '@scan-gateway/service-kit/read-file';

/**
 * Flags of every open of a file in a files inbox: read only, never through a symbolic link
 * (`O_NOFOLLOW`: the open fails with ELOOP on a link), and without waiting (`O_NONBLOCK`: opening
 * a FIFO for reading would otherwise wait for a writer, and block every file behind it).
 */
const INBOX_OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * The error for an inbox entry that is not a regular file: the whole entry goes to `failed/` with
 * this message, and not a byte of it (or of what a link points to) is read.
 */
export function notRegularFileError(fileName: string, kind: string): GatewayError {
  return new GatewayError(
    ErrorCodes.INPUT,
    `${kind}, not a regular file: only regular files dropped into the folder are read (nothing was read from it); drop the file itself`,
    { details: { file: fileName } },
  );
}

/**
 * The error for an inbox file with more than one name (a hard link): the entry goes to `failed/`
 * with this message and not a byte of it is read. A hard link needs no permission on the file it
 * names, only on the inbox: whoever may drop files could so hand the gateway its own TLS key, whose
 * first bytes would then show in the status, the page and `failures`.
 */
export function hardLinkError(fileName: string, links: number, inputId: string): GatewayError {
  return new GatewayError(
    ErrorCodes.INPUT,
    `a hard link (this file has ${links} names): its content may be a file from elsewhere, such as a key, so nothing was read from it; drop a copy of the file, or set allowHardLinks: true on input ${inputId} if the writer makes hard links on purpose`,
    { details: { file: fileName, links } },
  );
}

/** How {@link openInboxFile} treats a file with more than one name. */
export interface InboxOpenOptions {
  /** Reads a hard link too (the files input's `allowHardLinks`); default false: refused. */
  allowHardLinks?: boolean;
  /** The input, for the refusal's message. */
  inputId?: string;
}

/** An inbox file opened for reading, and its fstat taken on the open descriptor. */
export interface OpenedFile {
  handle: FileHandle;
  stats: Stats;
}

/**
 * Opens a file of a files inbox for reading, the one way every read, hash and parse of an inbox
 * file goes: refused (a {@link notRegularFileError}, before and without opening it) when `lstat`
 * shows a symbolic link, FIFO, socket, device or folder; then opened with `O_NOFOLLOW |
 * O_NONBLOCK` and checked again with `fstat` on the descriptor (an entry swapped between the two
 * looks is refused the same way). Symbolic links are never followed, wherever they point (inside
 * the inbox too): a link is how a file outside the inbox would be read. A hard link (`nlink` above
 * 1 on the descriptor) is refused the same way unless `options.allowHardLinks`.
 *
 * @throws GatewayError `SCANGW_E_INPUT` ({@link notRegularFileError}) for anything but a regular
 *   file; ({@link hardLinkError}) for a file of more than one name.
 * @throws the file system error when it cannot be opened (ENOENT, EACCES…).
 */
export async function openInboxFile(
  path: string,
  fileName: string,
  options: InboxOpenOptions = {},
): Promise<OpenedFile> {
  const before = await lstat(path);
  if (!before.isFile()) throw notRegularFileError(fileName, await describe(path, before));
  let handle: FileHandle;
  try {
    handle = await open(path, INBOX_OPEN_FLAGS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // Replaced by a link (ELOOP from O_NOFOLLOW) or a socket (ENXIO) since the lstat.
    if (code === 'ELOOP' || code === 'ENXIO') {
      const now = await lstat(path).catch(() => undefined);
      if (now && !now.isFile()) throw notRegularFileError(fileName, await describe(path, now));
    }
    throw err;
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) throw notRegularFileError(fileName, fileKind(stats));
    if (stats.nlink > 1 && !options.allowHardLinks)
      throw hardLinkError(fileName, stats.nlink, options.inputId ?? 'this files input');
    return { handle, stats };
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/** Opens with {@link openInboxFile}, runs `fn`, closes. */
export async function withInboxFile<T>(
  path: string,
  fileName: string,
  fn: (opened: OpenedFile) => Promise<T>,
  options: InboxOpenOptions = {},
): Promise<T> {
  const opened = await openInboxFile(path, fileName, options);
  try {
    return await fn(opened);
  } finally {
    await opened.handle.close();
  }
}

/** The kind, and for a link where it points (its target's name, never its content). */
async function describe(path: string, stats: Stats): Promise<string> {
  if (!stats.isSymbolicLink()) return fileKind(stats);
  const target = await readlink(path).catch(() => undefined);
  return target === undefined ? 'a symbolic link' : `a symbolic link to ${target}`;
}
