import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.js';

describe('the start-up line', () => {
  let gateway: GatewayProcess | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    await gateway?.stop();
    gateway = undefined;
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("says where the start's time went: loading, configuration, building, each part", async () => {
    dir = mkdtempSync(join(tmpdir(), 'sg-startup-profile-'));
    const config = join(dir, 'config.yaml');
    const tokenFile = join(dir, 'ingest-token');
    writeFileSync(tokenFile, 'startup-profile-ingest-token-0123456789\n');
    writeFileSync(
      config,
      `site: { id: startup, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: demo-client, clientSecretFile: ${join(PACKAGE_ROOT, 'config/demo-client-secret')} }
buffer: { path: ${join(dir, 'buffer.db')} }
http: { listen: 127.0.0.1:0 }
log: { level: info }
dcps:
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A }
inputs:
  - { id: line, type: http, dcp: EOL-3, tokenFile: ${tokenFile} }
`,
    );
    gateway = await startGateway(config, { CACHE_DIRECTORY: join(dir, 'cache') }, dir);
    const line = gateway
      .output()
      .split('\n')
      .find((l) => l.includes('"msg":"scan-gateway started"'));
    const { startup } = JSON.parse(line!) as {
      startup: Record<string, number> & { parts: Record<string, number> };
    };
    for (const key of ['processMs', 'loadMs', 'configMs', 'buildMs', 'readyMs'])
      expect(startup[key], key).toBeGreaterThanOrEqual(0);
    // The parts in their start order, the buffer first and the HTTP server last, each with its time.
    const names = Object.keys(startup.parts);
    expect(names[0]).toBe('buffer');
    expect(names.at(-1)).toBe('http');
    expect(names).toEqual(expect.arrayContaining(['intake', 'delivery']));
    for (const name of names) expect(startup.parts[name], name).toBeGreaterThanOrEqual(0);
    // Since the process started: the whole is not less than its parts.
    const sum = startup.loadMs! + startup.configMs! + startup.buildMs!;
    expect(startup.readyMs).toBeGreaterThanOrEqual(sum);
  });
});
