import { PassThrough } from 'node:stream';
import { Command } from 'commander';
import { CommandExit } from '../../src/cli/exit.js';
import { registerTryCommand } from '../../src/cli/try-command.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

/**
 * Runs `scan-gateway try --config CONFIG ARGS…` in this process, with the clock at `nowMs`, and
 * answers its exit code and what it wrote on stdout and stderr.
 */
export async function runTry(
  config: string,
  nowMs: number,
  args: string[],
): Promise<{ code: number; out: string; err: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (d: Buffer) => (out += d.toString()));
  stderr.on('data', (d: Buffer) => (err += d.toString()));
  const program = new Command('scan-gateway').exitOverride();
  registerTryCommand(program, { stdout, stderr, cwd: PACKAGE_ROOT, env: {}, now: () => nowMs });
  try {
    await program.parseAsync(['node', 'scan-gateway', 'try', '--config', config, ...args]);
  } catch (e) {
    if (e instanceof CommandExit) return { code: e.exitCode, out, err };
    throw e;
  }
  throw new Error('try always ends with an exit code');
}
