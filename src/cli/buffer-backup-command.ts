import { existsSync, realpathSync, renameSync, rmSync, statSync, type Stats } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { checkBufferCopy } from '../buffer/backup-check.js';
import { fmtBytes } from '../health/page-render.js';
import type { Clock } from '../clock.js';
import { CommandExit, ExitCodes } from './exit.js';
import { EXIT_HELP, fail, open, withBuffer, type BufferOptions, type OpsIo } from './ops-open.js';

/**
 * `buffer backup <file>`: an online copy of the buffer (VACUUM INTO, one snapshot) written under
 * `<file>.partial`, checked, then renamed. It never replaces a folder, a device or the live buffer.
 */
export function registerBufferBackupCommand(buffer: Command, io: OpsIo, now: Clock): void {
  withBuffer(
    buffer
      .command('backup')
      .description(
        'copy the buffer to <file> while the gateway runs (one consistent snapshot, VACUUM INTO), then check the copy',
      ),
  )
    .argument('<file>', 'where to write the copy (one self-contained SQLite file)')
    .option('--force', 'replace <file> if it exists')
    .addHelpText(
      'after',
      `\nExample:\n  sudo -u scan-gateway scan-gateway buffer backup /var/lib/scan-gateway/backup-$(date +%F).db --config /etc/scan-gateway/config.yaml\n\n` +
        `The copy is consistent (one snapshot), checked with PRAGMA quick_check, and written under a temporary name first. Restore: docs/operations.md.${EXIT_HELP}`,
    )
    .action(async (file: string, opts: BufferOptions & { force?: boolean }) => {
      const target = resolve(io.cwd, file);
      // Before anything is written: the copy goes to <file>.partial first, and a folder (or a
      // device, a FIFO) can never be replaced by it, --force or not.
      const existing = statOrUndefined(target);
      if (existing && !existing.isFile())
        fail(
          io,
          'buffer backup',
          `${target} is ${existing.isDirectory() ? 'a directory' : 'not a regular file'}; give the name of the copy's file (e.g. ${join(target, 'buffer-backup.db')})`,
          ExitCodes.USAGE,
        );
      const { db, path } = open(io, opts, 'buffer backup');
      if (isBufferFile(target, path)) {
        db.close();
        fail(
          io,
          'buffer backup',
          `${target} is the buffer itself (or its -wal/-shm); write the copy somewhere else`,
          ExitCodes.USAGE,
        );
      }
      if (existsSync(target) && !opts.force) {
        db.close();
        fail(io, 'buffer backup', `${target} exists; use --force to replace it`, ExitCodes.USAGE);
      }
      const started = now();
      const temp = `${target}.partial`;
      try {
        rmSync(temp, { force: true });
        db.copyTo(temp);
      } catch (err) {
        rmSync(temp, { force: true });
        fail(
          io,
          'buffer backup',
          `copying ${path} to ${target} failed: ${(err as Error).message}`,
          ExitCodes.FAILED,
        );
      } finally {
        db.close();
      }
      let summary: { integrity: string; reads: number; scans: number; batches: number };
      try {
        summary = checkBufferCopy(temp);
      } catch (err) {
        rmSync(temp, { force: true });
        fail(
          io,
          'buffer backup',
          `the copy failed its check: ${(err as Error).message}`,
          ExitCodes.FAILED,
        );
      }
      renameSync(temp, target);
      const result = {
        source: path,
        file: target,
        bytes: statSync(target).size,
        ms: now() - started,
        ...summary,
      };
      io.stdout.write(
        opts.json
          ? `${JSON.stringify(result)}\n`
          : `Backed up ${path} to ${target}: ${fmtBytes(result.bytes)}, ${result.reads} reads, ${result.scans} scans, ${result.batches} batches, check ${result.integrity} (${result.ms} ms)\n`,
      );
      throw new CommandExit(ExitCodes.OK);
    });
}

function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

/**
 * Whether `target` is the buffer at `buffer` or one of its SQLite companions, by real path, so
 * that `--force` can never replace the live database under the running gateway.
 */
function isBufferFile(target: string, buffer: string): boolean {
  const real = (p: string): string => {
    try {
      return realpathSync(p);
    } catch {
      // Not there (yet): its folder's real path and its name.
      try {
        return join(realpathSync(dirname(p)), basename(p));
      } catch {
        return resolve(p);
      }
    }
  };
  const t = real(target);
  const b = real(buffer);
  return [b, `${b}-wal`, `${b}-shm`, `${b}-journal`].includes(t);
}
