import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { constants } from 'node:fs';
import { lstat, open, realpath, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';

/** A connected pair of pseudo-terminals made by socat: what is written to `peer` arrives at `device`. */
export interface PtyPair {
  /** Symlink to the pty the code under test opens as its serial device (`<dir>/dev`). */
  devicePath: string;
  /** Symlink to the other end, playing the scanner (`<dir>/peer`). */
  peerPath: string;
  /** Writes bytes to the peer, i.e. the "scanner" sends them. */
  write(bytes: Buffer): Promise<void>;
  /** Kills socat: both ptys and their symlinks disappear, like an unplugged USB adapter. */
  kill(): Promise<void>;
}

/** Catches a hang only: a loaded machine may be slow to start socat. */
const START_TIMEOUT_MS = 30_000;

/**
 * Starts `socat -d -d pty,raw,echo=0,link=<dir>/dev pty,raw,echo=0,link=<dir>/peer` and resolves
 * once both links exist and socat has said it starts moving data (both ptys set up). The same
 * `dir` can be used again after `kill()` to bring the "device" back at the same path.
 *
 * @throws Error when socat is not installed (the test must fail, not skip) or does not start.
 */
export async function createPtyPair(dir: string): Promise<PtyPair> {
  const probe = spawnSync('socat', ['-V'], { stdio: 'ignore' });
  if (probe.error) {
    throw new Error(
      `socat is required for the serial tests but could not be run (${probe.error.message}); install it: apt-get install socat`,
    );
  }
  const devicePath = join(dir, 'dev');
  const peerPath = join(dir, 'peer');
  const child = spawn(
    'socat',
    ['-d', '-d', `pty,raw,echo=0,link=${devicePath}`, `pty,raw,echo=0,link=${peerPath}`],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    stderr = (stderr + text).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => resolve(code)),
  );
  let exitCode: number | null | undefined;
  void exited.then((code) => {
    exitCode = code;
  });

  const deadline = Date.now() + START_TIMEOUT_MS;
  // The links come before socat has set its ptys raw: a write to the peer in that window went
  // through the tty's output processing (a LF became CR LF). socat says when both are set up.
  while (!(
    stderr.includes('starting data transfer loop') &&
    (await ptyExists(devicePath)) &&
    (await ptyExists(peerPath))
  )) {
    if (exitCode !== undefined)
      throw new Error(`socat exited (code ${exitCode}) before creating the ptys: ${stderr}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(
        `socat did not create ${devicePath} and ${peerPath} within ${START_TIMEOUT_MS} ms: ${stderr}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }

  // One handle kept open: closing the last fd of a pty side makes socat see a hang-up.
  let peer: FileHandle | undefined = await open(peerPath, constants.O_WRONLY | constants.O_NOCTTY);

  return {
    devicePath,
    peerPath,
    async write(bytes: Buffer): Promise<void> {
      if (!peer) throw new Error('pty pair was killed');
      let offset = 0;
      while (offset < bytes.length) {
        const { bytesWritten } = await peer.write(bytes, offset, bytes.length - offset);
        offset += bytesWritten;
      }
    },
    async kill(): Promise<void> {
      const handle = peer;
      peer = undefined;
      await handle?.close().catch(() => undefined);
      await stop(child, exited);
      // socat removes its links on exit; wait so a new pair can take the same paths.
      const gone = Date.now() + START_TIMEOUT_MS;
      while ((await linkExists(devicePath)) || (await linkExists(peerPath))) {
        if (Date.now() > gone)
          throw new Error(`socat exited but left ${devicePath} or ${peerPath} behind`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
  };
}

async function stop(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 2000);
  await exited;
  clearTimeout(timer);
}

async function ptyExists(link: string): Promise<boolean> {
  try {
    await lstat(await realpath(link));
    return true;
  } catch {
    return false;
  }
}

async function linkExists(link: string): Promise<boolean> {
  try {
    await lstat(link);
    return true;
  } catch {
    return false;
  }
}
