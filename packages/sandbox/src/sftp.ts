import { timingSafeEqual } from 'node:crypto';
import {
  closeSync,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
  type Stats,
} from 'node:fs';
import { join, posix } from 'node:path';
import ssh2 from 'ssh2';
import type { Attributes, AuthContext, Connection, SFTPWrapper } from 'ssh2';
import { ErrorCodes, GatewayError } from '@scan-gateway/service-kit/errors';
import type { Logger } from './log.js';
import { hostKeyFingerprint } from '@scan-gateway/contract/host-key';
import type { SandboxState } from './state.js';

const { Server, utils } = ssh2;
const STATUS = utils.sftp.STATUS_CODE;
const OPEN = utils.sftp.OPEN_MODE;

/** Options of {@link startSandboxSftp}. */
export interface SandboxSftpOptions {
  /** The sandbox's memory: clients (user name = client id, password = client secret) and batches. */
  state: SandboxState;
  /** Folder the clients' files land in, one sub-folder per client id (its `/`). */
  root: string;
  host?: string;
  /** 0 = any free port. */
  port?: number;
  /** Public keys (OpenSSH `authorized_keys` lines) that may log in, per client id, besides the password. */
  authorizedKeys?: Record<string, string[]>;
  /** Host key (OpenSSH or PEM private key); default a new ed25519 key. */
  hostKey?: string;
  /** Time from a completed file to its terminal state, as for a pre-signed PUT. */
  processingDelayMs: () => number;
  logger: Logger;
}

/** A file the endpoint processed: its client, name and the request id its batch got. */
export interface SandboxSftpFile {
  clientId: string;
  path: string;
  requestId: string;
  bytes: number;
}

/** A started SFTP endpoint of the sandbox. */
export interface RunningSandboxSftp {
  host: string;
  port: number;
  /** The host key's fingerprint as `ssh-keygen -lf` prints it (for `upstream.sftp.hostKey`). */
  hostKey: string;
  /** Where a client's files are on this machine's disk. */
  folderOf(clientId: string): string;
  /** Files processed so far, oldest first. */
  files(): SandboxSftpFile[];
  /** Refuse (true) or allow writes, as a read-only folder would: `Permission denied`. */
  setReadOnly(readOnly: boolean): void;
  close(): Promise<void>;
}

/** Largest file the endpoint processes (it is read whole): the HTTP side's body limit. */
const MAX_FILE_BYTES = 256 * 1024 * 1024;

/** Suffix of a file still being written: such a file is never processed. */
const PART = '.part';

/**
 * An ed25519 key pair in OpenSSH format that ssh2's own `parseKey` reads back. ssh2's
 * `generateKeyPairSync('ed25519')` strips leading zero bytes of the public key, so about one key
 * in 256 comes out malformed (mscdex/ssh2 issues 1390 and 1513, open): such a pair is made again.
 *
 * @throws GatewayError `SCANGW_E_CONFIG` if ten pairs in a row are unreadable (a broken ssh2).
 */
export function generateEd25519KeyPair(): { private: string; public: string } {
  for (let attempt = 0; attempt < 10; attempt++) {
    const pair = utils.generateKeyPairSync('ed25519');
    if (
      !(utils.parseKey(pair.private) instanceof Error) &&
      !(utils.parseKey(pair.public) instanceof Error)
    )
      return pair;
  }
  throw new GatewayError(
    ErrorCodes.CONFIG,
    'ssh2 made ten ed25519 key pairs in a row that it cannot read back',
  );
}

/**
 * The sandbox's SFTP endpoint (contract §4.7 names SFTP and shows no details): the ssh2
 * library's server side over a folder on disk. A client logs in with its client id and either its
 * client secret (password) or a key of `authorizedKeys`; its `/` is `root/<clientId>`. A completed
 * file (renamed to a name without `.part`, or closed under such a name) is processed like a
 * pre-signed PUT: a new request id, `SandboxState.acceptBatch` (via `sftp`), or a Failed batch when
 * the content is not a JSON array. Renaming onto an existing file fails, as OpenSSH's SFTP v3 does.
 */
export async function startSandboxSftp(options: SandboxSftpOptions): Promise<RunningSandboxSftp> {
  const hostKey = options.hostKey ?? generateEd25519KeyPair().private;
  const parsedHost = utils.parseKey(hostKey);
  if (parsedHost instanceof Error)
    throw new GatewayError(
      ErrorCodes.CONFIG,
      `the sandbox's SFTP host key cannot be read: ${parsedHost.message}`,
    );
  const fingerprint = hostKeyFingerprint(parsedHost.getPublicSSH());
  const allowedKeys = new Map<string, ReturnType<typeof utils.parseKey>[]>();
  for (const [clientId, lines] of Object.entries(options.authorizedKeys ?? {}))
    allowedKeys.set(
      clientId,
      lines.map((l) => utils.parseKey(l)),
    );
  const processed: SandboxSftpFile[] = [];
  let readOnly = false;
  const folderOf = (clientId: string) => join(options.root, clientId);
  for (const clientId of options.state.clients.keys())
    mkdirSync(folderOf(clientId), { recursive: true });
  const log = options.logger.child({ component: 'sandbox-sftp' });

  const connections = new Set<Connection>();
  const server = new Server({ hostKeys: [hostKey] }, (client: Connection) => {
    connections.add(client);
    client.on('close', () => connections.delete(client));
    let clientId: string | undefined;
    client.on('authentication', (ctx: AuthContext) => {
      const known = options.state.clients.get(ctx.username);
      if (known && ctx.method === 'password' && sameText(known.clientSecret, ctx.password)) {
        clientId = ctx.username;
        ctx.accept();
        return;
      }
      if (known && ctx.method === 'publickey') {
        const match = (allowedKeys.get(ctx.username) ?? []).find(
          (k) =>
            !(k instanceof Error) &&
            k.type === ctx.key.algo &&
            k.getPublicSSH().equals(ctx.key.data),
        );
        if (match && !(match instanceof Error)) {
          // Without a signature the client only asks whether the key would do.
          if (!ctx.signature || (ctx.blob && match.verify(ctx.blob, ctx.signature, ctx.hashAlgo))) {
            if (ctx.signature) clientId = ctx.username;
            ctx.accept();
            return;
          }
        }
      }
      ctx.reject(['password', 'publickey']);
    });
    client.on('ready', () => {
      client.on('session', (accept) => {
        const session = accept();
        session.on('sftp', (acceptSftp) => {
          const id = clientId!;
          mkdirSync(folderOf(id), { recursive: true });
          serveSftp(acceptSftp(), {
            home: folderOf(id),
            readOnly: () => readOnly,
            completed: (path, file) => processFile(id, path, file),
          });
        });
      });
    });
    // A client that goes away mid-transfer is normal (the gateway may be killed).
    client.on('error', () => undefined);
  });

  function processFile(clientId: string, path: string, file: string): void {
    const size = statSync(file).size;
    if (size > MAX_FILE_BYTES) {
      // Read whole to be parsed: bounded like the HTTP side's body limit.
      const requestId = options.state.nextRequestId();
      options.state.acceptUnreadable(
        requestId,
        clientId,
        `The transferred file has ${size} bytes, over the sandbox's ${MAX_FILE_BYTES}.`,
        options.processingDelayMs(),
        Date.now(),
        posix.basename(path),
      );
      processed.push({ clientId, path, requestId, bytes: size });
      return;
    }
    const content = readFileSync(file);
    let items: unknown;
    try {
      items = JSON.parse(content.toString('utf8'));
    } catch {
      items = undefined;
    }
    const requestId = options.state.nextRequestId();
    const now = Date.now();
    // The same step as a pre-signed PUT (routes-scans.ts): the batch's state moves only here.
    // Its status names the file first in `description` (docs/delivery.md "SFTP": the convention to confirm).
    const fileName = posix.basename(path);
    if (Array.isArray(items))
      options.state.acceptBatch(
        requestId,
        clientId,
        'sftp',
        items,
        options.processingDelayMs(),
        now,
        fileName,
      );
    else
      options.state.acceptUnreadable(
        requestId,
        clientId,
        'The transferred file is not a JSON array of scans.',
        options.processingDelayMs(),
        now,
        fileName,
      );
    processed.push({ clientId, path, requestId, bytes: content.length });
    log.info({ clientId, path, requestId, bytes: content.length }, 'SFTP file received');
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : (options.port ?? 0);
  return {
    host: options.host ?? '127.0.0.1',
    port,
    hostKey: fingerprint,
    folderOf,
    files: () => [...processed],
    setReadOnly(value) {
      readOnly = value;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Open connections (a gateway still connected) are cut.
        for (const c of connections) c.end();
      }),
  };
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

interface OpenFile {
  fd: number;
  /** The client's path and the file on disk. */
  path: string;
  file: string;
  written: boolean;
}

interface OpenDir {
  names: string[] | undefined;
  dir: string;
}

/**
 * The SFTP v3 requests the gateway (and `sftp`-like clients) use, over a folder: open, read, write,
 * close, stat, remove, rename (never onto an existing file), realpath, readdir, mkdir, setstat
 * (accepted, ignored). Paths are the client's, `/` being `home`; nothing outside it is reachable.
 */
function serveSftp(
  sftp: SFTPWrapper,
  opts: { home: string; readOnly: () => boolean; completed: (path: string, file: string) => void },
): void {
  const handles = new Map<number, OpenFile | OpenDir>();
  let nextHandle = 1;
  const newHandle = (entry: OpenFile | OpenDir) => {
    const n = nextHandle++;
    handles.set(n, entry);
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n);
    return b;
  };
  const entryOf = (handle: Buffer) =>
    handle.length === 4 ? handles.get(handle.readUInt32BE(0)) : undefined;
  const clientPath = (p: string) => posix.normalize(posix.join('/', p));
  const diskPath = (p: string) => join(opts.home, clientPath(p));
  const fail = (reqId: number, err: unknown) => {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return sftp.status(reqId, STATUS.NO_SUCH_FILE, 'No such file');
    if (code === 'EACCES' || code === 'EPERM')
      return sftp.status(reqId, STATUS.PERMISSION_DENIED, 'Permission denied');
    return sftp.status(reqId, STATUS.FAILURE, 'Failure');
  };
  const denied = (reqId: number) =>
    sftp.status(reqId, STATUS.PERMISSION_DENIED, 'Permission denied');
  const attrs = (s: Stats): Attributes => ({
    mode: s.mode,
    uid: s.uid,
    gid: s.gid,
    size: s.size,
    atime: Math.floor(s.atimeMs / 1000),
    mtime: Math.floor(s.mtimeMs / 1000),
  });

  sftp.on('OPEN', (reqId, filename, flags) => {
    const writing = (flags & (OPEN.WRITE | OPEN.CREAT | OPEN.TRUNC | OPEN.APPEND)) !== 0;
    if (writing && opts.readOnly()) return denied(reqId);
    const mode = utils.sftp.flagsToString(flags);
    if (!mode) return sftp.status(reqId, STATUS.BAD_MESSAGE, 'Bad open flags');
    try {
      const file = diskPath(filename);
      const fd = openSync(file, mode);
      sftp.handle(reqId, newHandle({ fd, path: clientPath(filename), file, written: writing }));
    } catch (err) {
      fail(reqId, err);
    }
  });
  sftp.on('WRITE', (reqId, handle, offset, data) => {
    const entry = entryOf(handle);
    if (!entry || !('fd' in entry)) return sftp.status(reqId, STATUS.FAILURE, 'Bad handle');
    try {
      writeSync(entry.fd, data, 0, data.length, offset);
      sftp.status(reqId, STATUS.OK);
    } catch (err) {
      fail(reqId, err);
    }
  });
  sftp.on('READ', (reqId, handle, offset, length) => {
    const entry = entryOf(handle);
    if (!entry || !('fd' in entry)) return sftp.status(reqId, STATUS.FAILURE, 'Bad handle');
    const buffer = Buffer.alloc(Math.min(length, 256 * 1024));
    try {
      const n = readSync(entry.fd, buffer, 0, buffer.length, offset);
      if (n === 0) return sftp.status(reqId, STATUS.EOF);
      sftp.data(reqId, buffer.subarray(0, n));
    } catch (err) {
      fail(reqId, err);
    }
  });
  sftp.on('FSTAT', (reqId, handle) => {
    const entry = entryOf(handle);
    if (!entry || !('fd' in entry)) return sftp.status(reqId, STATUS.FAILURE, 'Bad handle');
    sftp.attrs(reqId, attrs(fstatSync(entry.fd)));
  });
  sftp.on('FSETSTAT', (reqId) => sftp.status(reqId, STATUS.OK));
  sftp.on('SETSTAT', (reqId) => sftp.status(reqId, STATUS.OK));
  sftp.on('CLOSE', (reqId, handle) => {
    const entry = entryOf(handle);
    if (!entry) return sftp.status(reqId, STATUS.FAILURE, 'Bad handle');
    handles.delete(handle.readUInt32BE(0));
    if ('fd' in entry) {
      closeSync(entry.fd);
      // A file written under its final name (no .part step) is complete when closed.
      if (entry.written && !entry.path.endsWith(PART)) opts.completed(entry.path, entry.file);
    }
    sftp.status(reqId, STATUS.OK);
  });
  const stat = (reqId: number, path: string) => {
    try {
      sftp.attrs(reqId, attrs(statSync(diskPath(path))));
    } catch (err) {
      fail(reqId, err);
    }
  };
  sftp.on('STAT', stat);
  sftp.on('LSTAT', stat);
  sftp.on('REMOVE', (reqId, path) => {
    if (opts.readOnly()) return denied(reqId);
    try {
      unlinkSync(diskPath(path));
      sftp.status(reqId, STATUS.OK);
    } catch (err) {
      fail(reqId, err);
    }
  });
  sftp.on('RENAME', (reqId, from, to) => {
    if (opts.readOnly()) return denied(reqId);
    const target = diskPath(to);
    // SFTP v3 (and OpenSSH's server): a rename never replaces a file.
    if (existsSync(target)) return sftp.status(reqId, STATUS.FAILURE, 'Failure');
    try {
      renameSync(diskPath(from), target);
      sftp.status(reqId, STATUS.OK);
    } catch (err) {
      return fail(reqId, err);
    }
    if (!clientPath(to).endsWith(PART)) opts.completed(clientPath(to), target);
  });
  sftp.on('MKDIR', (reqId, path) => {
    if (opts.readOnly()) return denied(reqId);
    try {
      mkdirSync(diskPath(path));
      sftp.status(reqId, STATUS.OK);
    } catch (err) {
      fail(reqId, err);
    }
  });
  sftp.on('REALPATH', (reqId, path) => {
    const p = clientPath(path);
    sftp.name(reqId, [{ filename: p, longname: p, attrs: {} as Attributes }]);
  });
  sftp.on('OPENDIR', (reqId, path) => {
    const dir = diskPath(path);
    try {
      if (!statSync(dir).isDirectory())
        return sftp.status(reqId, STATUS.FAILURE, 'Not a directory');
      sftp.handle(reqId, newHandle({ dir, names: undefined }));
    } catch (err) {
      fail(reqId, err);
    }
  });
  sftp.on('READDIR', (reqId, handle) => {
    const entry = entryOf(handle);
    if (!entry || !('dir' in entry)) return sftp.status(reqId, STATUS.FAILURE, 'Bad handle');
    if (entry.names !== undefined) return sftp.status(reqId, STATUS.EOF);
    entry.names = readdirSync(entry.dir);
    sftp.name(
      reqId,
      entry.names.map((name) => {
        const s = statSync(join(entry.dir, name));
        return {
          filename: name,
          longname: `${s.isDirectory() ? 'd' : '-'}rw-r--r-- 1 sandbox sandbox ${s.size} Jan 1 00:00 ${name}`,
          attrs: attrs(s),
        };
      }),
    );
  });
}
