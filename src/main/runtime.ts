/**
 * What the process edge decides before anything else is loaded: whether this Node.js can run the
 * gateway, and the runtime settings the daemon runs with whoever launched it. Pure functions of the
 * version, the node options and the environment; no imports, so that `src/main.ts` can load this
 * module on any Node.js, including the ones it refuses.
 */

/** The exit code of a refused runtime (docs/cli.md). A restart cannot fix it: the unit does not retry it. */
export const EXIT_UNSUPPORTED_RUNTIME = 5;

/**
 * The supported Node.js lines, each with its lowest release: the same set as `engines.node` in
 * package.json (`test/unit/runtime-guard.test.ts` holds them equal). better-sqlite3's prebuilt
 * binary crashes the process on Node.js 20 before it can say why, hence the check at all.
 */
export const SUPPORTED_RUNTIMES: readonly { major: number; minor: number }[] = [
  { major: 22, minor: 19 },
  { major: 24, minor: 0 },
  { major: 26, minor: 0 },
];

/** `22.19 or later, 24 or 26`, for the refusal line. */
function supportedInWords(): string {
  const names = SUPPORTED_RUNTIMES.map((r) =>
    r.minor > 0 ? `${r.major} (${r.major}.${r.minor} or later)` : String(r.major),
  );
  return `${names.slice(0, -1).join(', ')} or ${names.at(-1)}`;
}

/**
 * The one line printed when `version` (as `process.versions.node`, e.g. `20.20.2`) is not a
 * supported line, or undefined when it is.
 */
export function unsupportedRuntimeLine(version: string): string | undefined {
  const [major = NaN, minor = NaN] = version.split('.').map(Number);
  const ok = SUPPORTED_RUNTIMES.some((r) => r.major === major && minor >= r.minor);
  if (ok) return undefined;
  return (
    `scan-gateway: Node.js ${version} is not supported; it runs on Node.js ${supportedInWords()}. ` +
    'The Debian package carries its own Node.js 26 (docs/operations.md, "Runtimes"); for a source ' +
    'install, put a supported node first on PATH (https://nodejs.org/en/download).'
  );
}

/**
 * The daemon's runtime settings (docs/performance.md, "Why the daemon starts as it does"): V8's
 * young generation at 2 MiB per semi-space, one V8 background thread, the old generation grown by
 * a fifth of what survives rather than up to four times (a 1,000,000-row file beside a delivery
 * peaked at 385 MiB without it, 229 MiB with it), two glibc malloc arenas. The systemd unit and `npm start` pass them
 * on the command line; any other launcher gets them by a re-exec.
 */
export const DAEMON_NODE_FLAGS = [
  '--max-semi-space-size=2',
  '--v8-pool-size=1',
  '--heap-growing-percent=20',
] as const;
export const DAEMON_ENV = { MALLOC_ARENA_MAX: '2' } as const;
/** Set on the re-exec, so that a launcher whose settings cannot be seen never loops. */
export const RELAUNCHED_ENV = 'SCAN_GATEWAY_RELAUNCHED';

/**
 * What a re-exec must add so the daemon runs with {@link DAEMON_NODE_FLAGS} and
 * {@link DAEMON_ENV}, or undefined when nothing is missing. A flag or variable the launcher set
 * already (to any value, on the command line or in `NODE_OPTIONS`) is kept as it is.
 */
export function missingDaemonSettings(
  execArgv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): { flags: string[]; env: Record<string, string> } | undefined {
  if (env[RELAUNCHED_ENV] !== undefined) return undefined;
  const given = [...execArgv, ...(env.NODE_OPTIONS ?? '').split(/\s+/)];
  const flags = DAEMON_NODE_FLAGS.filter((f) => {
    const name = f.slice(0, f.indexOf('='));
    const alt = name.replace(/-/g, '_').replace(/^__/, '--');
    return !given.some((a) => [name, alt].some((n) => a === n || a.startsWith(`${n}=`)));
  });
  const vars = Object.fromEntries(
    Object.entries(DAEMON_ENV).filter(([k]) => env[k] === undefined),
  ) as Record<string, string>;
  if (flags.length === 0 && Object.keys(vars).length === 0) return undefined;
  return { flags, env: vars };
}

/**
 * Where the runtime's compile cache is kept: the first of systemd's `$CACHE_DIRECTORY` (the unit's
 * `CacheDirectory=`, a colon-separated list when it names several), or undefined for the runtime's
 * own default (`NODE_COMPILE_CACHE`, else `node-compile-cache` in the temp folder).
 */
export function compileCacheDirectory(
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  if (env.NODE_COMPILE_CACHE) return env.NODE_COMPILE_CACHE;
  const first = env.CACHE_DIRECTORY?.split(':')[0];
  return first ? `${first}/compile-cache` : undefined;
}
