#!/usr/bin/env node
/**
 * The entry point, for every command including `--version`. Before any module that could crash an
 * unsupported Node.js is loaded (better-sqlite3's native binary does, silently, on Node.js 20), the
 * runtime is checked: on an unsupported one, one line and exit code 5. The daemon (`run`) then
 * re-executes itself with the unit's runtime settings when its launcher left them out, so that
 * `scan-gateway run`, `npm start`, the unit and a plain `node dist/src/main.js run` all run with the
 * same memory bounds. The program itself is `main/program.ts`.
 */
// The namespace, not a named import: on Node.js 20 `enableCompileCache` does not exist, and a
// named import of it would fail when the module links, before the guard below could say why.
import * as nodeModule from 'node:module';
import {
  DAEMON_NODE_FLAGS,
  EXIT_UNSUPPORTED_RUNTIME,
  RELAUNCHED_ENV,
  compileCacheDirectory,
  missingDaemonSettings,
  unsupportedRuntimeLine,
} from './main/runtime.js';
// Pure JavaScript (the mark's name, the package's root): safe on any runtime the guard refuses.
import { MARK_MAIN } from './paths.js';

performance.mark(MARK_MAIN);

const refusal = unsupportedRuntimeLine(process.versions.node);
if (refusal !== undefined) {
  process.stderr.write(`${refusal}\n`);
  process.exit(EXIT_UNSUPPORTED_RUNTIME);
}

const command = process.argv.slice(2).find((a) => !a.startsWith('-'));
const missing =
  command === 'run' ? missingDaemonSettings(process.execArgv, process.env) : undefined;
if (missing !== undefined) {
  // The same process (same PID: systemd's main process, a supervisor's child) with the settings;
  // MALLOC_ARENA_MAX is read by glibc when the process starts, so only a new image applies it.
  const flags = DAEMON_NODE_FLAGS.filter((f) => missing.flags.includes(f));
  try {
    process.execve?.(
      process.execPath,
      [process.execPath, ...flags, ...process.execArgv, ...process.argv.slice(1)],
      { ...process.env, ...missing.env, [RELAUNCHED_ENV]: '1' },
    );
  } catch (err) {
    // Where the kernel cannot start the runtime itself (an emulator such as qemu-user without
    // binfmt_misc, ENOEXEC), the daemon runs on without the settings rather than not at all.
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    process.stderr.write(
      `scan-gateway: running without the daemon's runtime settings (${[...flags, ...Object.keys(missing.env)].join(' ')}): ` +
        `re-executing ${process.execPath} failed (${code}); start it as the systemd unit does to get them\n`,
    );
  }
}

// The runtime's compile cache: the code V8 compiled for the gateway's and its packages' modules is
// kept on disk and reused by the next start, which then loads them in about half the time
// (docs/performance.md, "Start-up"). Where systemd gives the unit a cache directory
// (CacheDirectory=, $CACHE_DIRECTORY) it is kept there; otherwise in the runtime's default
// (NODE_COMPILE_CACHE, or node-compile-cache in the temp folder). NODE_DISABLE_COMPILE_CACHE=1 turns
// it off; a directory that cannot be written only costs the speed-up.
nodeModule.enableCompileCache(compileCacheDirectory(process.env));

await import('./main/program.js');
