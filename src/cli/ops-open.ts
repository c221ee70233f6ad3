import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { loadConfig } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import { BufferReader } from '../queries/reader.js';
import { ErrorCodes, isBufferUnopenable, isGatewayError } from '../errors.js';
import type { Clock } from '../clock.js';
import { CommandExit, ExitCodes } from './exit.js';

/**
 * What the commands that read the buffer beside the daemon share: their options (`--config`,
 * `--buffer`, `--json`), opening the buffer read-only with the exit code for each way it fails,
 * and the failure line on stderr.
 */

/** What the operations commands need from the process edge. */
export interface OpsIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  cwd: string;
  env: Record<string, string | undefined>;
  /** Effective user id (refuses, as root, to create files in the service's buffer folder). */
  uid?: number;
  now?: Clock;
}

export interface BufferOptions {
  /** Unset when not given: the default applies unless `--buffer` names the file. */
  config?: string;
  buffer?: string;
  json?: boolean;
}

export const DEFAULT_CONFIG = '/etc/scan-gateway/config.yaml';
/** The exit codes of the buffer commands, for their help. */
export const EXIT_HELP =
  '\nExit codes: 0 done, 1 the buffer cannot be read now (missing, locked, a disk error) or the backup failed, 2 usage or configuration error,\n' +
  "4 the file is no gateway buffer (empty, another program's database), is damaged or has a newer schema: it is left as it was.\n" +
  'Run as the service user (sudo -u scan-gateway …) so no file in the buffer folder ends up owned by root.';

/** Adds `--config`, `--buffer` and `--json` to a command that reads the buffer. */
export function withBuffer(command: Command): Command {
  return command
    .option(
      '-c, --config <file>',
      `gateway configuration: its buffer.path, or with --buffer only its site.timezone and secrets (default: "${DEFAULT_CONFIG}" without --buffer)`,
    )
    .option(
      '--buffer <file>',
      'use this SQLite file instead of the configured buffer (a backup, say)',
    )
    .option('--json', 'print the result as JSON');
}

/**
 * Opens the buffer read-only. Exit 2 for a bad configuration; 1 when the file is missing, locked
 * or the disk fails; 4 when it is no gateway buffer (empty, another program's database), damaged
 * or of a newer schema: it is never written then.
 */
export function open(
  io: OpsIo,
  opts: BufferOptions,
  command: string,
): { db: BufferReader; path: string; timezone: string; config?: GatewayConfig } {
  let timezone = 'UTC';
  let config: GatewayConfig | undefined;
  // A file given with --buffer (a backup, another node's disk) is read with the site's time zone
  // and secrets when --config names the configuration too; without it, in UTC.
  const file = opts.config ?? (opts.buffer ? undefined : DEFAULT_CONFIG);
  if (file !== undefined) {
    let loaded: ReturnType<typeof loadConfig>;
    try {
      loaded = loadConfig(file, { baseDir: io.cwd, env: io.env, skipSecret: true });
    } catch (err) {
      fail(io, command, (err as Error).message, ExitCodes.USAGE);
    }
    timezone = loaded.config.site.timezone;
    config = loaded.config;
  }
  const path = opts.buffer ? resolve(io.cwd, opts.buffer) : config?.buffer.path;
  if (path === undefined) fail(io, command, 'no configuration and no --buffer', ExitCodes.USAGE);
  if (!existsSync(path))
    fail(
      io,
      command,
      `no buffer at ${path} (has the gateway run with this configuration?)`,
      ExitCodes.FAILED,
    );
  if (
    io.uid === 0 &&
    statSync(path).uid !== 0 &&
    !(existsSync(`${path}-wal`) && existsSync(`${path}-shm`))
  ) {
    // Opening would create ${path}-wal and -shm owned by root, which the service user then cannot open.
    fail(
      io,
      command,
      `${path} belongs to uid ${statSync(path).uid}; run this as that user (e.g. sudo -u scan-gateway scan-gateway ${command} …)`,
      ExitCodes.USAGE,
    );
  }
  try {
    const db = new BufferReader(path);
    return { db, path, timezone, ...(config ? { config } : {}) };
  } catch (err) {
    // Not a buffer, empty, damaged, a newer schema: a person must look (4); a lock or the disk: 1.
    fail(
      io,
      command,
      (err as Error).message,
      isBufferUnopenable(err) || isGatewayError(err, ErrorCodes.BUFFER_DAMAGED)
        ? ExitCodes.BUFFER_UNUSABLE
        : ExitCodes.FAILED,
    );
  }
}

/** Writes `scan-gateway <command>: <message>` to stderr and exits with `code`. */
export function fail(io: OpsIo, command: string, message: string, code: number): never {
  io.stderr.write(`scan-gateway ${command}: ${message}\n`);
  throw new CommandExit(code, message);
}
