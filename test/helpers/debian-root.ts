import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/paths.js';

/** What a command printed and how it ended. */
export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command to its end with a clean environment (PATH and HOME only, plus `env`), as a new
 * user's shell would. Throws when the command cannot be started at all (a missing tool fails the
 * test that needs it, it does not skip).
 */
export function run(
  cmd: string,
  args: string[],
  options: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): RunResult {
  const r = spawnSync(cmd, args, {
    encoding: 'utf8',
    timeout: options.timeoutMs ?? 1_200_000,
    cwd: options.cwd ?? PACKAGE_ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/root',
      ...(process.env.npm_config_nodedir
        ? { npm_config_nodedir: process.env.npm_config_nodedir }
        : {}),
      ...options.env,
    },
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.error) throw r.error;
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * Builds the release package with `npm run package` into a new folder.
 *
 * @returns the .deb's path (the build's last line of output).
 * @throws Error with the build's output when it fails.
 */
export function buildPackage(arch?: 'amd64' | 'arm64'): string {
  const out = mkdtempSync(join(tmpdir(), 'sg-deb-'));
  const built = run(
    'npm',
    ['run', '--silent', 'package', '--', ...(arch ? ['--arch', arch] : []), out],
    { timeoutMs: 2_400_000 },
  );
  if (built.code !== 0)
    throw new Error(`npm run package failed (${built.code}):\n${built.stdout}\n${built.stderr}`);
  const deb = built.stdout.trim().split('\n').pop() ?? '';
  if (!existsSync(deb))
    throw new Error(`npm run package printed no package path:\n${built.stdout}\n${built.stderr}`);
  return deb;
}

/** The Debian suites the package is installed on in tests, by codename. */
export type DebianSuite = 'bookworm' | 'trixie';

/**
 * A clean Debian root of `suite` in a new folder: `mmdebstrap --variant=apt` (essential packages and
 * apt, no Node.js), as a tar cached for a day under ~/.cache/scan-gateway-tests (or
 * $SCAN_GATEWAY_TEST_CACHE), so a test run makes each root at most once a day.
 *
 * @throws Error when mmdebstrap is missing or fails (the test fails, it does not skip).
 */
export function debianRoot(suite: DebianSuite): string {
  const cache =
    process.env.SCAN_GATEWAY_TEST_CACHE ?? join(homedir(), '.cache', 'scan-gateway-tests');
  mkdirSync(cache, { recursive: true });
  const day = new Date().toISOString().slice(0, 10);
  const tar = join(cache, `debian-${suite}-apt-${day}.tar`);
  if (!existsSync(tar)) {
    for (const old of readdirSync(cache))
      if (old.startsWith(`debian-${suite}-apt-`)) rmSync(join(cache, old), { force: true });
    const partial = `${tar}.${process.pid}.partial`;
    const made = run('mmdebstrap', ['--variant=apt', '--quiet', '--format=tar', suite, partial], {
      timeoutMs: 3_000_000,
    });
    if (made.code !== 0)
      throw new Error(`mmdebstrap ${suite} failed (${made.code}):\n${made.stderr.slice(-4000)}`);
    renameSync(partial, tar);
  }
  const root = mkdtempSync(join(tmpdir(), `sg-root-${suite}-`));
  const untar = run('tar', ['-xf', tar, '-C', root]);
  if (untar.code !== 0) throw new Error(`tar -xf ${tar}: ${untar.stderr}`);
  return root;
}

/** The systemd-nspawn options every container of these tests uses (no machined, no own scope). */
export function nspawnArgs(root: string): string[] {
  return ['--quiet', '--register=no', '--keep-unit', `--directory=${root}`];
}

/**
 * Runs `args` in the root under systemd-nspawn (its own /proc, /dev and mount namespace; the host's
 * network, so loopback addresses are shared with the test), as root with a clean environment.
 */
export function inRoot(
  root: string,
  args: string[],
  options: { env?: Record<string, string>; timeoutMs?: number } = {},
): RunResult {
  const setenv = Object.entries(options.env ?? {}).map(([k, v]) => `--setenv=${k}=${v}`);
  // --pipe: the command's own stdout and stderr, not a pseudo-terminal's (which writes \r\n).
  const r = run('systemd-nspawn', [...nspawnArgs(root), '--pipe', ...setenv, ...args], {
    timeoutMs: options.timeoutMs ?? 1_500_000,
  });
  // nspawn's own note about the propagation folder of a container on a plain folder says nothing of the command.
  r.stderr = r.stderr
    .split('\n')
    .filter((l) => !l.startsWith('Attempted to remove disk file system under'))
    .join('\n');
  return r;
}

/** Starts `args` in the root under systemd-nspawn in the background (see {@link inRoot}); `extra` are nspawn's options. */
export function spawnInRoot(root: string, extra: string[], args: string[]): ChildProcess {
  return spawn('systemd-nspawn', [...nspawnArgs(root), ...extra, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '' },
  });
}

/**
 * The pid, seen from the host, of the init (systemd) of a container booted with `-b` by the
 * systemd-nspawn process `nspawnPid`: its child named systemd. (Its /proc/PID/root reads `/`, the
 * root as seen in its own mount namespace, so the folder cannot tell.)
 */
export function containerInit(nspawnPid: number): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid …: the comm may hold spaces, so split after its closing parenthesis.
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (comm === 'systemd' && ppid === nspawnPid) return Number(entry);
    } catch {
      // The process ended while we looked.
    }
  }
  return undefined;
}

/** Runs a command inside a booted container's namespaces (nsenter into its init). */
export function inBooted(
  pid: number,
  args: string[],
  options: { timeoutMs?: number } = {},
): RunResult {
  return run(
    'nsenter',
    [`--target=${pid}`, '--mount', '--uts', '--ipc', '--net', '--pid', '--', ...args],
    { timeoutMs: options.timeoutMs ?? 300_000 },
  );
}

/**
 * A copy of the package `deb` as version `version`: the control file's Version and the program's
 * package.json (so `--version` and the start line say it), its md5sums line renewed, built in a new
 * folder. Stands for the next release in upgrade tests.
 *
 * @returns the new .deb's path.
 * @throws Error with dpkg-deb's output when unpacking or building fails.
 */
export function repackAs(deb: string, version: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'sg-repack-'));
  const root = join(dir, 'root');
  const unpacked = run('dpkg-deb', ['-R', deb, root]);
  if (unpacked.code !== 0) throw new Error(`dpkg-deb -R ${deb}: ${unpacked.stderr}`);
  const control = join(root, 'DEBIAN/control');
  writeFileSync(
    control,
    readFileSync(control, 'utf8').replace(/^Version: .*$/m, `Version: ${version}`),
  );
  const rel = 'usr/lib/scan-gateway/package.json';
  const pkg = join(root, rel);
  const text = readFileSync(pkg, 'utf8').replace(/"version": "[^"]*"/, `"version": "${version}"`);
  writeFileSync(pkg, text);
  const md5 = createHash('md5').update(text).digest('hex');
  const sums = join(root, 'DEBIAN/md5sums');
  writeFileSync(
    sums,
    readFileSync(sums, 'utf8').replace(new RegExp(`^[0-9a-f]{32}  ${rel}$`, 'm'), `${md5}  ${rel}`),
  );
  const out = join(dir, `scan-gateway_${version}_${basename(deb).split('_').pop()!}`);
  // gzip at its fastest: the copy only travels to a root on this machine.
  const built = run('dpkg-deb', ['--root-owner-group', '-Zgzip', '-z1', '--build', root, out], {
    timeoutMs: 1_200_000,
  });
  if (built.code !== 0) throw new Error(`dpkg-deb --build: ${built.stdout}${built.stderr}`);
  rmSync(root, { recursive: true, force: true });
  return out;
}

/**
 * Every path in the root whose name contains `needle`, outside the package manager's own records
 * and logs (/var/lib/dpkg, /var/lib/apt, /var/cache, /var/log) and the kernel's file systems.
 */
export function pathsNamed(root: string, needle: string): string[] {
  const skip = new Set([
    '/proc',
    '/sys',
    '/dev',
    '/run',
    '/var/lib/dpkg',
    '/var/lib/apt',
    '/var/cache',
    '/var/log',
  ]);
  const found: string[] = [];
  const walk = (rel: string): void => {
    let entries;
    try {
      entries = readdirSync(join(root, rel), { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const path = `${rel}/${e.name}`;
      if (skip.has(path)) continue;
      if (e.name.includes(needle)) found.push(path);
      if (e.isDirectory() && !e.isSymbolicLink()) walk(path);
    }
  };
  walk('');
  return found;
}

/**
 * The package's starter configuration (`config init --input files`) pointed at an embedded
 * sandbox on `sandboxPort` with a DCP it knows (GI-01, Goods In, PACK-A), JSON logs, and optionally
 * its folders moved to `dataDir` and its page to `httpListen` (`127.0.0.1:PORT`).
 */
export function starterForSandbox(
  starter: string,
  options: { sandboxPort: number; dataDir?: string; httpListen?: string },
): string {
  let text = starter
    .replace(/baseUrl: .*/, `baseUrl: http://127.0.0.1:${options.sandboxPort}`)
    .replace(/authUrl: .*/, `authUrl: http://127.0.0.1:${options.sandboxPort}`)
    .replace('clientId: CHANGE-ME', 'clientId: demo-client')
    .replace(
      /- key: DCP-01 .*\n {4}kind: startOfProcess/,
      '- key: GI-01\n    kind: goodsIn\n    supplierKey: SUP-0042',
    )
    .replace('productModelKey: CHANGE-ME', 'productModelKey: PACK-A')
    .replaceAll('dcp: DCP-01', 'dcp: GI-01');
  if (options.dataDir) text = text.replaceAll('/var/lib/scan-gateway', options.dataDir);
  if (options.httpListen)
    text = text.replace(/listen: '?127\.0\.0\.1:\d+'?/, `listen: '${options.httpListen}'`);
  return `${text}\nsandbox: { enabled: true, listen: '127.0.0.1:${options.sandboxPort}', kafka: { listen: '127.0.0.1:0' } }\nlog: { level: info, format: json }\n`;
}
