import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';

/** Debian's openssh-server puts the daemon here (`.ci/run` installs it). */
const SSHD = '/usr/sbin/sshd';

/** A real OpenSSH server on a loopback port, started by a test. */
export interface RunningSshd {
  host: '127.0.0.1';
  port: number;
  /** The user the tests log in as (the one running the tests; root in CI). */
  username: string;
  /** Private key file of that user (ed25519, unencrypted). */
  userKeyFile: string;
  /** The server's host key fingerprint as `ssh-keygen -lf` prints it. */
  hostKey: string;
  /** A folder the user may write, for the batch files. */
  remoteDir: string;
  /** sshd's own output, for failure messages. */
  output: () => string;
  stop(): Promise<void>;
}

async function accepting(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** The fingerprint line of `ssh-keygen -lf FILE`: `256 SHA256:… comment (ED25519)`. */
export function fingerprintOf(publicKeyFile: string): string {
  const line = execFileSync('ssh-keygen', ['-lf', publicKeyFile], { encoding: 'utf8' });
  const m = /SHA256:[A-Za-z0-9+/]+/.exec(line);
  if (!m) throw new Error(`ssh-keygen -lf printed no SHA256 fingerprint: ${line}`);
  return m[0];
}

/** Makes an unencrypted ed25519 key pair at `file` and `file.pub`. */
export function makeKey(file: string): void {
  execFileSync('ssh-keygen', [
    '-q',
    '-t',
    'ed25519',
    '-N',
    '',
    '-C',
    'scan-gateway-test',
    '-f',
    file,
  ]);
}

/**
 * Starts `sshd -D` on a free loopback port with a temporary host key and user key (and nothing
 * of the machine's own configuration): `StrictModes no` (the temporary folder's modes), `UsePAM
 * no`, key login only, the internal SFTP server (`readOnly`: with `-R`, which refuses writes).
 * Fails, not skips, when sshd is missing.
 */
export async function startSshd(opts: { readOnly?: boolean } = {}): Promise<RunningSshd> {
  if (!existsSync(SSHD))
    throw new Error(`${SSHD} is missing: install Debian's openssh-server (.ci/run does)`);
  // Privilege separation folder that Debian's sshd insists on.
  mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  const dir = mkdtempSync(join(tmpdir(), 'sg-sshd-'));
  const hostKeyFile = join(dir, 'host_ed25519');
  const userKeyFile = join(dir, 'user_ed25519');
  makeKey(hostKeyFile);
  makeKey(userKeyFile);
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(`${userKeyFile}.pub`));
  const remoteDir = join(dir, 'remote');
  mkdirSync(remoteDir);
  const port = await freePort();
  const username = userInfo().username;
  const config = join(dir, 'sshd_config');
  writeFileSync(
    config,
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${hostKeyFile}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      'StrictModes no',
      'UsePAM no',
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'PermitRootLogin prohibit-password',
      `AllowUsers ${username}`,
      // -R: the SFTP server refuses every write with "Permission denied" (a read-only folder as the client sees it).
      opts.readOnly ? 'Subsystem sftp internal-sftp -R' : 'Subsystem sftp internal-sftp',
      'LogLevel ERROR',
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(SSHD, ['-D', '-e', '-f', config], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let gone = false;
  void exited.then(() => (gone = true));
  // Catches a hang only: a loaded machine may be slow to start sshd.
  const deadline = Date.now() + 30_000;
  while (!(await accepting(port))) {
    if (gone) throw new Error(`sshd exited before listening:\n${out}`);
    if (Date.now() > deadline)
      throw new Error(`sshd did not listen on ${port} within 30 s:\n${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    host: '127.0.0.1',
    port,
    username,
    userKeyFile,
    hostKey: fingerprintOf(`${hostKeyFile}.pub`),
    remoteDir,
    output: () => out,
    async stop() {
      if (!gone) {
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}
