import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT, VERSION } from '../../src/paths.js';
import {
  buildPackage,
  containerInit,
  debianRoot,
  inBooted,
  inRoot,
  pathsNamed,
  repackAs,
  spawnInRoot,
  starterForSandbox,
  type DebianSuite,
} from '../helpers/debian-root.js';
import { freePort } from '../helpers/ports.js';
import { waitFor } from '../helpers/wait.js';

// The release package on the systems plants have: clean Debian 12 and 13 roots with no Node.js
// (mmdebstrap --variant=apt). In each: apt installs the .deb with its dependencies, the bundled
// runtime answers --version and config check, a short run as the service user delivers a dropped
// file to the embedded sandbox, the installed unit verifies, and purge leaves no file behind. The
// Debian 12 root is also booted under its own systemd (systemd-nspawn -b), where the unit starts
// and reports ready; Debian 13's systemd needs cgroup v2, which these machines lack. A second booted
// Debian 12 root is upgraded (the package repacked with a higher version) with the site's secret in
// upstream.clientSecretFile: the service restarts on the new version; a failing check leaves it on
// the old one, and apt's output says so.
// mmdebstrap, systemd-nspawn (systemd-container) and nsenter come from .ci/run; a missing one fails here.

/** Debian 12 with its own nodejs (18, past its end of life) installed first, which the package must leave alone; Debian 13 with no Node.js at all. */
const SUITES: { suite: DebianSuite; release: number; boot: boolean; systemNode?: string }[] = [
  { suite: 'bookworm', release: 12, boot: true, systemNode: 'v18.' },
  { suite: 'trixie', release: 13, boot: false },
];

/** The demo client secret the embedded sandbox accepts. */
const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

/** The starter pointed at an embedded sandbox on `port`, its folders in `dataDir`, its page on `httpPort`. */
function siteConfig(starter: string, port: number, dataDir: string, httpPort: number): string {
  return starterForSandbox(starter, {
    sandboxPort: port,
    dataDir,
    httpListen: `127.0.0.1:${httpPort}`,
  });
}

async function sandboxScans(port: number): Promise<unknown[] | undefined> {
  const r = (await (await fetch(`http://127.0.0.1:${port}/_sandbox/scans`)).json()) as {
    scans: unknown[];
  };
  return r.scans.length > 0 ? r.scans : undefined;
}

describe('the Debian package on clean Debian roots', () => {
  let deb = '';
  const roots: string[] = [];
  beforeAll(() => {
    deb = buildPackage();
  });
  afterAll(() => {
    for (const root of roots) rmSync(root, { recursive: true, force: true });
  });

  for (const { suite, release, boot, systemNode } of SUITES) {
    it(`Debian ${release} (${suite}): apt installs it ${systemNode ? `beside Debian's nodejs ${systemNode}x` : 'with no Node.js'}, it runs and delivers as its user${boot ? ', starts under systemd' : ''}, and purge removes it`, async () => {
      const root = debianRoot(suite);
      roots.push(root);
      expect(readFileSync(join(root, 'etc/debian_version'), 'utf8')).toMatch(
        new RegExp(`^${release}\\.`),
      );
      // A system with no Node.js at all, as mmdebstrap made it.
      expect(
        inRoot(root, ['sh', '-c', 'command -v node nodejs; dpkg-query -W nodejs']).code,
      ).not.toBe(0);

      // /var/tmp: systemd-nspawn gives the container a /tmp of its own.
      copyFileSync(deb, join(root, 'var/tmp', basename(deb)));
      // As on a new system: the package lists first (mmdebstrap leaves none behind).
      const update = inRoot(root, ['apt-get', 'update', '-qq'], { timeoutMs: 1_500_000 });
      expect(update.code, update.stdout + update.stderr).toBe(0);
      if (systemNode) {
        const nodejs = inRoot(
          root,
          ['apt-get', 'install', '-y', '-qq', '--no-install-recommends', 'nodejs'],
          { env: { DEBIAN_FRONTEND: 'noninteractive' }, timeoutMs: 3_000_000 },
        );
        expect(nodejs.code, nodejs.stdout.slice(-2000) + nodejs.stderr).toBe(0);
        expect(inRoot(root, ['node', '--version']).stdout).toMatch(
          new RegExp(`^${systemNode.replace('.', '\\.')}`),
        );
      }
      const install = inRoot(
        root,
        ['apt-get', 'install', '-y', '--no-install-recommends', `/var/tmp/${basename(deb)}`],
        { env: { DEBIAN_FRONTEND: 'noninteractive' }, timeoutMs: 3_000_000 },
      );
      expect(install.code, install.stdout.slice(-3000) + install.stderr).toBe(0);
      expect(install.stdout).toContain('Setting up scan-gateway');
      if (systemNode) {
        // The system's node is left as it was.
        expect(inRoot(root, ['node', '--version']).stdout).toMatch(
          new RegExp(`^${systemNode.replace('.', '\\.')}`),
        );
      } else {
        expect(inRoot(root, ['dpkg-query', '-W', '-f=${Status}', 'nodejs']).stdout).not.toContain(
          'installed',
        );
      }

      // The bundled runtime, whatever the system has; no warning from a missing CA bundle.
      const version = inRoot(root, ['scan-gateway', '--version']);
      expect(version.code, version.stderr).toBe(0);
      expect(version.stdout).toMatch(
        new RegExp(
          `^scan-gateway ${VERSION.replaceAll('.', '\\.')} \\(Node\\.js v26\\.\\d+\\.\\d+, linux-x64, /usr/lib/scan-gateway/bin/node\\)\\n$`,
        ),
      );
      expect(version.stderr.trim()).toBe('');
      const check = inRoot(root, [
        'scan-gateway',
        'config',
        'check',
        '--config',
        '/etc/scan-gateway/config.yaml',
        '--offline',
      ]);
      expect(check.code, check.stdout + check.stderr).toBe(0);
      expect(check.stderr).not.toMatch(/Ignoring extra certs|Warning/);

      // The installed unit verifies with the root's own systemd.
      const verify = inRoot(root, [
        'systemd-analyze',
        'verify',
        '/usr/lib/systemd/system/scan-gateway.service',
      ]);
      expect(
        verify.stderr
          .split('\n')
          .filter((l) => l.includes('scan-gateway') && !l.includes("Command 'man")),
      ).toEqual([]);

      // A short run as the service user from the installed layout: a dropped file reaches the sandbox.
      const sandboxPort = await freePort();
      const httpPort = await freePort();
      const site = '/var/lib/scan-gateway/site';
      expect(
        inRoot(root, [
          'install',
          '-d',
          '-o',
          'scan-gateway',
          '-g',
          'scan-gateway',
          '-m',
          '0750',
          site,
        ]).code,
      ).toBe(0);
      writeFileSync(
        join(root, site, 'config.yaml'),
        siteConfig(
          readFileSync(join(root, 'etc/scan-gateway/config.yaml'), 'utf8'),
          sandboxPort,
          site,
          httpPort,
        ),
      );
      expect(inRoot(root, ['chown', 'scan-gateway:scan-gateway', `${site}/config.yaml`]).code).toBe(
        0,
      );
      const gateway = spawnInRoot(
        root,
        [
          '--pipe',
          '--kill-signal=SIGTERM',
          `--chdir=${site}`,
          `--setenv=SCAN_GATEWAY_CLIENT_SECRET=${SECRET}`,
        ],
        [
          'setpriv',
          '--reuid=scan-gateway',
          '--regid=scan-gateway',
          '--init-groups',
          'scan-gateway',
          'run',
          '--config',
          `${site}/config.yaml`,
        ],
      );
      let log = '';
      gateway.stdout?.on('data', (d: Buffer) => (log += d.toString()));
      gateway.stderr?.on('data', (d: Buffer) => (log += d.toString()));
      const exited = new Promise<number | null>((resolve) =>
        gateway.once('exit', (code) => resolve(code)),
      );
      try {
        await waitFor(() => log.includes('"msg":"scan-gateway started"'), {
          timeoutMs: 300_000,
          what: `the packaged gateway started in ${suite}`,
        }).catch((err: unknown) => {
          throw new Error(`${(err as Error).message}\n${log.slice(-3000)}`);
        });
        // On the package's runtime, whatever the system's node is.
        // The start line's runtime, then its start-up profile, then the message.
        expect(log).toMatch(/"node":"v26\.[^"]+",[^\n]*"msg":"scan-gateway started"/);
        mkdirSync(join(root, site, 'inbox'), { recursive: true });
        copyFileSync(
          join(PACKAGE_ROOT, 'samples/goods-in-export.csv'),
          join(root, site, 'inbox', 'goods-in-export.csv'),
        );
        const delivered = await waitFor(() => sandboxScans(sandboxPort), {
          timeoutMs: 300_000,
          what: 'scans delivered to the sandbox',
        });
        expect(delivered.length).toBeGreaterThan(0);
        // The buffer was written by the service user.
        // (Read from the host: a second container on the same root is refused while this one runs.)
        const uid = /^scan-gateway:x:(\d+):/m.exec(
          readFileSync(join(root, 'etc/passwd'), 'utf8'),
        )?.[1];
        expect(uid).toBeDefined();
        expect(statSync(join(root, site, 'buffer.db')).uid).toBe(Number(uid));
      } finally {
        gateway.kill('SIGTERM');
      }
      expect(await exited, log.slice(-3000)).toBe(0);

      if (boot) {
        // Under the root's own systemd: the service configured, its secret in place, enabled, booted.
        const servicePort = await freePort();
        const serviceHttp = await freePort();
        writeFileSync(
          join(root, 'etc/scan-gateway/config.yaml'),
          siteConfig(
            readFileSync(join(root, 'etc/scan-gateway/config.yaml'), 'utf8'),
            servicePort,
            '/var/lib/scan-gateway',
            serviceHttp,
          ),
        );
        writeFileSync(join(root, 'etc/scan-gateway/client-secret'), `${SECRET}\n`, { mode: 0o600 });
        const enable = inRoot(root, ['systemctl', 'enable', 'scan-gateway.service']);
        expect(enable.code, enable.stderr).toBe(0);
        const booted = spawnInRoot(root, ['--boot'], []);
        let console = '';
        booted.stdout?.on('data', (d: Buffer) => (console += d.toString()));
        booted.stderr?.on('data', (d: Buffer) => (console += d.toString()));
        const poweredOff = new Promise<number | null>((resolve) =>
          booted.once('exit', (code) => resolve(code)),
        );
        try {
          const init = await waitFor(() => containerInit(booted.pid!), {
            timeoutMs: 150_000,
            what: 'the container booted',
          });
          const state = await waitFor(
            () => {
              const s = inBooted(init, [
                'systemctl',
                'show',
                '-p',
                'ActiveState,SubState,StatusText',
                'scan-gateway.service',
              ]).stdout;
              return /ActiveState=failed/.test(s)
                ? `failed: ${s}`
                : /ActiveState=active/.test(s)
                  ? s
                  : undefined;
            },
            {
              timeoutMs: 450_000,
              intervalMs: 500,
              what: 'scan-gateway.service active under systemd',
            },
          ).catch((err: unknown) => {
            const journal = inBooted(init, [
              'journalctl',
              '--no-pager',
              '-n',
              '60',
              '-u',
              'scan-gateway.service',
            ]).stdout;
            throw new Error(`${(err as Error).message}\n${journal}\n${console.slice(-2000)}`);
          });
          // Type=notify: active means the gateway sent READY=1.
          expect(
            state,
            inBooted(init, ['journalctl', '--no-pager', '-n', '60', '-u', 'scan-gateway.service'])
              .stdout,
          ).toMatch(/ActiveState=active\nSubState=running/);
          const health = (await (
            await fetch(`http://127.0.0.1:${serviceHttp}/healthz`)
          ).json()) as { status: string };
          expect(['ok', 'degraded']).toContain(health.status);
          expect(
            inBooted(init, [
              'systemctl',
              'show',
              '-p',
              'ExecMainPID',
              '--value',
              'scan-gateway.service',
            ]).stdout.trim(),
          ).not.toBe('0');
          const exec = inBooted(init, [
            'sh',
            '-c',
            'readlink /proc/$(systemctl show -p MainPID --value scan-gateway.service)/exe',
          ]).stdout.trim();
          expect(exec).toBe('/usr/lib/scan-gateway/bin/node');
          // `systemctl reload` reaches the gateway as SIGHUP through the unit's ExecReload, with the root's own tools.
          const reload = inBooted(init, ['systemctl', 'reload', 'scan-gateway.service']);
          expect(reload.code, reload.stderr).toBe(0);
          await waitFor(
            () =>
              /configuration reloaded/.test(
                inBooted(init, [
                  'journalctl',
                  '--no-pager',
                  '-n',
                  '60',
                  '-u',
                  'scan-gateway.service',
                ]).stdout,
              )
                ? true
                : undefined,
            {
              timeoutMs: 100_000,
              intervalMs: 500,
              what: 'the reload in the journal',
            },
          );
        } finally {
          booted.kill('SIGTERM');
        }
        await poweredOff;
        // The secret is the operator's file, not the package's: postrm keeps /etc/scan-gateway for it.
        rmSync(join(root, 'etc/scan-gateway/client-secret'));
      }

      // Purge: no file of the package left (the service user stays, as docs/operations.md says).
      rmSync(join(root, 'var/tmp', basename(deb)));
      const purge = inRoot(root, ['apt-get', 'purge', '-y', 'scan-gateway'], {
        env: { DEBIAN_FRONTEND: 'noninteractive' },
      });
      expect(purge.code, purge.stdout + purge.stderr).toBe(0);
      expect(pathsNamed(root, 'scan-gateway')).toEqual([]);
      for (const path of [
        'etc/scan-gateway',
        'var/lib/scan-gateway',
        'usr/lib/scan-gateway',
        'usr/bin/scan-gateway',
      ])
        expect(existsSync(join(root, path)), path).toBe(false);
      expect(readdirSync(join(root, 'var/tmp'))).not.toContain(basename(deb));
    });
  }

  it('Debian 12 (bookworm) under systemd: an upgrade whose client secret comes from upstream.clientSecretFile restarts the service on the new version; one whose check fails keeps the old version running and says so', async () => {
    const root = debianRoot('bookworm');
    roots.push(root);
    const next = repackAs(deb, `${VERSION}+upgrade1`);
    const broken = repackAs(deb, `${VERSION}+upgrade2`);
    roots.push(dirname(next), dirname(broken));
    for (const file of [deb, next, broken])
      copyFileSync(file, join(root, 'var/tmp', basename(file)));
    const update = inRoot(root, ['apt-get', 'update', '-qq'], { timeoutMs: 1_500_000 });
    expect(update.code, update.stdout + update.stderr).toBe(0);
    const install = inRoot(
      root,
      ['apt-get', 'install', '-y', '--no-install-recommends', `/var/tmp/${basename(deb)}`],
      { env: { DEBIAN_FRONTEND: 'noninteractive' }, timeoutMs: 3_000_000 },
    );
    expect(install.code, install.stdout.slice(-3000) + install.stderr).toBe(0);
    // The package made the credential file the unit loads: empty, root only.
    const credential = statSync(join(root, 'etc/scan-gateway/client-secret'));
    expect([credential.size, credential.mode & 0o777, credential.uid]).toEqual([0, 0o600, 0]);

    // The site's secret in a file of its own that the service user reads; the credential stays empty.
    const servicePort = await freePort();
    const serviceHttp = await freePort();
    writeFileSync(
      join(root, 'etc/scan-gateway/config.yaml'),
      siteConfig(
        readFileSync(join(root, 'etc/scan-gateway/config.yaml'), 'utf8'),
        servicePort,
        '/var/lib/scan-gateway',
        serviceHttp,
      ).replace(
        'clientId: demo-client',
        'clientId: demo-client\n  clientSecretFile: /etc/scan-gateway/secrets/client',
      ),
    );
    const secretDir = '/etc/scan-gateway/secrets';
    expect(
      inRoot(root, ['install', '-d', '-o', 'root', '-g', 'scan-gateway', '-m', '0750', secretDir])
        .code,
    ).toBe(0);
    writeFileSync(join(root, secretDir, 'client'), `${SECRET}\n`);
    expect(inRoot(root, ['chown', 'root:scan-gateway', `${secretDir}/client`]).code).toBe(0);
    expect(inRoot(root, ['chmod', '0640', `${secretDir}/client`]).code).toBe(0);
    expect(inRoot(root, ['systemctl', 'enable', 'scan-gateway.service']).code).toBe(0);

    const booted = spawnInRoot(root, ['--boot'], []);
    let console = '';
    booted.stdout?.on('data', (d: Buffer) => (console += d.toString()));
    booted.stderr?.on('data', (d: Buffer) => (console += d.toString()));
    const poweredOff = new Promise<number | null>((resolve) =>
      booted.once('exit', (code) => resolve(code)),
    );
    try {
      const init = await waitFor(() => containerInit(booted.pid!), {
        timeoutMs: 150_000,
        what: 'the container booted',
      });
      const journal = () =>
        inBooted(init, ['journalctl', '--no-pager', '-n', '80', '-u', 'scan-gateway.service'])
          .stdout;
      /** The main PID of the active service once it has logged its start line with `version`. */
      const runningVersion = (version: string, notPid?: string) =>
        waitFor(
          () => {
            const s = inBooted(init, [
              'systemctl',
              'show',
              '-p',
              'ActiveState,MainPID',
              'scan-gateway.service',
            ]).stdout;
            if (/ActiveState=failed/.test(s)) throw new Error(`failed: ${s}\n${journal()}`);
            const pid = /MainPID=(\d+)/.exec(s)?.[1];
            if (!/ActiveState=active/.test(s) || !pid || pid === '0' || pid === notPid)
              return undefined;
            const started = inBooted(init, [
              'journalctl',
              '--no-pager',
              '-o',
              'cat',
              `_PID=${pid}`,
            ]).stdout;
            return started.includes(`"version":"${version}"`) &&
              started.includes('"msg":"scan-gateway started"')
              ? pid
              : undefined;
          },
          { timeoutMs: 450_000, intervalMs: 1000, what: `scan-gateway ${version} running` },
        ).catch((err: unknown) => {
          throw new Error(`${(err as Error).message}\n${journal()}\n${console.slice(-2000)}`);
        });
      const before = await runningVersion(VERSION);
      const apt = (file: string) =>
        inBooted(
          init,
          [
            'env',
            'DEBIAN_FRONTEND=noninteractive',
            'apt-get',
            'install',
            '-y',
            '--no-install-recommends',
            `/var/tmp/${basename(file)}`,
          ],
          { timeoutMs: 1_500_000 },
        );

      // The upgrade: the check passes with the secret from clientSecretFile, the service restarts.
      const upgrade = apt(next);
      expect(upgrade.code, upgrade.stdout.slice(-3000) + upgrade.stderr).toBe(0);
      expect(upgrade.stdout + upgrade.stderr).not.toMatch(/not started|NOT RESTARTED/);
      const after = await runningVersion(`${VERSION}+upgrade1`, before);
      expect(after).not.toBe(before);

      // A check that fails (the service user can no longer read the secret): the upgrade finishes,
      // the running gateway stays on the version before, and apt's output says why and what to do.
      expect(inBooted(init, ['chmod', '0600', `${secretDir}/client`]).code).toBe(0);
      const refused = apt(broken);
      const said = refused.stdout + refused.stderr;
      expect(refused.code, said.slice(-3000)).toBe(0);
      expect(said).toContain('scan-gateway: NOT RESTARTED');
      expect(said).toContain('upstream.clientSecretFile');
      expect(said).toContain('systemctl restart scan-gateway');
      expect(
        inBooted(init, ['dpkg-query', '-W', '-f=${Status} ${Version}', 'scan-gateway']).stdout,
      ).toBe(`install ok installed ${VERSION}+upgrade2`);
      const still = inBooted(init, [
        'systemctl',
        'show',
        '-p',
        'ActiveState,MainPID',
        'scan-gateway.service',
      ]).stdout;
      expect(still).toContain(`MainPID=${after}\n`);
      expect(still).toContain('ActiveState=active');
    } finally {
      booted.kill('SIGTERM');
    }
    await poweredOff;
  });
});
