import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

/**
 * Plays systemd's side of sd_notify for tests: binds an AF_UNIX datagram socket (Node.js cannot,
 * so a few lines of Python 3 do), and prints each message with the PID that sent it (from the
 * kernel's SCM_CREDENTIALS, as systemd checks it for `NotifyAccess=main`). File descriptors passed
 * with a message (systemd-notify's BARRIER=1) are closed, which is what lets systemd-notify return.
 */
export interface NotifyReceiver {
  /** Value for `NOTIFY_SOCKET`: a path, or `@name` for an abstract address. */
  socket: string;
  /** Every message so far, each as its `VAR=value` lines joined by `|`. */
  messages(): string[];
  /** Every message so far with the PID of the process that sent it. */
  entries(): { pid: number; message: string }[];
  close(): Promise<void>;
}

const RECEIVER = `
import array, os, socket, struct, sys
name = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
s.bind("\\0" + name[1:] if name.startswith("@") else name)
print("listening", flush=True)
while True:
    msg, anc, flags, addr = s.recvmsg(65536, socket.CMSG_SPACE(64 * 4) + socket.CMSG_SPACE(12))
    pid = 0
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds = array.array("i")
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
            for fd in fds:
                os.close(fd)
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = struct.unpack("iII", data[:12])[0]
    print(str(pid) + " " + msg.decode("utf-8", "replace").strip().replace("\\n", "|"), flush=True)
`;

/**
 * Starts the receiver in `dir` (or on the abstract address `@<abstract>` when given). Throws (the
 * test fails, it does not skip) when python3 is missing.
 */
export async function startNotifyReceiver(dir: string, abstract?: string): Promise<NotifyReceiver> {
  if (spawnSync('python3', ['--version'], { stdio: 'ignore' }).error) {
    throw new Error(
      'python3 is required for the sd_notify tests but could not be run; install it: apt-get install python3',
    );
  }
  const socket = abstract !== undefined ? `@${abstract}` : join(dir, 'notify.sock');
  const child: ChildProcess = spawn('python3', ['-u', '-c', RECEIVER, socket], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const entries: { pid: number; message: string }[] = [];
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`notify receiver did not start: ${err}`)),
      5000,
    );
    let buffered = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      buffered += d;
      const parts = buffered.split('\n');
      buffered = parts.pop()!;
      for (const p of parts) {
        if (p === 'listening') {
          clearTimeout(timer);
          resolve();
        } else {
          const space = p.indexOf(' ');
          entries.push({ pid: Number(p.slice(0, space)), message: p.slice(space + 1) });
        }
      }
    });
    child.once('exit', (code) => reject(new Error(`notify receiver exited with ${code}: ${err}`)));
  });
  return {
    socket,
    messages: () => entries.map((e) => e.message),
    entries: () => [...entries],
    async close() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
