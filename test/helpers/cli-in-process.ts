import { Writable } from 'node:stream';
import { Command, CommanderError } from 'commander';
import { CommandExit } from '../../src/cli/exit.js';
import type { OpsIo } from '../../src/cli/ops-open.js';

/** What a command's `register…(program, io)` is handed (src/cli/ops-open.ts `OpsIo`, a superset of the others). */
export type CliIo = OpsIo;

/** What one command line did: its exit code (0, a `CommandExit`'s, or 2 for a usage error) and output. */
export interface CliRun {
  code: number;
  out: string;
  err: string;
}

function capture(): { stream: Writable; text: () => string } {
  let text = '';
  return {
    stream: new Writable({
      write(c: Buffer, _e, done) {
        text += c.toString();
        done();
      },
    }),
    text: () => text,
  };
}

/**
 * Runs one command line in this process as src/main.ts does: a `scan-gateway` program with the
 * commands `register` adds, `io` beside captured stdout and stderr (env empty unless given).
 */
export async function runCli(
  args: string[],
  register: ((program: Command, io: CliIo) => void)[],
  io: Omit<CliIo, 'stdout' | 'stderr' | 'env'> & { env?: CliIo['env'] },
): Promise<CliRun> {
  const out = capture();
  const err = capture();
  const program = new Command('scan-gateway').exitOverride().configureOutput({
    writeOut: (s) => out.stream.write(s),
    writeErr: (s) => err.stream.write(s),
  });
  for (const r of register) r(program, { env: {}, ...io, stdout: out.stream, stderr: err.stream });
  let code = 0;
  try {
    await program.parseAsync(['node', 'scan-gateway', ...args]);
  } catch (e) {
    if (e instanceof CommandExit) code = e.exitCode;
    else if (e instanceof CommanderError) code = e.exitCode === 0 ? 0 : 2;
    else throw e;
  }
  return { code, out: out.text(), err: err.text() };
}
