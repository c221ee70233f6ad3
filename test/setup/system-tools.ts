import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * The system tools each layer of the suite drives for real, and the Debian package of each. A
 * layer's global setup calls {@link ensureSystemTools}: where something is missing it installs it
 * (as root, where apt-get exists) and says what and why, or stops the run at once with the exact
 * install line. A test never skips for a missing tool: it would pass without testing anything.
 */
export type Layer = 'integration' | 'e2e' | 'package';

interface Tool {
  /** The command, looked up on PATH and in the sbin folders (sshd and mosquitto live there). */
  command: string;
  /** The Debian package that brings it. */
  debian: string;
  /** What the tests do with it, for the line printed when it is installed. */
  why: string;
  layers: readonly Layer[];
}

const TOOLS: readonly Tool[] = [
  {
    command: 'socat',
    debian: 'socat',
    why: 'pseudo-terminal pairs: the serial scanners',
    layers: ['integration', 'e2e'],
  },
  {
    command: 'mosquitto',
    debian: 'mosquitto',
    why: 'the MQTT broker of the MQTT tests',
    layers: ['integration', 'e2e'],
  },
  {
    command: 'openssl',
    debian: 'openssl',
    why: 'throw-away CAs and certificates (TLS listener, MQTT over TLS)',
    layers: ['integration', 'e2e'],
  },
  {
    command: 'kcat',
    debian: 'kcat',
    why: "librdkafka's client against the sandbox's Kafka endpoint",
    layers: ['integration', 'e2e'],
  },
  {
    command: 'sshd',
    debian: 'openssh-server',
    why: 'a real SFTP server on loopback',
    layers: ['integration', 'e2e'],
  },
  {
    command: 'sftp',
    debian: 'openssh-client',
    why: 'the SFTP inbox recipe, followed with a real client',
    layers: ['integration', 'e2e'],
  },
  {
    command: 'ssh-keygen',
    debian: 'openssh-client',
    why: 'host keys, and the fingerprint as ssh-keygen prints it',
    layers: ['integration', 'e2e'],
  },
  {
    command: 'etcd',
    debian: 'etcd-server',
    why: 'the leader election of the high-availability tests',
    layers: ['integration', 'e2e'],
  },
  {
    command: 'systemd-analyze',
    debian: 'systemd',
    why: "the unit's verify and exposure score",
    layers: ['integration', 'package'],
  },
  {
    command: 'systemd-notify',
    debian: 'systemd',
    why: 'sd_notify to an abstract socket address',
    layers: ['integration', 'e2e'],
  },
  {
    command: 'python3',
    debian: 'python3',
    why: "plays systemd's notify socket",
    layers: ['integration', 'e2e'],
  },
  {
    command: 'chromium',
    debian: 'chromium',
    why: 'the health page and station screen in a real browser',
    layers: ['e2e'],
  },
  {
    command: 'promtool',
    debian: 'prometheus',
    why: "the alert rules' unit tests and the dashboard's queries",
    layers: ['e2e'],
  },
  { command: 'dpkg-deb', debian: 'dpkg-dev', why: 'builds the .deb', layers: ['package'] },
  { command: 'lintian', debian: 'lintian', why: 'checks the .deb', layers: ['package'] },
  {
    command: 'strip',
    debian: 'binutils',
    why: "strips the package's native modules",
    layers: ['package'],
  },
  {
    command: 'man',
    debian: 'man-db',
    why: "systemd-analyze verify opens the packaged unit's man page",
    layers: ['package'],
  },
  {
    command: 'mmdebstrap',
    debian: 'mmdebstrap',
    why: 'clean Debian 12 and 13 roots for the package',
    layers: ['package'],
  },
  {
    command: 'systemd-nspawn',
    debian: 'systemd-container',
    why: 'runs and boots the clean roots',
    layers: ['package'],
  },
  {
    command: 'aarch64-linux-gnu-gcc',
    debian: 'gcc-aarch64-linux-gnu',
    why: "the arm64 package's native module",
    layers: ['package'],
  },
  {
    command: 'aarch64-linux-gnu-g++',
    debian: 'g++-aarch64-linux-gnu',
    why: "the arm64 package's native module",
    layers: ['package'],
  },
  {
    command: 'qemu-aarch64-static',
    debian: 'qemu-user-static',
    why: 'runs the arm64 runtime',
    layers: ['package'],
  },
];

/** Why a layer needs root: it mounts, chroots or boots. */
const NEEDS_ROOT: Partial<Record<Layer, string>> = {
  integration: 'the full-disk tests mount a small tmpfs',
  e2e: 'the SFTP inbox recipe chroots its sshd user',
  package: 'the package tests make Debian roots and boot them with systemd-nspawn',
};

function onPath(command: string, path = process.env.PATH ?? ''): boolean {
  const dirs = [...path.split(delimiter), '/usr/sbin', '/sbin'];
  return dirs.some((d) => {
    try {
      accessSync(join(d, command), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

function run(command: string, args: string[]): void {
  const r = spawnSync(command, args, {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  if (r.status !== 0)
    throw new Error(`test setup: \`${command} ${args.join(' ')}\` failed (exit ${r.status})`);
}

/**
 * Makes sure `layer` can run here: root where it needs root, and every tool of {@link TOOLS}.
 * Installs the missing Debian packages when running as root with apt-get; otherwise throws with
 * the install line, which stops the run before any test.
 */
export function ensureSystemTools(
  layer: Layer,
  log: (line: string) => void = console.log,
  machine: { isRoot: boolean; path: string } = {
    isRoot: process.getuid?.() === 0,
    path: process.env.PATH ?? '',
  },
): void {
  const { isRoot, path } = machine;
  const rootReason = NEEDS_ROOT[layer];
  if (rootReason && !isRoot)
    throw new Error(
      `test setup: the ${layer} tests run as root (${rootReason}). ` +
        'Run them as root, or run `npm run test:unit`, which needs neither root nor system tools.',
    );
  const missing = TOOLS.filter((t) => t.layers.includes(layer) && !onPath(t.command, path));
  if (missing.length === 0) return;
  const packages = [...new Set(missing.map((t) => t.debian))];
  const line = `apt-get install -y ${packages.join(' ')}`;
  if (!isRoot || !onPath('apt-get', path))
    throw new Error(
      `test setup: the ${layer} tests drive tools this machine lacks: ` +
        `${missing.map((t) => t.command).join(', ')}. Install them with: sudo ${line}`,
    );
  log(`test setup: installing for the ${layer} tests: ${line}`);
  for (const t of missing) log(`test setup:   ${t.debian} (${t.command}): ${t.why}`);
  run('apt-get', ['update', '-qq']);
  run('apt-get', ['install', '-y', '-qq', ...packages]);
  const still = missing.filter((t) => !onPath(t.command));
  if (still.length > 0)
    throw new Error(
      `test setup: still missing after \`${line}\`: ${still.map((t) => t.command).join(', ')}`,
    );
}
