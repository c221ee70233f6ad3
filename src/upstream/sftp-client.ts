import type { Readable } from 'node:stream';
import { hostKeyFingerprint } from '@scan-gateway/contract/host-key';
import SftpClient from 'ssh2-sftp-client';
import type { UpstreamConfig } from '../config/schema.js';
import { ErrorCodes, GatewayError, type ErrorCode } from '../errors.js';

/** The SFTP settings of `upstream.sftp` with the login read by config/secrets.ts. */
export interface SftpConnectOptions {
  sftp: NonNullable<UpstreamConfig['sftp']>;
  /** Default user name when `sftp.username` is not set (contract §5: the client id). */
  clientId: string;
  privateKey?: string | undefined;
  password?: string | undefined;
  /**
   * Slowest transfer still allowed to finish, bytes/s (`upstream.minUploadBytesPerSec`): a
   * transfer of n bytes gets `connectTimeoutMs` plus n at this rate, then it is cut. Default 32 KiB/s.
   */
  minBytesPerSec?: number;
}

/**
 * One SFTP session: the few operations the crash-safe transfer needs. Every failure is
 * a {@link GatewayError} with an `SCANGW_E_SFTP_*` code (see {@link sftpError}).
 */
export interface SftpSession {
  /** Size of the remote file in bytes, or undefined when it does not exist. */
  size(path: string): Promise<number | undefined>;
  /** Removes a remote file; a file that is not there is fine. */
  remove(path: string): Promise<void>;
  /** Renames a remote file; fails when `to` exists (SFTP v3 rename does not replace). */
  rename(from: string, to: string): Promise<void>;
  /** Writes `body` to a new or truncated remote file, streamed. */
  write(path: string, body: Readable): Promise<void>;
  /** Names in a remote folder (for tests and the CLI's report). */
  list(dir: string): Promise<string[]>;
  /** Ends the connection; an operation in flight fails. */
  close(): Promise<void>;
}

/** Opens SFTP sessions (a seam: tests may hand the uploader another one). */
export interface SftpConnector {
  /** The configured folder the batch files go to. */
  readonly remoteDir: string;
  connect(): Promise<SftpSession>;
  /** Longest a whole transfer of `bytes` may take, in ms (see {@link SftpConnectOptions.minBytesPerSec}). */
  deadlineMs(bytes: number): number;
}

/**
 * A connector over ssh2-sftp-client (on ssh2). The server's host key must match
 * `upstream.sftp.hostKey` (no trust on first use): a mismatch ends the handshake before the login
 * is sent and fails with `SCANGW_E_SFTP_HOST_KEY`, naming both fingerprints.
 */
export function sftpConnector(options: SftpConnectOptions): SftpConnector {
  const { sftp } = options;
  const expected = sftp.hostKey.replace(/=+$/, '');
  const minBytesPerSec = options.minBytesPerSec ?? 32 * 1024;
  return {
    remoteDir: sftp.remoteDir,
    deadlineMs: (bytes) => sftp.connectTimeoutMs + Math.ceil((bytes / minBytesPerSec) * 1000),
    async connect(): Promise<SftpSession> {
      const client = new SftpClient('scan-gateway');
      let seenKey: string | undefined;
      try {
        await client.connect({
          host: sftp.host,
          port: sftp.port,
          username: sftp.username ?? options.clientId,
          ...(options.privateKey !== undefined ? { privateKey: options.privateKey } : {}),
          ...(options.password !== undefined ? { password: options.password } : {}),
          readyTimeout: sftp.connectTimeoutMs,
          // Only the configured fingerprint is trusted; ssh2 hands the raw key blob.
          hostVerifier: (key: Buffer) => {
            seenKey = hostKeyFingerprint(key);
            return seenKey === expected;
          },
          // No retries inside the client: delivery's backoff decides when to try again.
          retries: 0,
          // A server (or a path to it) gone silent is noticed within 30 s, not never.
          keepaliveInterval: 10_000,
          keepaliveCountMax: 3,
        });
      } catch (err) {
        await client.end().catch(() => undefined);
        if (seenKey !== undefined && seenKey !== expected) {
          throw new GatewayError(
            ErrorCodes.SFTP_HOST_KEY,
            `the SFTP server ${sftp.host}:${sftp.port} showed host key ${seenKey}, not the configured upstream.sftp.hostKey ${expected}; not connecting (nothing was sent)`,
            {
              cause: err,
              retryable: true,
              details: { notSent: true, host: sftp.host, seen: seenKey },
            },
          );
        }
        throw sftpError(err, `cannot connect to the SFTP server ${sftp.host}:${sftp.port}`, {
          connecting: true,
        });
      }
      return session(client);
    },
  };
}

function session(client: SftpClient): SftpSession {
  const run = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      throw sftpError(err, what);
    }
  };
  return {
    size: (path) =>
      run(`cannot stat ${path}`, async () => {
        try {
          return (await client.stat(path)).size;
        } catch (err) {
          if (
            (err as { code?: unknown }).code === 'ENOENT' ||
            (err as { code?: unknown }).code === 2
          )
            return undefined;
          throw err;
        }
      }),
    remove: (path) =>
      run(`cannot remove ${path}`, async () => void (await client.delete(path, true))),
    rename: (from, to) =>
      run(`cannot rename ${from} to ${to}`, async () => void (await client.rename(from, to))),
    write: (path, body) =>
      run(`cannot write ${path}`, async () => {
        try {
          await client.put(body, path, { writeStreamOptions: { flags: 'w', mode: 0o644 } });
        } finally {
          body.destroy();
        }
      }),
    list: (dir) =>
      run(`cannot list ${dir}`, async () => (await client.list(dir)).map((e) => e.name)),
    close: async () => {
      await client.end().catch(() => undefined);
    },
  };
}

/** SFTP status codes (draft-ietf-secsh-filexfer; v3 defines 0–8, later drafts the rest). */
const FX = {
  NO_SUCH_FILE: 2,
  PERMISSION_DENIED: 3,
  NO_SPACE_ON_FILESYSTEM: 14,
  QUOTA_EXCEEDED: 15,
  WRITE_PROTECT: 12,
} as const;

/**
 * Maps a failure of ssh2 / ssh2-sftp-client to a {@link GatewayError}: permission denied →
 * `SFTP_PERMISSION`; no space or quota → `SFTP_DISK_FULL` (OpenSSH's sftp-server speaks SFTP v3
 * and reports a full disk as a plain "Failure", which stays `SFTP`, retried); a refused login →
 * `SFTP_AUTH`; no connection, a reset or a timeout → `SFTP_NETWORK`; anything else `SFTP`.
 */
export function sftpError(
  err: unknown,
  what: string,
  opts: { connecting?: boolean } = {},
): GatewayError {
  if (err instanceof GatewayError) return err;
  const e = err as { code?: unknown; message?: string; level?: string };
  const message = e.message ?? String(err);
  const code = e.code;
  let gw: ErrorCode = ErrorCodes.SFTP;
  let notSent = false;
  if (
    code === FX.PERMISSION_DENIED ||
    code === FX.WRITE_PROTECT ||
    code === 'EACCES' ||
    /permission denied/i.test(message)
  )
    gw = ErrorCodes.SFTP_PERMISSION;
  else if (
    code === FX.NO_SPACE_ON_FILESYSTEM ||
    code === FX.QUOTA_EXCEEDED ||
    /no space|quota exceeded|disk full/i.test(message)
  )
    gw = ErrorCodes.SFTP_DISK_FULL;
  else if (
    e.level === 'client-authentication' ||
    /authentication methods failed|ERR_BAD_AUTH/i.test(message) ||
    code === 'ERR_BAD_AUTH'
  ) {
    gw = ErrorCodes.SFTP_AUTH;
    notSent = true;
  } else if (
    opts.connecting ||
    [
      'ECONNREFUSED',
      'ECONNRESET',
      'ENOTFOUND',
      'EAI_AGAIN',
      'ETIMEDOUT',
      'EHOSTUNREACH',
      'ENETUNREACH',
      'EPIPE',
      'ERR_NOT_CONNECTED',
    ].includes(String(code)) ||
    /timed out|not connected|no sftp connection|connection (lost|closed|reset)|socket|ECONN/i.test(
      message,
    )
  ) {
    gw = ErrorCodes.SFTP_NETWORK;
    notSent = opts.connecting === true;
  }
  return new GatewayError(gw, `${what}: ${message}`, {
    cause: err,
    retryable: gw !== ErrorCodes.SFTP_PERMISSION,
    details: {
      ...(typeof code === 'string' || typeof code === 'number' ? { sftpCode: code } : {}),
      ...(notSent ? { notSent: true } : {}),
    },
  });
}
