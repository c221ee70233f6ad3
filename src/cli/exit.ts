/**
 * How a command action ends with an exit code without touching `process`: it throws
 * `CommandExit`, and `src/main/program.ts` turns it into the process exit code. The command has already
 * written whatever it had to say to stdout/stderr; main prints nothing more for it.
 *
 * Exit codes (docs/cli.md): 0 done; 1 the operation failed; 2 usage or configuration error;
 * 3 the upstream service is unreachable or refused the credentials; 4 the buffer cannot be opened
 * (corrupt, not a database, newer schema, no permission); 5 an unsupported Node.js runtime
 * (`src/main.ts`, before the program loads). The systemd unit does not restart on 2, 4 and 5
 * (`RestartPreventExitStatus=`): a restart cannot fix them, a person must.
 */
export class CommandExit extends Error {
  constructor(
    readonly exitCode: number,
    message?: string,
  ) {
    super(message ?? `exit ${exitCode}`);
    this.name = 'CommandExit';
  }
}

/** Exit codes shared by every command. */
export const ExitCodes = {
  OK: 0,
  FAILED: 1,
  USAGE: 2,
  UNREACHABLE: 3,
  BUFFER_UNUSABLE: 4,
  /** Set by `src/main.ts` before the program loads (`main/runtime.ts`). */
  UNSUPPORTED_RUNTIME: 5,
} as const;
