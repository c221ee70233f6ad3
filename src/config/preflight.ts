import { accessSync, constants, readFileSync, statSync, type Stats } from 'node:fs';
import { createServer } from 'node:net';
import { dirname } from 'node:path';
import { ErrorCodes, GatewayError } from '../errors.js';
import { inputKindSpec } from './input-kind.js';
import type { GatewayConfig } from './schema.js';
import { probeGateway, type GatewayOnAddress } from './own-gateway.js';
import { checkListenerTls } from './tls-files.js';

/**
 * What `config check` looks at beyond the file itself, on the machine that will run the
 * gateway: the files the configuration names exist and the service user may read them (and write
 * the buffer's and inbox folders), the environment variables it names are set, and the addresses
 * it listens on are free. `config check --offline` skips all of this (a file prepared elsewhere).
 *
 * Permissions are judged from the mode bits, owner and groups (`/etc/passwd`, `/etc/group`), as the
 * kernel does without ACLs; an ACL that grants more is not seen (the finding then says too much).
 */

const IN_USE = 'is in use by another program';

/** One finding: a `problem` would stop or break the gateway; a `note` is worth knowing. */
export interface PreflightFinding {
  severity: 'problem' | 'note';
  /** The key it is about, inputs named by id: `inputs[broker].caFile`, `http.listen`. */
  where: string;
  message: string;
}

/** A local user as the kernel sees it for permission checks. */
export interface ServiceUser {
  name: string;
  uid: number;
  /** Primary group and supplementary groups. */
  gids: number[];
}

export interface PreflightOptions {
  env: Record<string, string | undefined>;
  /** Judge access as this user (`--as USER`); default: the user running the check (`access(2)`). */
  user?: ServiceUser | undefined;
  /** The instant certificates are judged at, ms since the epoch; default `Date.now()`. */
  nowMs?: number;
}

/**
 * The user `name` from `/etc/passwd` with its groups from `/etc/group` (the files systemd's
 * `User=` also resolves against on a plain Debian host; users from NSS modules such as LDAP are not seen).
 *
 * @throws GatewayError `SCANGW_E_CONFIG` when there is no such user.
 */
export function lookupUser(
  name: string,
  files: { passwd?: string; group?: string } = {},
): ServiceUser {
  const passwd = readFileSync(files.passwd ?? '/etc/passwd', 'utf8');
  const entry = passwd
    .split('\n')
    .map((l) => l.split(':'))
    .find((f) => f[0] === name);
  if (!entry || entry.length < 4) {
    throw new GatewayError(
      ErrorCodes.CONFIG,
      `--as ${name}: no such user in /etc/passwd (the package creates scan-gateway; from source: docs/operations.md)`,
    );
  }
  const gids = [Number(entry[3])];
  for (const line of readFileSync(files.group ?? '/etc/group', 'utf8').split('\n')) {
    const f = line.split(':');
    if (f.length >= 4 && f[3]!.split(',').includes(name)) gids.push(Number(f[2]));
  }
  return { name, uid: Number(entry[2]), gids };
}

const R = 4;
const W = 2;
const X = 1;

/** Whether `user` may do `want` (R|W|X bits) on a file with these stats: the kernel's rule, without ACLs. */
function allowed(st: Stats, user: ServiceUser, want: number): boolean {
  if (user.uid === 0) return (want & X) === 0 || st.isDirectory() || (st.mode & 0o111) !== 0;
  const bits =
    st.uid === user.uid
      ? (st.mode >> 6) & 7
      : user.gids.includes(st.gid)
        ? (st.mode >> 3) & 7
        : st.mode & 7;
  return (bits & want) === want;
}

/** Why `user` (or the current user) cannot do `want` on `path`, or undefined when it can. */
function accessProblem(
  path: string,
  want: number,
  user: ServiceUser | undefined,
): string | undefined {
  const words =
    [want & R ? 'read' : '', want & W ? 'write' : ''].filter(Boolean).join(' and ') || 'enter';
  if (!user) {
    try {
      accessSync(
        path,
        (want & R ? constants.R_OK : 0) |
          (want & W ? constants.W_OK : 0) |
          (want & X ? constants.X_OK : 0),
      );
      return undefined;
    } catch (err) {
      return `cannot ${words} ${path} as this user (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
    }
  }
  // Every folder above must be enterable (x), then the file itself needs `want`.
  const chain: string[] = [];
  for (let d = dirname(path); ; d = dirname(d)) {
    chain.unshift(d);
    if (dirname(d) === d) break;
  }
  for (const d of chain) {
    if (!allowed(statSync(d), user, X))
      return `${user.name} cannot enter the folder ${d} on the way to ${path} (mode ${modeOf(statSync(d))})`;
  }
  const st = statSync(path);
  if (!allowed(st, user, want))
    return `${user.name} cannot ${words} ${path} (owner ${st.uid}:${st.gid}, mode ${modeOf(st)})`;
  return undefined;
}

function modeOf(st: Stats): string {
  return (st.mode & 0o7777).toString(8).padStart(4, '0');
}

function exists(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

/** A file the gateway reads (a CA, a password file): it must exist and be readable. */
function readableFile(
  where: string,
  path: string | undefined,
  user: ServiceUser | undefined,
  out: PreflightFinding[],
): void {
  if (path === undefined) return;
  const st = exists(path);
  if (!st) return void out.push({ severity: 'problem', where, message: `${path} does not exist` });
  if (!st.isFile())
    return void out.push({ severity: 'problem', where, message: `${path} is not a regular file` });
  const p = accessProblem(path, R, user);
  if (p) out.push({ severity: 'problem', where, message: p });
}

/**
 * A folder the gateway writes in (a files input's `dir`, the buffer's folder): it must be writable,
 * or, when it does not exist yet, the nearest folder above it that does (the gateway creates it).
 */
function writableFolder(
  where: string,
  path: string,
  user: ServiceUser | undefined,
  out: PreflightFinding[],
): void {
  let existing = path;
  while (!exists(existing) && dirname(existing) !== existing) existing = dirname(existing);
  const st = exists(existing);
  if (!st?.isDirectory())
    return void out.push({ severity: 'problem', where, message: `${existing} is not a folder` });
  const p = accessProblem(existing, R | W | X, user);
  if (p)
    out.push({
      severity: 'problem',
      where,
      message: existing === path ? p : `${path} does not exist and cannot be created: ${p}`,
    });
}

function envSet(env: Record<string, string | undefined>, name: string): boolean {
  const v = env[name];
  return v !== undefined && v.trim() !== '';
}

/**
 * Checks files, folders and environment variables the configuration names (synchronous) and the
 * listen addresses (binds each briefly). Paths in `config` must already be resolved (loadConfig).
 */
export async function preflight(
  config: GatewayConfig,
  options: PreflightOptions,
): Promise<PreflightFinding[]> {
  const out: PreflightFinding[] = [];
  const { user, env } = options;
  const u = config.upstream;
  readableFile('upstream.clientSecretFile', u.clientSecretFile, user, out);
  readableFile('upstream.caFile', u.caFile, user, out);
  readableFile('upstream.proxyCredentialsFile', u.proxyCredentialsFile, user, out);
  readableFile('http.adminTokenFile', config.http.adminTokenFile, user, out);
  readableFile('http.readTokenFile', config.http.readTokenFile, user, out);
  const tls = config.http.tls;
  if (tls) {
    const access: PreflightFinding[] = [];
    for (const k of ['certFile', 'keyFile', 'caFile', 'clientCaFile'] as const)
      readableFile(`http.tls.${k}`, tls[k], user, access);
    out.push(...access);
    // The files' content (pair, validity, days left), unless the service user cannot read them anyway.
    if (access.length === 0) out.push(...checkListenerTls(tls, options.nowMs ?? Date.now()));
  }
  if (config.buffer.path !== ':memory:') {
    const st = exists(config.buffer.path);
    if (st) {
      const p = accessProblem(config.buffer.path, R | W, user);
      if (p) out.push({ severity: 'problem', where: 'buffer.path', message: p });
    }
    // SQLite writes its -wal and -shm files beside the buffer, so the folder must be writable too.
    writableFolder('buffer.path', dirname(config.buffer.path), user, out);
  }
  const listens: { where: string; address: string }[] = [
    { where: 'http.listen', address: config.http.listen },
  ];
  if (config.sandbox.enabled)
    listens.push({ where: 'sandbox.listen', address: config.sandbox.listen });
  for (const input of config.inputs) {
    const at = (key: string) => `inputs[${input.id}].${key}`;
    for (const r of inputKindSpec(input.type)?.resources(input) ?? []) {
      switch (r.kind) {
        case 'folder':
          writableFolder(at(r.key), r.path, user, out);
          break;
        case 'device':
          // A device may be unplugged while the file is checked; the input waits for it and retries.
          if (!exists(r.path)) {
            out.push({
              severity: 'note',
              where: at(r.key),
              message: `${r.path} is not there now (scanner unplugged?); the input retries until it appears`,
            });
          } else {
            const p = accessProblem(r.path, R | W, user);
            if (p)
              out.push({
                severity: 'problem',
                where: at(r.key),
                message: r.accessHint ? `${p}; ${r.accessHint}` : p,
              });
          }
          break;
        case 'file':
          readableFile(at(r.key), r.path, user, out);
          break;
        case 'env':
          if (!envSet(env, r.name))
            out.push({ severity: 'problem', where: at(r.key), message: r.missing });
          break;
        case 'listen':
          listens.push({ where: at(r.key), address: r.address });
          break;
      }
    }
  }
  let running: GatewayOnAddress | undefined;
  for (const l of listens) {
    const port = Number(/:(\d+)$/.exec(l.address)?.[1]);
    // Root may bind below 1024 here; the service user may not (the unit grants no capabilities).
    const privileged = user !== undefined && user.uid !== 0 && port > 0 && port < 1024;
    const p = privileged
      ? `${l.address}: ports below 1024 need privileges the service does not have; take a port from 1024 up`
      : await bindProblem(l.address);
    if (!p) continue;
    if (p.includes(IN_USE)) {
      // A check beside the running gateway finds its ports taken: by that very gateway, not a clash.
      running ??= await probeGateway(config.http.listen, config.buffer.path);
      if (running === 'own') {
        out.push({
          severity: 'note',
          where: l.where,
          message: `${l.address} is in use by the running gateway of this configuration (it answers /healthz on ${config.http.listen}), as expected`,
        });
        continue;
      }
      if (running === 'other') {
        out.push({
          severity: 'problem',
          where: l.where,
          message: `${l.address} is in use; another scan-gateway (with another buffer, so another configuration) answers on ${config.http.listen}`,
        });
        continue;
      }
    }
    out.push({ severity: 'problem', where: l.where, message: p });
  }
  return out;
}

/** Binds `host:port` for a moment; why that fails, or undefined. Port 0 is always free. */
export async function bindProblem(address: string): Promise<string | undefined> {
  const m = /^\[?([^\]]*)\]?:(\d+)$/.exec(address);
  if (!m) return undefined;
  const host = m[1]!;
  const port = Number(m[2]);
  if (port === 0) return undefined;
  return new Promise((done) => {
    const server = createServer();
    server.once('error', (err: NodeJS.ErrnoException) => {
      const why: Record<string, string> = {
        EADDRINUSE: `${address} ${IN_USE} (the gateway itself, already running? see: ss -ltnp 'sport = :${port}')`,
        EACCES: `${address}: ports below 1024 need privileges the service does not have; take a port from 1024 up`,
        EADDRNOTAVAIL: `${address}: this machine has no address ${host}`,
        ENOTFOUND: `${address}: the host name ${host} is not known here`,
      };
      done(why[err.code ?? ''] ?? `${address} cannot be listened on: ${err.message}`);
    });
    server.listen({ host, port, exclusive: true }, () => server.close(() => done(undefined)));
  });
}
