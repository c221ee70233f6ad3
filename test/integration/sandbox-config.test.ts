import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ErrorCodes } from '../../src/errors.js';
import { CONFIG_MAX_BYTES } from '@scan-gateway/service-kit/read-file';
import { PACKAGE_ROOT } from '../../src/paths.js';
import {
  loadSandboxConfig,
  demoClient,
  startSandbox,
  SandboxState,
  DEMO_DCPS,
} from '@scan-gateway/sandbox';
import { UpstreamClient } from '../../src/upstream/client.js';
import { waitFor } from '../helpers/wait.js';

// The sandbox's clients: the default demo client matches the shipped configurations, and a
// configuration file sets clients, timings and faults.

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'sandbox-config-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('default client', () => {
  it('knows every DCP of config/demo.yaml and config/example.yaml', () => {
    for (const file of ['config/demo.yaml', 'config/example.yaml']) {
      const cfg = parse(readFileSync(join(PACKAGE_ROOT, file), 'utf8')) as {
        dcps: { key: string }[];
      };
      expect(cfg.dcps.length, file).toBeGreaterThan(0);
      for (const dcp of cfg.dcps)
        expect(DEMO_DCPS as readonly string[], `${file}: ${dcp.key}`).toContain(dcp.key);
    }
  });

  it('takes its secret from config/demo-client-secret, trimmed', () => {
    const client = demoClient();
    expect(client.clientId).toBe('demo-client');
    expect(client.clientSecret).toBe(
      readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim(),
    );
    expect(client.dcps).toEqual(['GI-01', 'SOP-3', 'EOL-3', 'GO-01']);
  });
});

describe('sandbox configuration file', () => {
  it('loads clients (secret file relative to baseDir, or literal), timings and faults', () => {
    writeFileSync(join(dir, 'a.secret'), '  secret-a\n');
    const file = join(dir, 'sandbox.yaml');
    writeFileSync(
      file,
      [
        'clients:',
        '  - { clientId: plant-a, clientSecretFile: a.secret, dcps: [A-1], products: [{ key: P-A, name: Pack A }] }',
        '  - { clientId: plant-b, clientSecret: secret-b, dcps: [B-1] }',
        'processingDelayMs: 20',
        'presignedTtlMs: 60000',
        'tokenTtlSec: 120',
        'faults: { latencyMs: 5, retryAfterSec: 4 }',
      ].join('\n'),
    );
    expect(loadSandboxConfig(file, { baseDir: dir })).toEqual({
      clients: [
        {
          clientId: 'plant-a',
          clientSecret: 'secret-a',
          dcps: ['A-1'],
          products: [{ key: 'P-A', name: 'Pack A' }],
        },
        { clientId: 'plant-b', clientSecret: 'secret-b', dcps: ['B-1'] },
      ],
      processingDelayMs: 20,
      presignedTtlMs: 60000,
      tokenTtlSec: 120,
      faults: { latencyMs: 5, retryAfterSec: 4 },
    });
  });

  it('keeps the newest maxLoggedScans accepted scans for inspection, set in the file too', () => {
    const file = join(dir, 'logged.yaml');
    writeFileSync(file, 'maxLoggedScans: 10\n');
    const options = loadSandboxConfig(file, { baseDir: dir });
    expect(options.maxLoggedScans).toBe(10);
    const state = new SandboxState([demoClient()], { maxLoggedScans: options.maxLoggedScans! });
    for (let n = 0; n < 25; n++)
      state.logScan({
        requestId: String(n),
        via: 'direct',
        receivedAt: '',
        scan: { reference: `R-${n}` },
      });
    const log = state.scanLog();
    expect(log).toMatchObject({ count: 25, dropped: 15 });
    expect(log.scans.map((s) => (s.scan as { reference: string }).reference)).toEqual(
      Array.from({ length: 10 }, (_, i) => `R-${15 + i}`),
    );
  });

  it('names the offending key of an invalid file (CONFIG) and an unreadable secret (SECRET)', () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(
      bad,
      'clients:\n  - { clientId: x, clientSecret: s, dcps: [] }\nfaults: { errorRate: 3 }\n',
    );
    expect(() => loadSandboxConfig(bad, { baseDir: dir })).toThrow(
      expect.objectContaining({
        code: ErrorCodes.CONFIG,
        message: expect.stringMatching(/clients\[0\]\.dcps.*faults\.errorRate/s),
      }),
    );
    const both = join(dir, 'both.yaml');
    writeFileSync(both, 'clients:\n  - { clientId: x, dcps: [D] }\n');
    expect(() => loadSandboxConfig(both, { baseDir: dir })).toThrow(
      expect.objectContaining({ message: expect.stringContaining('exactly one') }),
    );
    const noSecret = join(dir, 'nosecret.yaml');
    writeFileSync(
      noSecret,
      'clients:\n  - { clientId: x, clientSecretFile: missing.secret, dcps: [D] }\n',
    );
    expect(() => loadSandboxConfig(noSecret, { baseDir: dir })).toThrow(
      expect.objectContaining({ code: ErrorCodes.SECRET }),
    );
    expect(() => loadSandboxConfig(join(dir, 'none.yaml'), { baseDir: dir })).toThrow(
      expect.objectContaining({ code: ErrorCodes.CONFIG }),
    );
  });

  it('reads its file as a regular file up to the bound: a device, a FIFO and an oversized file are refused with what they are', () => {
    const fifo = join(dir, 'config.fifo');
    execFileSync('mkfifo', [fifo]);
    const big = join(dir, 'big.yaml');
    writeFileSync(big, `# ${'x'.repeat(CONFIG_MAX_BYTES)}\n`);
    for (const [file, why] of [
      ['/dev/zero', /a character device, not a regular file/],
      [fifo, /a FIFO \(named pipe\), not a regular file/],
      [big, /more than the 1048576-byte limit/],
    ] as const) {
      expect(() => loadSandboxConfig(file, { baseDir: dir })).toThrow(
        expect.objectContaining({ code: ErrorCodes.CONFIG, message: expect.stringMatching(why) }),
      );
    }
  });

  it('starts with the given faults and keeps clients apart: own products, own batches, own DCPs', async () => {
    const sandbox = await startSandbox({
      port: 0,
      processingDelayMs: 0,
      faults: { retryAfterSec: 9, latencyMs: 1 },
      clients: [
        {
          clientId: 'plant-a',
          clientSecret: 'secret-a',
          dcps: ['A-1'],
          products: [{ key: 'P-A', name: 'Pack A' }],
        },
        { clientId: 'plant-b', clientSecret: 'secret-b', dcps: ['B-1'] },
      ],
    });
    const a = new UpstreamClient({
      baseUrl: sandbox.url,
      authUrl: sandbox.url,
      clientId: 'plant-a',
      clientSecret: 'secret-a',
    });
    const b = new UpstreamClient({
      baseUrl: sandbox.url,
      authUrl: sandbox.url,
      clientId: 'plant-b',
      clientSecret: 'secret-b',
    });
    try {
      expect(await (await fetch(`${sandbox.url}/_sandbox/faults`)).json()).toEqual({
        errorRate: 0,
        rateLimitRate: 0,
        retryAfterSec: 9,
        latencyMs: 1,
        resetRate: 0,
      });
      expect(await a.listProducts()).toEqual([{ key: 'P-A', name: 'Pack A' }]);
      expect(await b.listProducts()).toEqual([]);
      const scan = {
        reference: 'R',
        timeStamp: '2025-01-01T00:00:00',
        dcpKey: 'A-1',
        productModelKey: 'P-A',
        parents: [],
        attributes: [],
      };
      const { requestId } = await b.uploadScans(JSON.stringify([scan]));
      expect((await a.getScanStatus(requestId)).state).toBe('NotFound');
      const status = await waitFor(async () => {
        const s = await b.getScanStatus(requestId);
        return s.state === 'Failed' ? s : undefined;
      });
      expect(status.failures).toEqual([{ reference: 'R', reason: 'Invalid DCP' }]);
    } finally {
      await a.close();
      await b.close();
      await sandbox.close();
    }
  });
});
