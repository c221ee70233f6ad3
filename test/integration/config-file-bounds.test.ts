import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONFIG_MAX_BYTES, loadConfig } from '../../src/config/load.js';
import { isGatewayError, ErrorCodes } from '../../src/errors.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { MAIN_JS } from '../helpers/gateway-process.js';

// The configuration path is given by a person and may name anything: what is not a regular file,
// or is far larger than any configuration, is refused before it is read whole, so a mistake costs
// neither memory nor a hang.

const VALID = `site: { id: plant-1, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }
inputs:
  - { id: gi, type: serial, path: /dev/null, baudRate: 9600, dcp: GI-01 }
`;

const tmp = () => mkdtempSync(join(tmpdir(), 'sg-bounds-'));

/** The CONFIG error's message of loading `file`; fails when it loads or throws anything else. */
function refusal(file: string, baseDir: string): string {
  try {
    loadConfig(file, { baseDir, skipSecret: true });
  } catch (err) {
    if (isGatewayError(err, ErrorCodes.CONFIG)) return err.message;
    throw err;
  }
  throw new Error(`${file} was loaded`);
}

describe('configuration file: only a regular file, at most CONFIG_MAX_BYTES', () => {
  it('a FIFO without a writer is refused at once, naming the file and what it is', () => {
    const dir = tmp();
    const fifo = join(dir, 'config.yaml');
    // mkfifo missing is a failure of the test's machine, not a reason to skip.
    execFileSync('mkfifo', [fifo]);
    // Opening a FIFO without a writer blocks for ever: that it returns at all is the check (no
    // elapsed time asserted, which only a fast machine keeps short).
    const message = refusal(fifo, dir);
    expect(message).toContain(`${fifo}: is a FIFO (named pipe), not a regular file`);
    expect(message).toContain('name the configuration file itself');
  });

  it('/dev/zero is refused as a character device without reading it', () => {
    expect(refusal('/dev/zero', tmp())).toContain(
      '/dev/zero: is a character device, not a regular file: nothing was read',
    );
  });

  it('a folder is refused', () => {
    const dir = tmp();
    const folder = join(dir, 'config.yaml');
    mkdirSync(folder);
    expect(refusal(folder, dir)).toContain(`${folder}: is a folder, not a regular file`);
  });

  it('a file of CONFIG_MAX_BYTES + 1 bytes is refused with its size and the limit; one of CONFIG_MAX_BYTES is read', () => {
    expect(CONFIG_MAX_BYTES).toBe(1024 * 1024);
    const dir = tmp();
    const big = join(dir, 'big.yaml');
    // Valid YAML padding, so only the size can be what refuses it.
    const padded = (size: number) => VALID + '#'.repeat(size - VALID.length - 1) + '\n';
    writeFileSync(big, padded(CONFIG_MAX_BYTES + 1));
    expect(refusal(big, dir)).toContain(
      `${big}: is ${CONFIG_MAX_BYTES + 1} bytes, more than the ${CONFIG_MAX_BYTES}-byte limit for a configuration file (1 MiB)`,
    );
    const atLimit = join(dir, 'at-limit.yaml');
    writeFileSync(atLimit, padded(CONFIG_MAX_BYTES));
    expect(loadConfig(atLimit, { baseDir: dir, skipSecret: true }).config.site.id).toBe('plant-1');
  });

  it('a symbolic link to a valid configuration loads (as systemd set-ups link /etc/scan-gateway/config.yaml)', () => {
    const dir = tmp();
    const real = join(dir, 'site.yaml');
    writeFileSync(real, VALID);
    const link = join(dir, 'config.yaml');
    symlinkSync(real, link);
    const loaded = loadConfig(link, { baseDir: dir, skipSecret: true });
    expect(loaded.config.dcps.map((d) => d.key)).toEqual(['GI-01']);
  });

  it('a missing file is still reported as unreadable', () => {
    const dir = tmp();
    expect(refusal(join(dir, 'none.yaml'), dir)).toContain('cannot read the file: ENOENT');
  });

  it(
    'compiled CLI: config check and run --config /dev/zero exit 2 with the message, without growing',
    { timeout: 150_000 },
    () => {
      // The CLI's own peak resident memory, reported by the process itself as it exits (kB).
      const report = `data:text/javascript,process.on('exit',()=>process.stderr.write('maxRSS='+process.resourceUsage().maxRSS+'\\n'))`;
      for (const command of [['config', 'check'], ['run']]) {
        // The kill after 60 s only catches a hang: reading /dev/zero whole never ends by itself.
        const r = spawnSync(
          process.execPath,
          ['--import', report, MAIN_JS, ...command, '--config', '/dev/zero'],
          {
            cwd: PACKAGE_ROOT,
            encoding: 'utf8',
            env: { PATH: process.env.PATH ?? '' },
            timeout: 60_000,
          },
        );
        const output = r.stdout + r.stderr;
        expect(r.status, output).toBe(2);
        expect(output).toContain('/dev/zero: is a character device, not a regular file');
        const maxRssKb = Number(/maxRSS=(\d+)/.exec(r.stderr)?.[1]);
        // The CLI alone takes well under 200 MB; reading /dev/zero whole took gigabytes.
        expect(maxRssKb, output).toBeGreaterThan(0);
        expect(maxRssKb, output).toBeLessThan(200 * 1024);
      }
    },
  );
});
