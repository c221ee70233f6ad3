import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

/**
 * Plays systemd's side of sd_notify for tests: binds an AF_UNIX datagram socket (Node.js cannot,
 * so a few lines of Python 3 do), prints each message, and closes the file descriptor that
 * `systemd-notify` passes with BARRIER=1, which is what lets systemd-notify return.
 */
export interface NotifyReceiver {
  /** Value for `NOTIFY_SOCKET`. */
  socket: string;
  /** Every message so far, each as its `VAR=value` lines joined by `|`. */
  messages(): string[];
  close(): Promise<void>;
}

const RECEIVER = `
import array, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("listening", flush=True)
while True:
    msg, anc, flags, addr = s.recvmsg(65536, socket.CMSG_SPACE(64 * 4))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds = array.array("i")
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
            for fd in fds:
                os.close(fd)
    print(msg.decode("utf-8", "replace").strip().replace("\\n", "|"), flush=True)
`;

/**
 * Starts the receiver in `dir`. Throws (the test fails, it does not skip) when python3 or
 * systemd-notify is missing.
 */
export async function startNotifyReceiver(dir: string): Promise<NotifyReceiver> {
  for (const [tool, args, pkg] of [
    ['python3', ['--version'], 'python3'],
    ['systemd-notify', ['--version'], 'systemd'],
  ] as const) {
    if (spawnSync(tool, args, { stdio: 'ignore' }).error) {
      throw new Error(`${tool} is required for the sd_notify tests but could not be run; install it: apt-get install ${pkg}`);
    }
  }
  const socket = join(dir, 'notify.sock');
  const child: ChildProcess = spawn('python3', ['-u', '-c', RECEIVER, socket], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`notify receiver did not start: ${err}`)), 5000);
    let buffered = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      buffered += d;
      const parts = buffered.split('\n');
      buffered = parts.pop()!;
      for (const p of parts) {
        if (p === 'listening') {
          clearTimeout(timer);
          resolve();
        } else lines.push(p);
      }
    });
    child.once('exit', (code) => reject(new Error(`notify receiver exited with ${code}: ${err}`)));
  });
  return {
    socket,
    messages: () => [...lines],
    async close() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
