import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { parseConfigText } from '../../src/config/load.js';
import { HealthCodes } from '../../src/error-catalogue.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { makeCa } from '../helpers/tls-ca.js';

const INGEST = 'ingest-token-0123456789abcdef';
const api = {
  uploadScans: async () => ({ requestId: 'r-1' }),
  requestPresignedUpload: async () => ({ url: 'http://127.0.0.1:9/x', requestId: 'r-2' }),
  putPresigned: async () => undefined,
  getScanStatus: async (requestId: string) => ({ state: 'Success' as const, requestId }),
};

/**
 * Tokens on a listener reachable beyond loopback: over plain HTTP a loud warning at start and an
 * info hint on the status, naming each token; over TLS, or on loopback, neither.
 */
describe('tokens in clear text on the local listener', () => {
  let app: App | undefined;
  afterEach(async () => {
    await app?.stop();
    app = undefined;
  });

  async function start(http: string) {
    const dir = mkdtempSync(join(tmpdir(), 'sg-clear-'));
    const file = join(dir, 'config.yaml');
    const yaml = `site: { id: clear, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${join(dir, 'gw.db')} }
http: ${http.replaceAll('$DIR', dir)}
dcps:
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A }
inputs:
  - { id: mes, type: http, dcp: EOL-3 }
`;
    if (http.includes('tls')) {
      const ca = makeCa(dir, 'clear');
      const leaf = ca.issue('gw', { serial: 0x42, kind: 'server', days: 30 });
      expect(leaf.certFile).toBe(join(dir, 'gw.pem'));
    }
    const log = memoryLogger('info');
    app = buildApp(
      { file, config: parseConfigText(yaml, file), clientSecret: 'x' },
      {
        logger: log.logger,
        api,
        env: { SCAN_GATEWAY_INGEST_TOKEN: INGEST },
        readToken: 'read-token-0123456789abcdef',
      },
    );
    await app.start();
    return { log, status: app.status() };
  }

  it('over plain HTTP beyond loopback: a warning at start naming the tokens, and an info hint', async () => {
    const { log, status } = await start('{ listen: "0.0.0.0:0" }');
    const warning = log
      .parsed()
      .find((l) => l.msg.startsWith('INSECURE: http.listen is not loopback'));
    expect(warning?.msg).toBe(
      'INSECURE: http.listen is not loopback and the server speaks plain HTTP, so the read token and ingest token of input mes cross the network in clear text: anyone on the path can read them and use them; set http.tls (docs/operations.md, "TLS on the local listener")',
    );
    expect(warning?.level).toBe(40);
    expect(status.listener?.tokensInClear).toEqual(['read token', 'ingest token of input mes']);
    const hint = status.healthProblems?.find((p) => p.code === HealthCodes.TOKENS_IN_CLEAR);
    expect(hint).toMatchObject({
      severity: 'info',
      sentence:
        'This page is reachable from the network over plain HTTP, so the read token and ingest token of input mes cross the network in clear text.',
    });
    expect(hint?.hint).toMatch(/serve it over TLS \(`http\.tls`\)/);
    // A hint, not a degradation: reads still flow.
    expect(status.state).toBe('ok');
  });

  it('over TLS beyond loopback, or plain on loopback: neither', async () => {
    const tls = await start(
      '{ listen: "0.0.0.0:0", tls: { certFile: $DIR/gw.pem, keyFile: $DIR/gw.key } }',
    );
    expect(tls.log.parsed().some((l) => l.msg.startsWith('INSECURE'))).toBe(false);
    expect(tls.status.listener?.tokensInClear).toEqual([]);
    expect(tls.status.listener?.tls?.certificate.serialNumber).toBe('42');
    expect(tls.status.healthProblems?.map((p) => p.code)).not.toContain(
      HealthCodes.TOKENS_IN_CLEAR,
    );
    expect(app!.httpUrl).toMatch(/^https:\/\//);
    await app!.stop();
    app = undefined;

    const loopback = await start('{ listen: "127.0.0.1:0" }');
    expect(loopback.log.parsed().some((l) => l.msg.startsWith('INSECURE'))).toBe(false);
    expect(loopback.status.listener).toEqual({ tokensInClear: [] });
  });
});
