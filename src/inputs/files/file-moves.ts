import { lstat, mkdir, rename, writeFile } from 'node:fs/promises';
import { basename, extname, join } from 'node:path';

/** Sub-folder of the watched folder holding files whose items are stored. */
export const PROCESSED_DIR = 'processed';
/** Sub-folder of the watched folder holding files that could not be taken, each with a reason. */
export const FAILED_DIR = 'failed';
/** Suffix of the reason file written beside a file in `failed/`. */
export const ERROR_FILE_SUFFIX = '.error.txt';

/** `YYYY-MM-DD` of `date` in the gateway's local time (the day an operator looks for). */
export function localDateFolder(date: Date): string {
  const mm = String(date.getMonth() + 1).padStart(2, '0');
  const dd = String(date.getDate()).padStart(2, '0');
  return `${date.getFullYear()}-${mm}-${dd}`;
}

/**
 * A path in `dir` for `name` that is not taken: `name` itself, else `stem-1.ext`, `stem-2.ext`…
 * so a file dropped twice under the same name never overwrites the earlier one.
 */
export async function freePath(dir: string, name: string): Promise<string> {
  const ext = extname(name);
  const stem = name.slice(0, name.length - ext.length);
  for (let n = 0; ; n++) {
    const candidate = join(dir, n === 0 ? name : `${stem}-${n}${ext}`);
    if (!(await exists(candidate)) && !(await exists(candidate + ERROR_FILE_SUFFIX)))
      return candidate;
  }
}

/**
 * Moves `file` to `<root>/processed/YYYY-MM-DD/` (local date of `at`), keeping its name where free.
 * Returns the new path (`target` when given, from {@link processedTarget}). Same file system as
 * the watched folder, so `rename` is atomic (a writer still holding the file open writes on into
 * the moved file).
 */
export async function moveToProcessed(
  file: string,
  root: string,
  at: Date,
  target?: string,
): Promise<string> {
  const to = target ?? (await processedTarget(file, root, at));
  await rename(file, to);
  return to;
}

/** Where {@link moveToProcessed} would put `file` now (its folder created), for a rejection to name it. */
export async function processedTarget(file: string, root: string, at: Date): Promise<string> {
  const dir = join(root, PROCESSED_DIR, localDateFolder(at));
  await mkdir(dir, { recursive: true });
  return freePath(dir, basename(file));
}

/** Where {@link moveToFailed} would put `file` now (its folder created), for a rejection to name it. */
export async function failedTarget(file: string, root: string): Promise<string> {
  const dir = join(root, FAILED_DIR);
  await mkdir(dir, { recursive: true });
  return freePath(dir, basename(file));
}

/**
 * Moves `file` to `<root>/failed/` and writes `<name>.error.txt` beside it with `reason`, for the
 * operator who fixes the file and drops it again; `facts.scrub` cuts known secrets out of the text. Returns the new path (`to` when given, from
 * {@link failedTarget}).
 */
export async function moveToFailed(
  file: string,
  root: string,
  reason: string,
  facts: {
    inputId: string;
    at: Date;
    scrub?: ((text: string) => string) | undefined;
    /** Items of it committed before it failed (chunks). */
    stored?: number;
  },
  to?: string,
): Promise<string> {
  const target = to ?? (await failedTarget(file, root));
  await rename(file, target);
  const text = [
    (facts.stored ?? 0) > 0
      ? `scan-gateway could not take this file whole; its first ${facts.stored} items were stored, the rest was not.`
      : `scan-gateway could not take this file; none of its rows were stored.`,
    `file:   ${basename(file)}`,
    `input:  ${facts.inputId}`,
    `time:   ${facts.at.toISOString()}`,
    `reason: ${reason}`,
    `Fix the file and drop it into the folder again.`,
    '',
  ].join('\n');
  // The reason may quote the file, and the file may hold a secret: the log's scrubber.
  // Written aside and renamed, so whoever opens the .error.txt (a person, a script watching failed/)
  // never finds it empty or half written.
  const errorFile = target + ERROR_FILE_SUFFIX;
  await writeFile(`${errorFile}.part`, facts.scrub ? facts.scrub(text) : text, 'utf8');
  await rename(`${errorFile}.part`, errorFile);
  return target;
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}
