import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { loadConfig } from '../../src/config/load.js';
import { ConfigReloader } from '../../src/config/reload.js';
import type { InputConfig } from '../../src/config/schema.js';
import { fileSinkOf } from '../../src/inputs/files/file-sink.js';
import { FilesInput } from '../../src/inputs/files/files-input.js';
import type { FilesInputConfig } from '../../src/inputs/files/schema.js';
import { silentLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { waitFor } from '../helpers/wait.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

interface SandboxScan {
  scan: { reference: string; dcpKey: string; productModelKey: string; parents: string[] };
}

async function sandboxScans(sandbox: RunningSandbox): Promise<SandboxScan['scan'][]> {
  const res = await fetch(`${sandbox.url}/_sandbox/scans`);
  return ((await res.json()) as { scans: SandboxScan[] }).scans.map((s) => s.scan);
}

function siteConfig(
  dir: string,
  sandboxUrl: string,
  extra: { inputs?: string; rest?: string; delivery?: string } = {},
): string {
  return `site: { id: reload, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandboxUrl}, authUrl: ${sandboxUrl}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: ${extra.delivery ?? '{ mode: direct, maxBatchDelayMs: 100, statusPollMs: 100, statusPollMaxMs: 300, retryBaseMs: 100, retryMaxMs: 300 }'}
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042, duplicateWindowMs: 0 }
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A }
inputs:
  - { id: inbox-a, type: files, dir: ${join(dir, 'a')}, dcp: GI-01, stableMs: 100 }
  - { id: inbox-b, type: files, dir: ${join(dir, 'b')}, dcp: GI-01, stableMs: 100 }
${extra.inputs ?? ''}${extra.rest ?? ''}`;
}

describe('configuration reload', () => {
  let sandbox: RunningSandbox;
  let app: App | undefined;
  let gateway: GatewayProcess | undefined;

  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 50 });
  });
  afterEach(async () => {
    await app?.stop();
    app = undefined;
    await gateway?.stop();
    gateway = undefined;
    await fetch(`${sandbox.url}/_sandbox/scans`, { method: 'DELETE' });
  });
  afterAll(async () => {
    await sandbox.close();
  });

  it('lists a section that needs a restart until the file matches what runs again, across later reloads', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-reload-restart-'));
    const file = join(dir, 'config.yaml');
    const write = (delivery: string, rest = '') =>
      writeFileSync(file, siteConfig(dir, sandbox.url, { delivery, rest }));
    const load = () =>
      loadConfig(file, { baseDir: dir, env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET } });
    const d500 = '{ mode: direct, maxBatchScans: 500 }';
    write(d500);
    app = buildApp(load(), { logger: silentLogger() });
    await app.start();
    write('{ mode: direct, maxBatchScans: 400 }');
    expect((await app.reload(load())).needsRestart).toEqual(['delivery']);
    // A rule changes: delivery still runs with 500, so it still needs the restart.
    write(
      '{ mode: direct, maxBatchScans: 400 }',
      "rules:\n  - { name: any, match: { regex: '^(?<c>.+)$' }, reference: { group: c } }\n",
    );
    expect((await app.reload(load())).needsRestart).toEqual(['delivery']);
    // Back to what runs: nothing needs a restart any more.
    write(d500);
    expect((await app.reload(load())).needsRestart).toEqual([]);
  });

  it('applies a valid configuration without losing a read, restarting only the inputs that changed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-reload-'));
    for (const sub of ['a', 'b', 'c']) mkdirSync(join(dir, sub));
    const file = join(dir, 'config.yaml');
    writeFileSync(
      file,
      siteConfig(dir, sandbox.url, {
        rest: 'containers:\n  - { name: pallet, inputs: [inbox-a], open: { regex: "^PAL-" } }\n',
      }),
    );
    const load = () =>
      loadConfig(file, { baseDir: dir, env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET } });
    const created: string[] = [];
    app = buildApp(load(), {
      logger: silentLogger(),
      createInput: (config: InputConfig, sink, logger) => {
        created.push(config.id);
        if (config.type !== 'files') throw new Error('files inputs only here');
        return new FilesInput({
          config: config as FilesInputConfig,
          sink: fileSinkOf(sink, config.id),
          logger,
          folderCheckMs: 200,
        });
      },
    });
    await app.start();
    expect(created).toEqual(['inbox-a', 'inbox-b']);

    writeFileSync(join(dir, 'a', 'one.txt'), 'PAL-1\nCELL-1\n');
    await waitFor(async () => (await sandboxScans(sandbox)).length === 2, {
      timeoutMs: 30_000,
      what: 'the first two scans upstream',
    });
    expect(app.status().sessions).toEqual([
      expect.objectContaining({
        container: 'pallet',
        station: 'inbox-a',
        parent: 'PAL-1',
        reads: 1,
      }),
    ]);

    // Reads waiting in inbox-b while it restarts, and reads arriving at inbox-a while the mapping changes.
    writeFileSync(join(dir, 'b', 'waiting.txt'), 'CELL-B1\nCELL-B2\n');
    writeFileSync(
      file,
      siteConfig(dir, sandbox.url, {
        inputs: `  - { id: inbox-c, type: files, dir: ${join(dir, 'c')}, dcp: EOL-3, stableMs: 100 }\n`,
        rest: `containers:\n  - { name: pallet, inputs: [inbox-a], open: { regex: "^PAL-" } }\nrules:\n  - { name: cells, inputs: [inbox-a], match: { regex: '^CELL-(?<n>\\d+)$' }, reference: { group: n }, productModelKey: MOD-48V }\n`,
      }).replace(
        `dir: ${join(dir, 'b')}, dcp: GI-01, stableMs: 100`,
        `dir: ${join(dir, 'b')}, dcp: EOL-3, stableMs: 100`,
      ),
    );
    const report = await app.reload(load());
    expect(report).toMatchObject({
      unchanged: ['inbox-a'],
      changed: ['inbox-b'],
      added: ['inbox-c'],
      removed: [],
      needsRestart: [],
      inputErrors: [],
    });
    expect(created).toEqual(['inbox-a', 'inbox-b', 'inbox-b', 'inbox-c']);

    writeFileSync(join(dir, 'a', 'two.txt'), 'CELL-2\n');
    writeFileSync(join(dir, 'c', 'three.txt'), 'PACK-3\n');
    await waitFor(async () => (await sandboxScans(sandbox)).length === 6, {
      timeoutMs: 30_000,
      what: 'six scans upstream',
    });
    const scans = await sandboxScans(sandbox);
    const byRef = Object.fromEntries(scans.map((s) => [s.reference, s]));
    expect(Object.keys(byRef).sort()).toEqual([
      '2',
      'CELL-1',
      'CELL-B1',
      'CELL-B2',
      'PACK-3',
      'PAL-1',
    ]);
    // The new rule maps inbox-a; the open pallet survived the reload.
    expect(byRef['2']).toMatchObject({
      dcpKey: 'GI-01',
      productModelKey: 'MOD-48V',
      parents: ['PAL-1'],
    });
    // inbox-b now feeds EOL-3; inbox-c is new.
    expect(byRef['CELL-B1']).toMatchObject({ dcpKey: 'EOL-3' });
    expect(byRef['PACK-3']).toMatchObject({ dcpKey: 'EOL-3' });
    expect(app.status().config).toMatchObject({
      file,
      lastReload: { needsRestart: [], inputErrors: [] },
    });
    expect(
      app
        .status()
        .inputs.map((i) => i.id)
        .sort(),
    ).toEqual(['inbox-a', 'inbox-b', 'inbox-c']);
  });

  it('keeps the running configuration when the new one is invalid, and shows why; says what needs a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-reload-bad-'));
    for (const sub of ['a', 'b']) mkdirSync(join(dir, sub));
    const file = join(dir, 'config.yaml');
    const good = siteConfig(dir, sandbox.url, {
      rest: "rules:\n  - { name: cells, match: { regex: '^CELL-(?<n>\\d+)$' }, reference: { group: n } }\n",
    });
    writeFileSync(file, good);
    const load = () =>
      loadConfig(file, { baseDir: dir, env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET } });
    app = buildApp(load(), { logger: silentLogger() });
    await app.start();
    const running = app;
    const reloader = new ConfigReloader({
      file,
      load,
      apply: (next) => running.reload(next),
      refused: (err) => running.reloadRefused(err),
      logger: silentLogger(),
      debounceMs: 50,
    });
    reloader.start();
    try {
      writeFileSync(file, good.replace('reference: { group: n }', 'reference: { group: number }'));
      await waitFor(() => app!.status().config.lastReloadError, {
        timeoutMs: 30_000,
        what: 'the refused reload on the status',
      });
      const status = app.status();
      expect(String((status.config.lastReloadError as { message: string }).message)).toMatch(
        /rules\[cells\]\.reference\.group: the regex has no group named "number"/,
      );
      expect(status.state).toBe('degraded');
      // The problem says so in words, with its code; its detail carries the problem itself, not only the headline.
      expect(status.reasons).toContain(
        'A changed configuration was refused; the previous one still runs.',
      );
      expect(status.healthProblems?.find((p) => p.code === 'SCANGW_E_CONFIG')?.detail).toMatch(
        /reference\.group: the regex has no group named "number"/,
      );

      // The running rule still maps.
      writeFileSync(join(dir, 'a', 'one.txt'), 'CELL-7\n');
      await waitFor(async () => (await sandboxScans(sandbox)).some((s) => s.reference === '7'), {
        timeoutMs: 30_000,
        what: 'CELL-7 mapped by the running rule',
      });

      // A valid file clears the error; a changed delivery section is applied only after a restart.
      writeFileSync(file, good.replace('maxBatchDelayMs: 100', 'maxBatchDelayMs: 150'));
      await reloader.trigger('test');
      expect(app.status().config.lastReloadError).toBeUndefined();
      expect(app.status().config).toMatchObject({ lastReload: { needsRestart: ['delivery'] } });
    } finally {
      reloader.stop();
    }
  });

  it('reports product keys the upstream product list does not hold', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-products-'));
    for (const sub of ['a', 'b']) mkdirSync(join(dir, sub));
    const file = join(dir, 'config.yaml');
    writeFileSync(
      file,
      siteConfig(dir, sandbox.url, {
        rest: 'lookups: { gtin: { "09521234543213": PACK-NOPE } }\nrules:\n  - { name: x, match: { ais: ["01"] }, productModelKey: { ai: "01", lookup: gtin } }\n',
      }),
    );
    app = buildApp(
      loadConfig(file, { baseDir: dir, env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET } }),
      { logger: silentLogger() },
    );
    await app.start();
    const products = await waitFor(
      () =>
        (app!.status().products as { state: string } | undefined)?.state === 'missing' &&
        app!.status().products,
      { timeoutMs: 30_000 },
    );
    expect(products).toMatchObject({
      state: 'missing',
      products: 2,
      missing: [{ key: 'PACK-NOPE', where: ['lookups.gtin'] }],
    });
    expect(app.status().reasons).toContain(
      'Product keys not in the upstream product list: PACK-NOPE; the service will refuse their scans.',
    );
  });

  it('the daemon reloads on SIGHUP and on a change of the file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-reload-hup-'));
    for (const sub of ['a', 'b']) mkdirSync(join(dir, sub));
    const file = join(dir, 'config.yaml');
    writeFileSync(file, siteConfig(dir, sandbox.url));
    gateway = await startGateway(file, { SCAN_GATEWAY_CLIENT_SECRET: SECRET }, dir);
    const status = async () =>
      (await (await fetch(`${gateway!.httpUrl}/api/v1/status`)).json()) as {
        config: { loadedAt: string; lastReloadError?: { message: string } };
      };
    const first = (await status()).config.loadedAt;

    gateway.child.kill('SIGHUP');
    await waitFor(async () => (await status()).config.loadedAt !== first, {
      timeoutMs: 30_000,
      what: 'a reload after SIGHUP',
    });
    expect(gateway.child.exitCode).toBeNull();

    writeFileSync(
      file,
      siteConfig(dir, sandbox.url).replace('timezone: Europe/Berlin', 'timezone: Europe/Berln'),
    );
    await waitFor(async () => (await status()).config.lastReloadError, {
      timeoutMs: 30_000,
      what: 'the refused reload after the file changed',
    });
    expect((await status()).config.lastReloadError?.message).toContain(
      'site.timezone: must be an IANA time zone',
    );
    // The log line is written before the status changes, but the child's stdout may reach this
    // process after the HTTP answer (seen on a loaded machine): wait for it rather than race.
    await waitFor(() => gateway!.output().includes('configuration reload refused'), {
      timeoutMs: 30_000,
      what: 'the log line of the refused reload',
    });

    // Still running on the old configuration.
    writeFileSync(join(dir, 'a', 'one.txt'), 'CELL-9\n');
    await waitFor(async () => (await sandboxScans(sandbox)).some((s) => s.reference === 'CELL-9'), {
      timeoutMs: 30_000,
    });
  });
});
