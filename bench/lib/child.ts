import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

/**
 * Benchmark parts that must have a process of their own (the gateway side of the drain, so its
 * memory is its own; the sandbox, so it does not share an event loop with what it serves). They
 * speak JSON lines on stdout; stderr is kept for error messages.
 */

const live = new Set<ChildProcess>();
// A benchmark that dies (an exception, Ctrl-C) must not leave brokers, sandboxes or ptys behind.
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** Kills `child` when this process exits, if it is still running then. */
export function track(child: ChildProcess): ChildProcess {
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

/** Folder of the compiled benchmark scripts (dist/bench). */
export const BENCH_DIST = join(dirname(fileURLToPath(import.meta.url)), '..');

/** A started child process speaking JSON lines. */
export interface JsonChild {
  child: ChildProcess;
  pid: number;
  /** The next JSON line the child writes (each call waits for a new one). */
  next<T = Record<string, unknown>>(timeoutMs: number, what: string): Promise<T>;
  /** Sends one JSON line to the child's stdin. */
  send(message: unknown): void;
  /** Waits up to `graceMs` for the child to exit by itself, then SIGTERM, then SIGKILL after 5 s; resolves with the exit code. */
  stop(graceMs?: number): Promise<number | null>;
  stderr(): string;
}

/** Starts `node dist/bench/<script> <args…>` with stdin/stdout as JSON-line pipes. */
export function startJsonChild(script: string, args: string[], nodeArgs: string[] = []): JsonChild {
  const child = track(
    spawn(process.execPath, [...nodeArgs, join(BENCH_DIST, script), ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
    }),
  );
  let err = '';
  let buffered = '';
  const lines: unknown[] = [];
  const waiters: Array<(line: unknown) => void> = [];
  child.stderr!.setEncoding('utf8').on('data', (text: string) => {
    err = (err + text).slice(-8000);
  });
  child.stdout!.setEncoding('utf8').on('data', (text: string) => {
    buffered += text;
    let i: number;
    while ((i = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, i).trim();
      buffered = buffered.slice(i + 1);
      if (!line.startsWith('{')) continue;
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        continue;
      }
      const waiter = waiters.shift();
      if (waiter) waiter(parsed);
      else lines.push(parsed);
    }
  });
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => resolve(code)),
  );
  return {
    child,
    pid: child.pid!,
    next<T>(timeoutMs: number, what: string): Promise<T> {
      if (lines.length > 0) return Promise.resolve(lines.shift() as T);
      return new Promise<T>((resolve, reject) => {
        const waiter = (line: unknown) => {
          clearTimeout(timer);
          resolve(line as T);
        };
        const timer = setTimeout(() => {
          const at = waiters.indexOf(waiter);
          if (at >= 0) waiters.splice(at, 1);
          reject(
            new Error(
              `${script}: no answer within ${timeoutMs} ms while waiting for ${what}; stderr: ${err.slice(-2000)}`,
            ),
          );
        }, timeoutMs);
        void exited.then((code) => {
          clearTimeout(timer);
          reject(
            new Error(
              `${script} exited with ${code} while waiting for ${what}; stderr: ${err.slice(-2000)}`,
            ),
          );
        });
        waiters.push(waiter);
      });
    },
    send(message: unknown): void {
      child.stdin!.write(`${JSON.stringify(message)}\n`);
    },
    async stop(graceMs = 0): Promise<number | null> {
      if (graceMs > 0)
        await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, graceMs))]);
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
    stderr: () => err,
  };
}

/** Writes one JSON line to stdout (the child side of the protocol). */
export function reply(message: unknown): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

/**
 * Reads the parent's commands (one JSON object per line on stdin, the child side of the protocol)
 * and hands each to `onCommand`; `onEnd` runs when the parent closes stdin.
 */
export function readCommands<T>(onCommand: (command: T) => void, onEnd?: () => void): void {
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  lines.on('line', (line) => {
    if (line.trim() !== '') onCommand(JSON.parse(line) as T);
  });
  if (onEnd) lines.once('close', onEnd);
}
