import { dirname } from 'node:path';
import { userInfo } from 'node:os';
import { isDiskFull } from '../errors.js';

/**
 * Whether a failure to open the buffer needs a person (a corrupt file, not a database, a schema
 * newer than this gateway, no permission) rather than time: the gateway then exits with its own
 * code (4, docs/cli.md), which the systemd unit does not restart into a loop. A full disk or a
 * lock held by another process pass by themselves and are not counted here.
 */
export function unopenable(err: unknown): boolean {
  if (isDiskFull(err)) return false;
  const code = (err as { code?: unknown }).code;
  return !(typeof code === 'string' && /^SQLITE_(BUSY|LOCKED|IOERR|NOMEM|INTERRUPT)/.test(code));
}

/** For an open or write that failed on permissions: who runs, and what to give them. */
export function permissionHint(path: string, err: unknown): string {
  const code = (err as { code?: string }).code ?? '';
  const message = (err as Error).message ?? '';
  if (
    !/READONLY|CANTOPEN|PERM|ACCES/i.test(code) &&
    !/readonly|unable to open|permission/i.test(message)
  )
    return '';
  const uid = process.getuid?.();
  let user = uid === undefined ? 'this user' : `uid ${uid}`;
  try {
    user = `${userInfo().username} (uid ${uid})`;
  } catch {
    // no passwd entry: the uid alone
  }
  return ` (the gateway runs as ${user}; it must be able to write ${path} and create files in ${dirname(path)}: chown that user the file, its -wal and -shm, and the folder)`;
}
