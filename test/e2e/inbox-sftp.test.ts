import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { MAIN_JS } from '../helpers/gateway-process.js';
import { waitFor } from '../helpers/wait.js';
import { freePort } from '../helpers/ports.js';

// The SFTP recipe of docs/operations.md ("1c. The inbox"), followed with a real
// sshd: a chrooted sftp-only uploader, the inbox bind-mounted into the chroot, a group shared with
// the service user, the umask of internal-sftp. The uploaded file must be readable and movable by
// the service user with the groups systemd gives it (its /etc/group entries, as setpriv
// --init-groups), and `config check --as` must agree. Needs root (users, a bind mount, a chroot)
// like the tmpfs test, and sshd, sftp and setpriv (openssh-server, openssh-client, util-linux).

function run(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

describe('the inbox recipe: SFTP to the gateway', () => {
  it('a chrooted uploader drops a file the service user reads and moves, as the recipe sets it up', async () => {
    expect(process.getuid?.(), 'run as root (users, a bind mount and a chroot)').toBe(0);
    const tag = Math.random().toString(36).slice(2, 8);
    const group = `sgin${tag}`;
    const uploader = `sgup${tag}`;
    const service = `sgsv${tag}`;
    // ChrootDirectory wants every folder of its path owned by root and writable by nobody else,
    // which rules out /tmp (1777).
    const base = mkdtempSync('/srv/sg-inbox-');
    chmodSync(base, 0o755);
    const state = join(base, 'state');
    const inbox = join(state, 'inbox');
    const chroot = join(base, 'chroot');
    let sshd: ReturnType<typeof spawn> | undefined;
    let mounted = false;
    try {
      // Users and group, as the recipe (the service user stands for scan-gateway).
      run('useradd', [
        '--system',
        '--no-create-home',
        '--shell',
        '/usr/sbin/nologin',
        '--user-group',
        service,
      ]);
      run('groupadd', ['--system', group]);
      run('useradd', [
        '--system',
        '--no-create-home',
        '--shell',
        '/usr/sbin/nologin',
        '--gid',
        group,
        uploader,
      ]);
      // Key login only; "*" is no password but not a locked account (sshd refuses "!" without PAM).
      run('usermod', ['-p', '*', uploader]);
      run('usermod', ['-aG', group, service]);
      // The state folder as StateDirectory= leaves it; the inbox as the tmpfiles.d override makes it.
      run('install', ['-d', '-o', service, '-g', service, '-m', '0750', state]);
      run('install', ['-d', '-o', service, '-g', group, '-m', '2770', inbox]);
      run('install', [
        '-d',
        '-o',
        'root',
        '-g',
        'root',
        '-m',
        '0755',
        chroot,
        join(chroot, 'inbox'),
      ]);
      run('mount', ['--bind', inbox, join(chroot, 'inbox')]);
      mounted = true;

      // sshd with the recipe's Match block, on a loopback port.
      run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(base, 'host-key')]);
      run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(base, 'pc-key')]);
      run('install', ['-m', '0644', join(base, 'pc-key.pub'), join(base, 'authorized-keys')]);
      const port = await freePort();
      const config = join(base, 'sshd_config');
      writeFileSync(
        config,
        `Port ${port}
ListenAddress 127.0.0.1
HostKey ${join(base, 'host-key')}
PidFile none
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile none
Subsystem sftp internal-sftp
Match User ${uploader}
    AuthorizedKeysFile ${join(base, 'authorized-keys')}
    ChrootDirectory ${chroot}
    ForceCommand internal-sftp -u 0007 -d /inbox
    AllowTcpForwarding no
    X11Forwarding no
    PermitTTY no
`,
      );
      mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
      run('/usr/sbin/sshd', ['-t', '-f', config]);
      sshd = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', config], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let sshdLog = '';
      sshd.stderr?.on('data', (d: Buffer) => (sshdLog += d.toString()));
      await waitFor(() => sshdLog.includes('Server listening'), {
        timeoutMs: 30_000,
        what: 'sshd listening',
      });

      // The PC uploads under a temporary name and renames, as the recipe says.
      const batch = join(base, 'batch');
      writeFileSync(
        batch,
        `put ${join(PACKAGE_ROOT, 'samples/goods-in-export.csv')} goods-in-export.csv.part\nrename goods-in-export.csv.part goods-in-export.csv\nls\n`,
      );
      const sftp = spawnSync(
        'sftp',
        [
          '-b',
          batch,
          '-i',
          join(base, 'pc-key'),
          '-P',
          String(port),
          '-o',
          'StrictHostKeyChecking=no',
          '-o',
          'UserKnownHostsFile=/dev/null',
          '-o',
          'BatchMode=yes',
          `${uploader}@127.0.0.1`,
        ],
        { encoding: 'utf8', timeout: 30_000 },
      );
      if (sftp.error) throw sftp.error;
      expect(sftp.status, `${sftp.stdout}${sftp.stderr}\n${sshdLog}`).toBe(0);
      // The chroot shows only the inbox: the working folder is /inbox.
      expect(sftp.stdout).toContain('goods-in-export.csv');
      const file = join(inbox, 'goods-in-export.csv');
      const st = statSync(file);
      // The uploader's file, in the shared group (setgid folder), readable by the group and by no
      // one else: internal-sftp -u 0007 keeps the group bits the client sends (0640 from a 0644 file).
      expect({
        groupRead: (st.mode & 0o040) !== 0,
        other: st.mode & 0o007,
        uid: st.uid,
        gid: st.gid,
      }).toEqual({
        groupRead: true,
        other: 0,
        uid: Number(run('id', ['-u', uploader]).trim()),
        gid: Number(run('getent', ['group', group]).split(':')[2]),
      });

      // config check as the service user: the inbox is readable and writable for it (by the group).
      const site = join(base, 'config.yaml');
      writeFileSync(
        site,
        `site: { id: sftp-test, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${state}/buffer.db }
http: { listen: '127.0.0.1:0' }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
inputs:
  - { id: inbox, type: files, dir: ${inbox}, format: csv, barcodeColumn: barcode, dcp: GI-01 }
`,
      );
      const check = spawnSync(
        process.execPath,
        [MAIN_JS, 'config', 'check', '--config', site, '--as', service],
        { encoding: 'utf8' },
      );
      expect(check.status, check.stdout).toBe(0);

      // What the gateway does with the file, as the service user with its groups and UMask=0077:
      // read it, create processed/ and move it there.
      const asService = spawnSync(
        'setpriv',
        [
          `--reuid=${service}`,
          `--regid=${service}`,
          '--init-groups',
          process.execPath,
          '-e',
          `process.umask(0o077); const fs = require('node:fs'); const text = fs.readFileSync(${JSON.stringify(file)}, 'utf8');
           fs.mkdirSync(${JSON.stringify(join(inbox, 'processed'))}); fs.renameSync(${JSON.stringify(file)}, ${JSON.stringify(join(inbox, 'processed', 'goods-in-export.csv'))});
           process.stdout.write(String(text.split('\\n').length));`,
        ],
        { encoding: 'utf8', cwd: '/' },
      );
      expect(asService.status, asService.stderr).toBe(0);
      expect(Number(asService.stdout)).toBeGreaterThan(3);
      expect(readdirSync(join(inbox, 'processed'))).toEqual(['goods-in-export.csv']);
      // processed/ is the service's alone; the uploader's listing of the chroot cannot enter it.
      expect((statSync(join(inbox, 'processed')).mode & 0o777).toString(8)).toBe('700');
    } finally {
      sshd?.kill('SIGTERM');
      if (mounted) spawnSync('umount', [join(chroot, 'inbox')]);
      for (const user of [uploader, service]) spawnSync('userdel', [user]);
      spawnSync('groupdel', [group]);
      if (!mounted || spawnSync('mountpoint', ['-q', join(chroot, 'inbox')]).status !== 0)
        rmSync(base, { recursive: true, force: true });
    }
  }, 60_000);
});
