import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { sftpCrashRun } from '../helpers/sftp-crash.js';
import { startSshd, type RunningSshd } from '../helpers/sshd.js';

/**
 * The SFTP crash test: 20,000 scans in `delivery.mode: sftp` to a real OpenSSH server, the
 * compiled gateway killed with SIGKILL 10 times during transfers and restarted. Afterwards every
 * scan is in exactly one remote file, no `.part` is left, and every file is a valid JSON array.
 */

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

describe('SFTP crash test against a real OpenSSH server', () => {
  let sshd: RunningSshd;
  let sandbox: RunningSandbox;
  beforeAll(async () => {
    sshd = await startSshd();
    // Only for upstream.baseUrl: nothing goes over HTTP in sftp mode.
    sandbox = await startSandbox({ port: 0 });
  });
  afterAll(async () => {
    await sshd?.stop();
    await sandbox?.close();
  });

  it(
    '20,000 scans, 10 SIGKILLs during transfers: every scan in exactly one file, no .part, valid JSON arrays',
    { timeout: 300_000 },
    async () => {
      const r = await sftpCrashRun(
        {
          sftpYaml: `host: 127.0.0.1, port: ${sshd.port}, username: ${sshd.username}, privateKeyFile: ${sshd.userKeyFile}, hostKey: "${sshd.hostKey}"`,
          remoteDir: sshd.remoteDir,
          localDir: sshd.remoteDir,
        },
        { total: 20_000, kills: 10, baseUrl: sandbox.url, clientSecret: SECRET },
      );
      console.log(
        `sftp crash test (sshd): ${r.kills.join('; ')}; ${r.files.length} files; restarts found ${r.recovered.found} complete files and removed ${r.recovered.partRemoved} .part files`,
      );
      expect(r.kills).toHaveLength(10);
      expect(r.parts).toEqual([]);
      expect(r.invalid).toEqual([]);
      expect(r.integrity).toBe('ok');
      expect(r.expected).toHaveLength(20_000);
      expect(r.expected.filter((ref) => !r.filesOf.has(ref))).toEqual([]);
      expect([...r.filesOf].filter(([, files]) => files.length !== 1)).toEqual([]);
      expect([...r.filesOf.keys()].filter((ref) => !r.expected.includes(ref))).toEqual([]);
      // Most kills met a transfer (a .part being written, or a file just renamed).
      expect(r.transfersKilled).toBeGreaterThanOrEqual(5);
    },
  );
});

describe("SFTP crash test against the sandbox's SFTP endpoint", () => {
  let sandbox: RunningSandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 50, sftp: {} });
  });
  afterAll(async () => {
    await sandbox?.close();
  });

  it(
    '20,000 scans, 10 SIGKILLs during transfers: every scan in exactly one file, each file processed once',
    { timeout: 300_000 },
    async () => {
      const endpoint = sandbox.sftp!;
      const r = await sftpCrashRun(
        {
          // Password login: the client secret, from the environment (never the YAML).
          sftpYaml: `host: ${endpoint.host}, port: ${endpoint.port}, hostKey: "${endpoint.hostKey}"`,
          remoteDir: '/',
          localDir: endpoint.folderOf('demo-client'),
          env: { SCAN_GATEWAY_SFTP_PASSWORD: SECRET },
        },
        { total: 20_000, kills: 10, baseUrl: sandbox.url, clientSecret: SECRET },
      );
      console.log(
        `sftp crash test (sandbox): ${r.kills.join('; ')}; ${r.files.length} files; restarts found ${r.recovered.found} complete files and removed ${r.recovered.partRemoved} .part files`,
      );
      expect(r.parts).toEqual([]);
      expect(r.invalid).toEqual([]);
      expect(r.integrity).toBe('ok');
      expect(r.expected.filter((ref) => !r.filesOf.has(ref))).toEqual([]);
      expect([...r.filesOf].filter(([, files]) => files.length !== 1)).toEqual([]);
      expect(r.transfersKilled).toBeGreaterThanOrEqual(5);
      // The service took each file once: every scan once in its log, one batch per file.
      const body = (await (await fetch(`${sandbox.url}/_sandbox/scans`)).json()) as {
        scans: { via: string; scan: { reference: string } }[];
      };
      const counts = new Map<string, number>();
      for (const s of body.scans)
        counts.set(s.scan.reference, (counts.get(s.scan.reference) ?? 0) + 1);
      expect(r.expected.filter((ref) => counts.get(ref) !== 1)).toEqual([]);
      expect(body.scans.every((s) => s.via === 'sftp')).toBe(true);
      expect(endpoint.files().length).toBe(r.files.length);
    },
  );
});
