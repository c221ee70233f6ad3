import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { ExitCodes } from '../../src/cli/exit.js';
import { MAIN_JS } from '../helpers/gateway-process.js';

/**
 * A buffer that cannot be opened ends `run` with exit code 4, which the systemd
 * unit lists in RestartPreventExitStatus=, so systemd does not restart into the same failure.
 */

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function runWithBuffer(prepare: (buffer: string) => void): {
  status: number | null;
  stderr: string;
} {
  const dir = mkdtempSync(join(tmpdir(), 'sg-unusable-'));
  dirs.push(dir);
  const buffer = join(dir, 'buffer.db');
  prepare(buffer);
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${buffer} }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }
inputs:
  - { id: inbox, type: files, dir: ${join(dir, 'inbox')}, dcp: GI-01 }
`,
  );
  const r = spawnSync(process.execPath, [MAIN_JS, 'run', '--config', config], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', SCAN_GATEWAY_CLIENT_SECRET: 'unusable-buffer-secret' },
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { status: r.status, stderr: r.stderr };
}

describe('run with a buffer that cannot be opened', () => {
  it('exits 4 when the buffer file is not an SQLite database (corrupt)', () => {
    const r = runWithBuffer((buffer) =>
      writeFileSync(
        buffer,
        'this is not an SQLite database, just text that someone wrote over it\n'.repeat(100),
      ),
    );
    expect(r.status, r.stderr).toBe(ExitCodes.BUFFER_UNUSABLE);
    expect(r.stderr).toMatch(
      /cannot open the buffer .*buffer\.db: it is damaged or not a gateway buffer: .*restore a backup .*\(SQLite: file is not a database\)/,
    );
  });

  it('exits 4 when the buffer has a schema newer than this gateway', () => {
    const r = runWithBuffer((buffer) => {
      const db = new Database(buffer);
      db.pragma('user_version = 9999');
      db.close();
    });
    expect(r.status, r.stderr).toBe(ExitCodes.BUFFER_UNUSABLE);
    expect(r.stderr).toContain('newer than this gateway knows');
  });

  it("exits 4 on another program's database and leaves every byte of it", () => {
    let before = '';
    let file = '';
    const r = runWithBuffer((buffer) => {
      const db = new Database(buffer);
      db.exec(`CREATE TABLE foo (x TEXT); INSERT INTO foo VALUES ('theirs')`);
      db.close();
      file = buffer;
      before = createHash('sha256').update(readFileSync(buffer)).digest('hex');
    });
    expect(r.status, r.stderr).toBe(ExitCodes.BUFFER_UNUSABLE);
    expect(r.stderr).toMatch(
      /is not a gateway buffer: it is an SQLite database, but not one the gateway wrote/,
    );
    expect(createHash('sha256').update(readFileSync(file)).digest('hex')).toBe(before);
    expect(existsSync(`${file}-wal`)).toBe(false);
  });
});
