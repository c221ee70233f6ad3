import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { buildApp, type AppDeps } from '../../src/app.js';
import { loadConfig } from '../../src/config/load.js';
import type { InputAdapter } from '../../src/inputs/types.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { memoryLogger } from '../helpers/log-lines.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

/**
 * The app's start and stop over the real parts (SQLite buffer in a temp dir, listening HTTP
 * server); the inputs and the upstream are the declared seams (`createInput`, `api`), so the test
 * can see the order in which they are stopped.
 */
function setup(failingStop?: string) {
  const dir = mkdtempSync(join(tmpdir(), 'sg-lifecycle-'));
  for (const d of ['a', 'b']) mkdirSync(join(dir, d));
  const file = join(dir, 'config.yaml');
  writeFileSync(
    file,
    `site: { id: lifecycle, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
http: { listen: 127.0.0.1:0 }
dcps: [{ key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }]
inputs:
  - { id: a, type: files, dir: ${join(dir, 'a')}, format: lines, dcp: GI-01 }
  - { id: b, type: files, dir: ${join(dir, 'b')}, format: lines, dcp: GI-01 }
`,
  );
  const events: string[] = [];
  const mem = memoryLogger('info');
  const logger = mem.logger;
  const refused = () => Promise.reject(new Error('not used'));
  const deps: AppDeps = {
    logger,
    api: {
      uploadScans: refused,
      requestPresignedUpload: refused,
      putPresigned: refused,
      getScanStatus: refused,
      close: async () => void events.push('upstream closed'),
    },
    createInput: (config): InputAdapter => ({
      id: config.id,
      type: 'scripted',
      start: async () => void events.push(`input ${config.id} started`),
      stop: async () => {
        events.push(`input ${config.id} stopped`);
        if (config.id === failingStop) throw new Error(`input ${config.id} cannot stop`);
      },
      status: () => ({ id: config.id, type: 'scripted', state: 'up', source: 'script' }),
    }),
  };
  const app = buildApp(
    loadConfig(file, { baseDir: dir, env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET } }),
    deps,
  );
  return { app, dir, events, logged: () => mem.lines.join('\n') };
}

/** True when the buffer file can be written by another connection, i.e. the app closed its own. */
function bufferClosed(dir: string): boolean {
  const db = new Database(join(dir, 'buffer.db'), { timeout: 0 });
  try {
    db.exec('BEGIN EXCLUSIVE; COMMIT');
    return true;
  } catch {
    return false;
  } finally {
    db.close();
  }
}

describe('app start and stop', () => {
  it('starts the parts in order, stops them in reverse, and runs the stop once however often it is asked', async () => {
    const { app, dir, events } = setup();
    await app.start();
    expect(app.status().phase).toBe('running');
    expect(events).toEqual(['input a started', 'input b started']);
    const url = app.httpUrl!;
    expect((await fetch(`${url}/healthz`)).status).toBeLessThan(500);

    const first = app.stop();
    const second = app.stop();
    expect(second).toBe(first);
    await Promise.all([first, second]);
    await app.stop();
    // Inputs before the upstream client, the last input first; each once.
    expect(events).toEqual([
      'input a started',
      'input b started',
      'input b stopped',
      'input a stopped',
      'upstream closed',
    ]);
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
    expect(bufferClosed(dir)).toBe(true);
  });

  it('stops every other part when one fails, and the stop rejects naming it', async () => {
    const { app, dir, events, logged } = setup('b');
    await app.start();
    await expect(app.stop()).rejects.toThrow('stopping failed: input b');
    // Asked again: the same failed stop, not a second run.
    await expect(app.stop()).rejects.toThrow('stopping failed: input b');
    expect(events.filter((e) => e.endsWith('stopped') || e.endsWith('closed'))).toEqual([
      'input b stopped',
      'input a stopped',
      'upstream closed',
    ]);
    expect(logged().match(/stopping a part failed/g)).toHaveLength(1);
    expect(bufferClosed(dir)).toBe(true);
  });
});
