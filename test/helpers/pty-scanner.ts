import { spawn, spawnSync } from 'node:child_process';
import { lstat, realpath } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * A scanner on a real pty, both ways: `socat pty,raw,echo=0,link=<dir>/dev STDIO`. The code under
 * test opens `devicePath` as its serial port; what the test writes arrives there as the scanner's
 * bytes, and what the code writes back to the port (ACK, NAK) arrives here, kept in `received`.
 */
export interface PtyScanner {
  devicePath: string;
  /** The scanner sends these bytes. */
  write(bytes: Buffer | string): void;
  /** Every byte written back to the scanner so far. */
  received(): Buffer;
  /** Called with each chunk written back, as it arrives (for timing). */
  onData(listener: (chunk: Buffer) => void): void;
  /** Ends socat: the pty disappears, like an unplugged adapter. */
  kill(): Promise<void>;
}

/** Catches a hang only: a loaded machine may be slow to start socat. */
const START_TIMEOUT_MS = 30_000;

/**
 * Starts socat and resolves once the device link exists.
 * @throws Error when socat is not installed (the test must fail, not skip) or does not start.
 */
export async function createPtyScanner(dir: string): Promise<PtyScanner> {
  const probe = spawnSync('socat', ['-V'], { stdio: 'ignore' });
  if (probe.error)
    throw new Error(
      `socat is required for the serial tests but could not be run (${probe.error.message}); install it: apt-get install socat`,
    );
  const devicePath = join(dir, 'dev');
  const child = spawn('socat', [`pty,raw,echo=0,link=${devicePath}`, 'STDIO'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (t: string) => (stderr = (stderr + t).slice(-4000)));
  const chunks: Buffer[] = [];
  const listeners: ((chunk: Buffer) => void)[] = [];
  child.stdout.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    for (const l of listeners) l(chunk);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let gone = false;
  void exited.then(() => (gone = true));
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    try {
      await lstat(await realpath(devicePath));
      break;
    } catch {
      if (gone) throw new Error(`socat exited before creating ${devicePath}: ${stderr}`);
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(
          `socat did not create ${devicePath} within ${START_TIMEOUT_MS} ms: ${stderr}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
  return {
    devicePath,
    write(bytes) {
      child.stdin.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes);
    },
    received: () => Buffer.concat(chunks),
    onData: (listener) => void listeners.push(listener),
    async kill() {
      if (gone) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 2000);
      await exited;
      clearTimeout(timer);
    },
  };
}
