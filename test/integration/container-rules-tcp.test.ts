import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { buildApp, type App } from '../../src/app.js';
import { loadConfig } from '../../src/config/load.js';
import { silentLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { freePort } from '../helpers/ports.js';
import { waitFor } from '../helpers/wait.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

/** The data of every `event: read` of a station's event stream so far. */
function reads(text: string): Record<string, unknown>[] {
  return text
    .split('\n\n')
    .filter((block) => block.startsWith('event: read\n'))
    .map((block) => JSON.parse(block.split('\ndata: ')[1]!) as Record<string, unknown>);
}

/**
 * Container rules at module assembly, through the real app with a real TCP input (the scanner
 * connects to the gateway): modules need an open pack (`requireContainer`), and a pack closes
 * itself after its members (`closeAfter`).
 */
describe('container rules through a real TCP input', () => {
  let sandbox: RunningSandbox;
  let app: App;
  let port: number;
  let scanner: Socket | undefined;

  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 20 });
    port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'sg-containers-tcp-'));
    const file = join(dir, 'config.yaml');
    writeFileSync(
      file,
      `site: { id: assembly, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 20, statusPollMs: 30, statusPollMaxMs: 60 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A }
inputs:
  - { id: assembly, type: tcp, mode: server, host: 127.0.0.1, port: ${port}, dcp: EOL-3 }
containers:
  - { name: pack, open: { regex: "^PK-" }, closeAfter: 2 }
rules:
  - { name: packs, match: { regex: "^PK-" } }
  - { name: modules, match: { regex: "^MOD-" }, requireContainer: pack }
`,
    );
    app = buildApp(
      loadConfig(file, { baseDir: dir, env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET } }),
      { logger: silentLogger() },
    );
    await app.start();
  });
  afterAll(async () => {
    scanner?.destroy();
    await app?.stop();
    await sandbox?.close();
  });

  it(
    'refuses a module with no pack open, with the reason on the station screen, and closes the pack after 2 modules',
    { timeout: 120_000 },
    async () => {
      let screen = '';
      const events = httpRequest(
        `${app.httpUrl}/station/EOL-3/events`,
        { headers: { accept: 'text/event-stream' } },
        (res) => {
          res.setEncoding('utf8');
          res.on('data', (c: string) => (screen += c));
        },
      );
      events.end();
      await waitFor(() => screen.includes('event: snapshot'), { what: 'the station snapshot' });

      scanner = createConnection({ host: '127.0.0.1', port });
      await new Promise((resolve) => scanner!.once('connect', resolve));
      // One read at a time, as a person scans: each is on the screen before the next.
      const scan = async (code: string, n: number) => {
        scanner!.write(`${code}\r`);
        await waitFor(() => reads(screen).length >= n, { what: `read ${code} on the screen` });
      };
      await scan('MOD-0001', 1);
      await scan('PK-000815', 2);
      await scan('MOD-0002', 3);
      await scan('MOD-0003', 4);
      await scan('MOD-0004', 5);
      events.destroy();

      const shown = reads(screen);
      expect(shown.map((r) => [r.text, r.verdict])).toEqual([
        ['MOD-0001', 'refused'],
        ['PK-000815', 'taken'],
        ['MOD-0002', 'taken'],
        ['MOD-0003', 'taken'],
        ['MOD-0004', 'refused'],
      ]);
      expect(shown[0]).toMatchObject({
        words: 'No pack open: scan the pack\u2019s label first',
        reason:
          'rule modules: needs an open container (pack) at assembly, and none is open: scan the container first, then this item again; this read is not sent',
      });
      // The pack closed itself after its second module: the fourth module finds none open.
      expect(shown[4]).toMatchObject({ words: 'No pack open: scan the pack\u2019s label first' });

      const parentsOf = async (ref: string) => {
        const trace = (await (await fetch(`${app.httpUrl}/api/v1/items/${ref}`)).json()) as {
          scans: { parents: string[] }[];
        };
        return trace.scans.map((s) => s.parents);
      };
      expect(await parentsOf('MOD-0002')).toEqual([['PK-000815']]);
      expect(await parentsOf('MOD-0003')).toEqual([['PK-000815']]);
      expect(await parentsOf('MOD-0001')).toEqual([]);
      // Closed by closeAfter, not left open until its idle timeout.
      expect(app.status().sessions).toEqual([]);
    },
  );
});
