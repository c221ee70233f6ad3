import { execFileSync, spawn } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT, VERSION } from '../../src/paths.js';
import { waitFor } from '../helpers/wait.js';
import { freePort } from '../helpers/ports.js';
import { run, starterForSandbox } from '../helpers/debian-root.js';

// The release package: built, checked by lintian, extracted into a temporary root (dpkg-deb -x),
// where <root>/usr/bin/scan-gateway runs --version, config init, config check and a short run with
// the package's own Node.js runtime; the packaged unit verifies with systemd-analyze. Installing
// it on clean Debian roots: deb-clean-roots.test.ts. dpkg-deb, lintian and systemd-analyze come
// from .ci/run's need block; a missing one fails here.

describe('the Debian package (npm run package)', () => {
  it('builds, passes lintian, and runs from its extracted layout', async () => {
    const out = mkdtempSync(join(tmpdir(), 'sg-deb-'));
    // A ceiling against a hang only: the build (xz of 150 MB) took 3.4 min on a shared two-core machine.
    const built = run('npm', ['run', '--silent', 'package', '--', out], { timeoutMs: 900_000 });
    expect(built.code, built.stderr).toBe(0);
    const arch = execFileSync('dpkg', ['--print-architecture'], { encoding: 'utf8' }).trim();
    const name = `scan-gateway_${VERSION}_${arch}.deb`;
    const deb = join(out, name);
    expect(built.stdout.trim().split('\n').pop()).toBe(deb);
    // The release is the .deb and its checksum file.
    expect(run('sha256sum', ['-c', `${name}.sha256`], { cwd: out })).toMatchObject({
      code: 0,
      stdout: `${name}: OK\n`,
    });

    // Every tag lintian finds is fixed or overridden with its reason (packaging/deb/lintian-overrides).
    const lint = run('lintian', ['--info', '--tag-display-limit', '0', deb]);
    const tags = lint.stdout.split('\n').filter((l) => /^[EWIXP]: /.test(l));
    expect(tags, lint.stdout + lint.stderr).toEqual([]);
    expect(lint.code, lint.stderr).toBe(0);

    const info = run('dpkg-deb', ['--info', deb]).stdout;
    // The runtime is inside: no nodejs dependency; what a minimal Debian lacks and the runtime uses is named.
    const depends = run('dpkg-deb', ['--field', deb, 'Depends']).stdout;
    expect(depends).not.toMatch(/nodejs/);
    for (const dep of [
      'libc6',
      'libstdc++6',
      'libgcc-s1',
      'libatomic1',
      'ca-certificates',
      'systemd',
    ])
      expect(depends).toContain(dep);
    expect(info).toMatch(/own Node\.js runtime/);
    expect(run('dpkg-deb', ['--field', deb, 'Architecture']).stdout.trim()).toBe(arch);
    const contents = run('dpkg-deb', ['--contents', deb]).stdout;
    for (const path of [
      './usr/bin/scan-gateway',
      './usr/lib/systemd/system/scan-gateway.service',
      './usr/lib/sysusers.d/scan-gateway.conf',
      './usr/lib/tmpfiles.d/scan-gateway.conf',
      './etc/scan-gateway/config.yaml',
      './usr/lib/scan-gateway/bin/node',
      './usr/lib/scan-gateway/node_modules/better-sqlite3/prebuilds/linux-x64.node',
      './usr/lib/scan-gateway/node_modules/unix-dgram/build/Release/unix_dgram.node',
      './usr/share/doc/scan-gateway/node.LICENSE',
      './usr/share/doc/scan-gateway/examples/keepalived/keepalived.conf',
      './usr/share/doc/scan-gateway/examples/keepalived/scan-gateway-is-leader',
    ]) {
      expect(contents).toContain(path);
    }
    // No development tools in the production modules.
    for (const dev of [
      '/node_modules/vitest/',
      '/node_modules/typescript/',
      '/node_modules/eslint/',
      '/node_modules/playwright-core/',
      '/node_modules/node-gyp/',
    ])
      expect(contents).not.toContain(dev);
    // The runtime alone: no headers, no npm, no docs of its own; no native binary of another platform.
    for (const extra of ['/include/node/', '/node_modules/npm/', '/share/doc/node/'])
      expect(contents).not.toContain(extra);
    const binaries = contents.split('\n').filter((l) => l.endsWith('.node'));
    expect(binaries.length).toBeGreaterThanOrEqual(3);
    expect(binaries.filter((l) => /darwin|win32|android|arm64|armv|musl/.test(l))).toEqual([]);

    const root = mkdtempSync(join(tmpdir(), 'sg-deb-root-'));
    expect(run('dpkg-deb', ['-x', deb, root]).code).toBe(0);
    expect(run('dpkg-deb', ['-e', deb, join(root, 'DEBIAN')]).code).toBe(0);
    expect(readFileSync(join(root, 'DEBIAN/conffiles'), 'utf8')).toBe(
      '/etc/scan-gateway/config.yaml\n',
    );
    // The documents' images travel with them: each image a shipped document shows is in the package.
    const docDir = join(root, 'usr/share/doc/scan-gateway');
    const images = readdirSync(docDir)
      .filter((f) => f.endsWith('.md'))
      .flatMap((f) =>
        [...readFileSync(join(docDir, f), 'utf8').matchAll(/!\[[^\]]*\]\(([^)\s]+)\)/g)].map(
          (m) => `${f}: ${m[1]!}`,
        ),
      );
    expect(images.length).toBeGreaterThanOrEqual(4);
    expect(images.filter((i) => !existsSync(join(docDir, i.slice(i.indexOf(': ') + 2))))).toEqual(
      [],
    );
    // The changelog is CHANGELOG.md's: this version's user-visible changes, not a pointer to git.
    const changelog = gunzipSync(readFileSync(join(docDir, 'changelog.gz'))).toString();
    expect(changelog.startsWith(`scan-gateway (${VERSION}) stable; urgency=medium\n`)).toBe(true);
    expect(changelog).toMatch(/\n {2}\* Added:\n {4}- \S/);
    expect(changelog).toContain('Bundled runtime: Node.js');
    expect(changelog).not.toContain('git log');
    for (const script of ['postinst', 'prerm', 'postrm'])
      expect(run('sh', ['-n', join(root, 'DEBIAN', script)]).code, script).toBe(0);
    const bin = join(root, 'usr/bin/scan-gateway');
    // The package's runtime answers, whatever node the machine has on PATH.
    expect(run(bin, ['--version'], { env: { PATH: '/usr/bin:/bin' } })).toMatchObject({
      code: 0,
      stdout: `scan-gateway ${VERSION} (Node.js v${JSON.parse(readFileSync(join(PACKAGE_ROOT, 'runtimes/node_modules/node26-x64/package.json'), 'utf8')).version as string}, linux-x64, ${root}/usr/lib/scan-gateway/bin/node)\n`,
    });

    // The conffile is the starter configuration; it passes the check of the file itself here
    // (its folders under /var/lib are made by the package's tmpfiles.d on the gateway).
    const conffile = join(root, 'etc/scan-gateway/config.yaml');
    expect(readFileSync(conffile, 'utf8')).toContain(
      'written by: scan-gateway config init --input files',
    );
    expect(run(bin, ['config', 'check', '--config', conffile, '--offline']).code).toBe(0);

    // config init and config check from the extracted layout, then a short run that delivers.
    const site = mkdtempSync(join(tmpdir(), 'sg-deb-site-'));
    const config = join(site, 'config.yaml');
    const init = run(bin, [
      'config',
      'init',
      '--input',
      'files',
      '--data-dir',
      site,
      '--listen',
      '127.0.0.1:0',
      '--output',
      config,
    ]);
    expect(init.code, init.stdout + init.stderr).toBe(0);
    const check = run(bin, ['config', 'check', '--config', config]);
    expect(check.code, check.stdout).toBe(0);
    const port = await freePort();
    // The starter, pointed at the embedded sandbox with a DCP it knows (GI-01).
    writeFileSync(config, starterForSandbox(readFileSync(config, 'utf8'), { sandboxPort: port }));
    expect(
      run(bin, ['config', 'check', '--config', config], {
        env: { SCAN_GATEWAY_CLIENT_SECRET: 'x' },
      }).code,
    ).toBe(0);
    const secret = readFileSync(
      join(root, 'usr/lib/scan-gateway/config/demo-client-secret'),
      'utf8',
    ).trim();
    // Another Node.js first on PATH (the supported 24 where the runtimes are installed, else the
    // machine's own): the package runs its own all the same.
    const node24 = join(PACKAGE_ROOT, 'runtimes/node_modules/node24-x64/bin');
    const path = existsSync(node24)
      ? `${node24}:${process.env.PATH ?? ''}`
      : (process.env.PATH ?? '');
    const child = spawn(bin, ['run', '--config', config], {
      cwd: site,
      env: { PATH: path, SCAN_GATEWAY_CLIENT_SECRET: secret },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stdout.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr.on('data', (d: Buffer) => (log += d.toString()));
    const exited = new Promise<number | null>((resolve) =>
      child.once('exit', (code) => resolve(code)),
    );
    try {
      await waitFor(() => log.includes('"msg":"scan-gateway started"'), {
        timeoutMs: 150_000,
        what: 'the packaged gateway started',
      });
      expect(log).toMatch(
        new RegExp(
          // The version and runtime, then the start-up profile, then the message.
          `"version":"${VERSION.replaceAll('.', '\\.')}","node":"v26\\.[^"]+",[^\\n]*"msg":"scan-gateway started"`,
        ),
      );
      copyFileSync(
        join(PACKAGE_ROOT, 'samples/goods-in-export.csv'),
        join(site, 'inbox', 'goods-in-export.csv'),
      );
      await waitFor(
        () =>
          existsSync(join(site, 'inbox/processed')) &&
          readdirSync(join(site, 'inbox/processed'), { recursive: true }).some((f) =>
            String(f).endsWith('.csv'),
          ),
        {
          timeoutMs: 150_000,
          what: 'the CSV taken and moved to processed/',
        },
      );
      const delivered = await waitFor(
        async () => {
          const r = (await (await fetch(`http://127.0.0.1:${port}/_sandbox/scans`)).json()) as {
            scans: unknown[];
          };
          return r.scans.length > 0 ? r.scans : undefined;
        },
        { timeoutMs: 150_000, what: 'scans delivered to the sandbox' },
      );
      expect(delivered.length).toBeGreaterThan(0);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited, log).toBe(0);

    // The packaged unit verifies, with its node and program paths pointed into the extracted root.
    const unitDir = mkdtempSync(join(tmpdir(), 'sg-deb-unit-'));
    const unit = readFileSync(join(root, 'usr/lib/systemd/system/scan-gateway.service'), 'utf8');
    expect(unit).toMatch(
      /^ExecStart=\/usr\/lib\/scan-gateway\/bin\/node --max-semi-space-size=2 --v8-pool-size=1 --heap-growing-percent=20 \/usr\/lib\/scan-gateway\/dist\/src\/main\.js run --config \/etc\/scan-gateway\/config\.yaml$/m,
    );
    expect(unit).toMatch(/^Environment=MALLOC_ARENA_MAX=2$/m);
    writeFileSync(
      join(unitDir, 'scan-gateway.service'),
      unit.replace(
        'ExecStart=/usr/lib/scan-gateway/bin/node --max-semi-space-size=2 --v8-pool-size=1 --heap-growing-percent=20 /usr/lib/scan-gateway/',
        `ExecStart=${root}/usr/lib/scan-gateway/bin/node --max-semi-space-size=2 --v8-pool-size=1 --heap-growing-percent=20 ${root}/usr/lib/scan-gateway/`,
      ),
    );
    // verify also opens the unit's Documentation= man page: the packaged one, through MANPATH.
    const verify = run('systemd-analyze', ['verify', join(unitDir, 'scan-gateway.service')], {
      env: { MANPATH: join(root, 'usr/share/man') },
    });
    expect(verify.code, verify.stderr).toBe(0);
    expect(verify.stderr.split('\n').filter((l) => l.includes('scan-gateway.service'))).toEqual([]);
  });
});
