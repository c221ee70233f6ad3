import { ErrorCodes, GatewayError, isDiskFull } from '../errors.js';
import { permissionHint, unopenable } from './open-errors.js';

/** `code` of an error from better-sqlite3 (`SQLITE_IOERR_SHORT_READ`…), or '' for any other. */
function sqliteCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_') ? code : '';
}

/**
 * An error of SQLite (better-sqlite3's `SqliteError`) met on the buffer at `path`, as a
 * `GatewayError` whose message says what happened in the gateway's words and what to do; SQLite's
 * own text stays at the end in brackets (for a search, a support ticket) and whole as `cause`.
 * A `GatewayError` is returned as it is.
 *
 * `doing` is the step in words, as the message starts: `cannot open the buffer`, `reading the
 * buffer failed`… `atOpen`: a file that is no buffer or damaged is `SCANGW_E_BUFFER_UNOPENABLE`
 * (the daemon exits 4) rather than `SCANGW_E_BUFFER_DAMAGED`.
 *
 * Codes: `SCANGW_E_BUFFER_DISK_FULL` (SQLITE_FULL), `SCANGW_E_BUFFER_IO` (SQLITE_IOERR…: the disk
 * or file system failed), `SCANGW_E_BUFFER_DAMAGED` or `…_UNOPENABLE` (SQLITE_CORRUPT, NOTADB, a
 * table or column missing), `…_UNOPENABLE` (no permission), `SCANGW_E_BUFFER` for the rest (a lock
 * held by another process among them).
 */
export function bufferFailure(
  err: unknown,
  path: string,
  doing: string,
  atOpen = false,
): GatewayError {
  if (err instanceof GatewayError) return err;
  const code = sqliteCode(err);
  const sqlite = err instanceof Error ? err.message : String(err);
  const said = code ? ` (SQLite: ${sqlite})` : `: ${sqlite}`;
  const make = (
    errorCode: (typeof ErrorCodes)[keyof typeof ErrorCodes],
    what: string,
    retryable = false,
  ) =>
    new GatewayError(errorCode, `${doing} ${path}: ${what}${said}`, {
      cause: err,
      retryable,
    });
  if (isDiskFull(err))
    return make(
      ErrorCodes.BUFFER_DISK_FULL,
      'its disk is full, nothing was written: free space on it (`df -h`) and run this again',
      true,
    );
  if (code.startsWith('SQLITE_IOERR'))
    return make(
      ErrorCodes.BUFFER_IO,
      'the disk or file system failed to read or write it: check that the disk is mounted and healthy (`dmesg`, `df -h`) and that the file and its -wal are still there, then run this again; if it keeps failing, restore a backup (docs/operations.md)',
      true,
    );
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'))
    return make(
      ErrorCodes.BUFFER,
      'another process holds it locked (a gateway running on it, an adopt, a long backup): wait for it to finish or stop it, then run this again',
      true,
    );
  if (
    code.startsWith('SQLITE_CORRUPT') ||
    code.startsWith('SQLITE_NOTADB') ||
    /no such (table|column|view|index)/i.test(sqlite)
  )
    return make(
      atOpen ? ErrorCodes.BUFFER_UNOPENABLE : ErrorCodes.BUFFER_DAMAGED,
      'it is damaged or not a gateway buffer: check the path (buffer.path, --buffer), and if it is right, stop the gateway and restore a backup (docs/operations.md, "Restore")',
    );
  const hint = permissionHint(path, err);
  if (hint) return make(ErrorCodes.BUFFER_UNOPENABLE, `no permission to read or write it${hint}`);
  if (atOpen && code && unopenable(err))
    return make(ErrorCodes.BUFFER_UNOPENABLE, 'SQLite cannot open it');
  return make(ErrorCodes.BUFFER, 'SQLite failed on it');
}

/**
 * `target` with every method call passed through {@link bufferFailure}: what the CLI's commands
 * call on the buffer (the reports, the dead letters) ends in a `GatewayError` that says what to
 * do, never in SQLite's words alone.
 */
export function withBufferFailures<T extends object>(target: T, path: string, doing: string): T {
  return new Proxy(target, {
    get(obj, key, receiver) {
      const value = Reflect.get(obj, key, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        try {
          return (value as (...a: unknown[]) => unknown).apply(obj, args);
        } catch (err) {
          throw bufferFailure(err, path, doing);
        }
      };
    },
  });
}
