import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAIN_JS } from '../helpers/gateway-process.js';
import { startSshd, type RunningSshd } from '../helpers/sshd.js';

/** `scan-gateway upload FILE --route sftp`: the compiled CLI against a real sshd. */

const SCANS = [
  {
    reference: 'CLI-1',
    timeStamp: '2025-01-02T03:04:05',
    dcpKey: 'GI-01',
    productModelKey: 'PACK-A',
    parents: [],
    attributes: [],
  },
  {
    reference: 'CLI-2',
    timeStamp: '2025-01-02T03:04:06',
    dcpKey: 'GI-01',
    productModelKey: 'PACK-A',
    parents: [],
    attributes: [],
  },
];

function cli(cwd: string, ...args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [MAIN_JS, ...args],
      { cwd, env: { PATH: process.env.PATH ?? '' } },
      (error, out, err) => {
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, out, err });
      },
    );
  });
}

describe('scan-gateway upload --route sftp', () => {
  let sshd: RunningSshd;
  let dir: string;
  const config = (hostKey: string, withSftp = true) => {
    const file = join(dir, `config-${Math.random().toString(36).slice(2)}.yaml`);
    writeFileSync(
      file,
      `site: { id: plant-7, timezone: Europe/Berlin }
upstream:
  baseUrl: http://127.0.0.1:9
  authUrl: http://127.0.0.1:9
  clientId: demo-client
${withSftp ? `  sftp: { host: 127.0.0.1, port: ${sshd.port}, username: ${sshd.username}, privateKeyFile: ${sshd.userKeyFile}, hostKey: "${hostKey}", remoteDir: ${sshd.remoteDir} }\n` : ''}dcps: [{ key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }]
inputs: []
`,
    );
    return file;
  };

  beforeAll(async () => {
    sshd = await startSshd();
    dir = mkdtempSync(join(tmpdir(), 'sg-sftp-cli-'));
    writeFileSync(join(dir, 'scans.json'), JSON.stringify(SCANS, null, 2));
  });
  afterAll(async () => {
    await sshd?.stop();
  });

  it('writes the file (.part, size checked, renamed), and finds it there the second time', async () => {
    const cfg = config(sshd.hostKey);
    const first = await cli(
      dir,
      'upload',
      'scans.json',
      '--route',
      'sftp',
      '--json',
      '--config',
      cfg,
    );
    expect(first.err).toBe('');
    expect(first.code).toBe(0);
    const result = JSON.parse(first.out) as {
      remotePath: string;
      sha256: string;
      scans: number;
      outcome: string;
      state: string;
    };
    expect(result).toMatchObject({ scans: 2, outcome: 'sent', state: 'transferred' });
    expect(result.remotePath).toBe(
      join(sshd.remoteDir, `plant-7-cli-${result.sha256.slice(0, 12)}.json`),
    );
    expect(JSON.parse(readFileSync(result.remotePath, 'utf8'))).toEqual(SCANS);
    expect(readdirSync(sshd.remoteDir).filter((f) => f.endsWith('.part'))).toEqual([]);

    const again = await cli(dir, 'upload', 'scans.json', '--route', 'sftp', '--config', cfg);
    expect(again.code).toBe(0);
    expect(again.out).toContain('Already on the server');
  });

  it('refuses a wrong host key with exit 3 and both fingerprints', async () => {
    const wrong = 'SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8';
    const r = await cli(dir, 'upload', 'scans.json', '--route', 'sftp', '--config', config(wrong));
    expect(r.code).toBe(3);
    expect(r.err).toContain(wrong);
    expect(r.err).toContain(sshd.hostKey);
  });

  it('says that upstream.sftp is missing (exit 2)', async () => {
    const r = await cli(
      dir,
      'upload',
      'scans.json',
      '--route',
      'sftp',
      '--config',
      config(sshd.hostKey, false),
    );
    expect(r.code).toBe(2);
    expect(r.err).toContain('upstream.sftp is not configured');
  });
});
