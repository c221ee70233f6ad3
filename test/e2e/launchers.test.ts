import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { MAIN_JS } from '../helpers/gateway-process.js';
import { waitFor } from '../helpers/wait.js';
import { npmCli } from '../setup/runtimes.js';

// The entry point as a newcomer and a site meet it: an unsupported Node.js first on PATH is refused
// in one line with exit code 5 (docs/cli.md), for every command; and the daemon runs with the
// unit's runtime settings whoever launched it (src/main/runtime.ts).

/** The pinned Node.js 20 (runtimes/package.json), installed by the e2e layer's setup. */
const NODE20 = join(PACKAGE_ROOT, 'runtimes/node_modules/node20-x64/bin/node');

function minimalConfig(dir: string): string {
  const file = join(dir, 'config.yaml');
  writeFileSync(
    file,
    `site: { id: launchers, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${dir}/buffer.db }
http: { listen: '127.0.0.1:0' }
log: { level: info }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }
inputs: []
`,
  );
  return file;
}

/** Starts `command args` until "scan-gateway started", then answers its pid's command line and environment. */
async function launched(
  command: string,
  args: string[],
  env: Record<string, string>,
  cwd = PACKAGE_ROOT,
): Promise<{ argv: string[]; env: Map<string, string> }> {
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await waitFor(() => out.includes('"msg":"scan-gateway started"') || child.exitCode !== null, {
      timeoutMs: 60_000,
      what: `${command} ${args.join(' ')} to start`,
    });
    expect(out).toContain('"msg":"scan-gateway started"');
    const pid = child.pid!;
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean);
    return {
      argv,
      env: new Map(environ.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)])),
    };
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

describe('an unsupported Node.js first on PATH', () => {
  for (const args of [['--version'], ['run', '--config', 'config/demo.yaml'], ['--help']]) {
    it(`\`${args.join(' ')}\` prints one line naming the versions and exits 5`, () => {
      const r = spawnSync(NODE20, [MAIN_JS, ...args], { cwd: PACKAGE_ROOT, encoding: 'utf8' });
      expect(r.status).toBe(5);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(
        /^scan-gateway: Node\.js 20\.\d+\.\d+ is not supported; it runs on Node\.js 22 \(22\.19 or later\), 24 or 26\. [^\n]*carries its own Node\.js 26[^\n]*\n$/,
      );
    });
  }

  it("`npm ci` stops with npm's engine message (engine-strict in .npmrc)", () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-engine-'));
    for (const f of ['package.json', 'package-lock.json', '.npmrc'])
      cpSync(join(PACKAGE_ROOT, f), join(dir, f));
    // The runtime packages carry no npm: this suite's own npm, run by Node.js 20.
    const r = spawnSync(NODE20, [npmCli(), 'ci', '--ignore-scripts', '--no-audit', '--no-fund'], {
      cwd: dir,
      encoding: 'utf8',
      env: {
        PATH: `${join(NODE20, '..')}:${process.env.PATH ?? ''}`,
        HOME: process.env.HOME ?? dir,
      },
    });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/EBADENGINE|notsup/);
    expect(r.stderr).toContain('^22.19.0 || ^24.0.0 || ^26.0.0');
  });
});

describe("the daemon's runtime settings do not depend on the launcher", () => {
  const want = ['--max-semi-space-size=2', '--v8-pool-size=1', '--heap-growing-percent=20'];
  const base = () => ({ PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root' });

  it('`node dist/src/main.js run` runs with the flags and MALLOC_ARENA_MAX=2, in the same process', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-launch-'));
    const p = await launched(process.execPath, [MAIN_JS, 'run', '--config', minimalConfig(dir)], {
      ...base(),
      SCAN_GATEWAY_CLIENT_SECRET: 's',
    });
    for (const f of want) expect(p.argv).toContain(f);
    expect(p.env.get('MALLOC_ARENA_MAX')).toBe('2');
  });

  it('`scan-gateway run` (the executable entry, as the npm link runs it) gets the same', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-launch-'));
    const p = await launched(MAIN_JS, ['run', '--config', minimalConfig(dir)], {
      ...base(),
      PATH: `${join(process.execPath, '..')}:${process.env.PATH ?? ''}`,
      SCAN_GATEWAY_CLIENT_SECRET: 's',
    });
    for (const f of want) expect(p.argv).toContain(f);
    expect(p.env.get('MALLOC_ARENA_MAX')).toBe('2');
  });

  it("keeps a launcher's own values and adds nothing twice", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-launch-'));
    const p = await launched(
      process.execPath,
      ['--max-semi-space-size=4', MAIN_JS, 'run', '--config', minimalConfig(dir)],
      { ...base(), MALLOC_ARENA_MAX: '3', SCAN_GATEWAY_CLIENT_SECRET: 's' },
    );
    expect(p.argv.filter((a) => a.startsWith('--max-semi-space-size'))).toEqual([
      '--max-semi-space-size=4',
    ]);
    expect(p.argv).toContain('--v8-pool-size=1');
    expect(p.env.get('MALLOC_ARENA_MAX')).toBe('3');
  });
});

describe('a built tree installed without the development dependencies', () => {
  it('`npm ci --omit=dev` installs no compiler and no type declarations, and the gateway runs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-omit-dev-'));
    const tracked = spawnSync(
      'git',
      ['ls-files', '-z', '--cached', '--others', '--exclude-standard'],
      { cwd: PACKAGE_ROOT, encoding: 'utf8' },
    );
    expect(tracked.status).toBe(0);
    for (const f of tracked.stdout.split('\0').filter(Boolean))
      if (existsSync(join(PACKAGE_ROOT, f))) cpSync(join(PACKAGE_ROOT, f), join(dir, f));
    for (const built of [
      'dist',
      'packages/contract/dist',
      'packages/service-kit/dist',
      'packages/sandbox/dist',
    ])
      cpSync(join(PACKAGE_ROOT, built), join(dir, built), { recursive: true });
    const ci = spawnSync(
      process.execPath,
      [npmCli(), 'ci', '--omit=dev', '--no-audit', '--no-fund'],
      {
        cwd: dir,
        encoding: 'utf8',
        env: { ...process.env, npm_config_loglevel: 'error' },
      },
    );
    expect(ci.stderr + ci.stdout).not.toMatch(/npm error/);
    expect(ci.status).toBe(0);
    expect(existsSync(join(dir, 'node_modules/typescript'))).toBe(false);
    // (@types/node stays: mqtt lists @types/ws and @types/readable-stream, which need it.)
    expect(existsSync(join(dir, 'node_modules/@types/ssh2-sftp-client'))).toBe(false);
    expect(existsSync(join(dir, 'node_modules/@types/better-sqlite3'))).toBe(false);
    const p = await launched(
      process.execPath,
      [join(dir, 'dist/src/main.js'), 'run', '--config', minimalConfig(dir)],
      {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? dir,
        SCAN_GATEWAY_CLIENT_SECRET: 's',
      },
      dir,
    );
    expect(p.argv).toContain(join(dir, 'dist/src/main.js'));
    // npm ci installs and builds the native modules: 10 s on a quiet machine, over a minute on a
    // loaded one. The bound only catches a hang.
  }, 600_000);
});
