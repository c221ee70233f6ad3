import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { BUFFER_APPLICATION_ID } from '../../src/buffer/identity.js';
import { BufferStore } from '../../src/buffer/store.js';
import { ExitCodes } from '../../src/cli/exit.js';
import { MAIN_JS } from '../helpers/gateway-process.js';
import { scanRecord } from '../helpers/records.js';

/**
 * The compiled CLI touches only gateway buffers: `adopt` and the buffer commands refuse an empty
 * file, another program's database and a newer schema with exit 4, and leave every byte of it as
 * it was (sha256 before and after, the -wal and -shm not created); a buffer written before the
 * gateway set its `application_id` is still read and adopted, and marked by the adoption.
 * `buffer backup` onto a directory is refused before anything is written.
 */

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function workdir(): { dir: string; config: string } {
  const dir = mkdtempSync(join(tmpdir(), 'sg-identity-cli-'));
  dirs.push(dir);
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c, requestTimeoutMs: 1000 }
buffer: { path: ${join(dir, 'own.db')} }
delivery: { maxBatchDelayMs: 0, retryBaseMs: 100, retryMaxMs: 200 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }
inputs:
  - { id: inbox, type: files, dir: ${join(dir, 'inbox')}, dcp: GI-01 }
`,
  );
  return { dir, config };
}

function cli(args: string[], cwd: string): Promise<Run> {
  const child = spawn(process.execPath, [MAIN_JS, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', SCAN_GATEWAY_CLIENT_SECRET: 'identity-cli-secret' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}

const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

/** The files of `dir` whose names start with `name`: the database and any -wal, -shm, .partial. */
const companions = (dir: string, name: string) =>
  readdirSync(dir)
    .filter((f) => f.startsWith(name))
    .sort();

/** Files that are no gateway buffer, each made the way the report made it. */
const NOT_BUFFERS: { name: string; make: (file: string) => void; says: RegExp }[] = [
  {
    name: 'a 0-byte file',
    make: (f) => writeFileSync(f, ''),
    says: /is not a gateway buffer: it is empty/,
  },
  {
    name: "another program's database",
    make: (f) => {
      const db = new Database(f);
      db.exec(`CREATE TABLE foo (x TEXT); INSERT INTO foo VALUES ('mine')`);
      db.close();
    },
    says: /is not a gateway buffer: it is an SQLite database, but not one the gateway wrote/,
  },
  {
    name: 'a database marked by another application',
    make: (f) => {
      const db = new Database(f);
      db.pragma('application_id = 1234');
      db.exec(`CREATE TABLE reads (x); CREATE TABLE batches (y)`);
      db.pragma('user_version = 3');
      db.close();
    },
    says: /is not a gateway buffer: it is another program's SQLite database \(application_id 0x000004d2/,
  },
  {
    name: 'a schema newer than this gateway',
    make: (f) => {
      const db = new Database(f);
      db.pragma('user_version = 9999');
      db.close();
    },
    says: /has schema version 9999, newer than this gateway knows/,
  },
];

describe('adopt and the buffer commands touch only gateway buffers', () => {
  for (const kind of NOT_BUFFERS) {
    it(`adopt refuses ${kind.name} with exit 4 and leaves its bytes as they were`, async () => {
      const { dir, config } = workdir();
      const file = join(dir, 'other.db');
      kind.make(file);
      const before = sha256(file);
      const run = await cli(['adopt', file, '--config', config, '--timeout', '5'], dir);
      expect(run.code, run.stderr).toBe(ExitCodes.BUFFER_UNUSABLE);
      expect(run.stderr).toMatch(kind.says);
      expect(run.stdout).not.toContain('delivered');
      expect(sha256(file)).toBe(before);
      expect(companions(dir, 'other.db')).toEqual(['other.db']);
    });
  }

  it('queue, failures, trace and buffer stats refuse them with exit 4 and change nothing', async () => {
    const { dir } = workdir();
    for (const [i, kind] of NOT_BUFFERS.entries()) {
      const file = join(dir, `other-${i}.db`);
      kind.make(file);
      const before = sha256(file);
      for (const args of [['queue'], ['failures'], ['trace', 'PK-1'], ['buffer', 'stats']]) {
        const run = await cli([...args, '--buffer', file], dir);
        expect(run.code, `${args.join(' ')} on ${kind.name}: ${run.stderr}`).toBe(
          ExitCodes.BUFFER_UNUSABLE,
        );
        expect(run.stderr).toMatch(kind.says);
        expect(run.stderr).not.toMatch(/no such table/);
      }
      expect(sha256(file)).toBe(before);
      expect(companions(dir, `other-${i}.db`)).toEqual([`other-${i}.db`]);
    }
  });

  it('reads and adopts a buffer written before the application id, and marks it', async () => {
    const { dir, config } = workdir();
    const file = join(dir, 'old.db');
    const store = BufferStore.openAt(file);
    store.intake.commitIntake([scanRecord('PK-OLD', 60)], 0);
    store.close();
    // What an older gateway left: the schema, no application id.
    const db = new Database(file);
    db.pragma('application_id = 0');
    db.pragma('journal_mode = DELETE');
    db.close();

    const stats = await cli(['buffer', 'stats', '--buffer', file, '--json'], dir);
    expect(stats.code, stats.stderr).toBe(ExitCodes.OK);
    expect(JSON.parse(stats.stdout)).toMatchObject({ scans: { pending: 1 } });

    const run = await cli(['adopt', file, '--config', config, '--timeout', '1', '--json'], dir);
    expect(run.code, run.stderr).toBe(ExitCodes.FAILED); // the service cannot be reached
    const after = new Database(file, { readonly: true });
    try {
      expect(after.pragma('application_id', { simple: true })).toBe(BUFFER_APPLICATION_ID);
    } finally {
      after.close();
    }
  });

  it('tells a damaged buffer in words with what to do, not as SQLite\'s "no such table"', async () => {
    const { dir } = workdir();
    const file = join(dir, 'damaged.db');
    // The tables that say "buffer", the one that holds the scans gone.
    const db = new Database(file);
    db.exec(
      'CREATE TABLE reads (id INTEGER PRIMARY KEY); CREATE TABLE batches (id INTEGER PRIMARY KEY)',
    );
    db.pragma('user_version = 3');
    db.close();
    const run = await cli(['queue', '--buffer', file], dir);
    expect(run.code, run.stderr).toBe(ExitCodes.BUFFER_UNUSABLE);
    expect(run.stderr).toMatch(
      /^scan-gateway: cannot read the buffer .*damaged\.db: it is damaged or not a gateway buffer: check the path .*restore a backup/,
    );
    expect(run.stderr).not.toMatch(/^scan-gateway: no such table/);
  });

  it('buffer backup onto a directory is refused before anything is written, --force or not', async () => {
    const { dir } = workdir();
    const file = join(dir, 'buffer.db');
    const store = BufferStore.openAt(file);
    store.intake.commitIntake([scanRecord('PK-1', 60)], 0);
    store.close();
    mkdirSync(join(dir, 'dir.db'));
    for (const force of [[], ['--force']]) {
      const run = await cli(
        ['buffer', 'backup', join(dir, 'dir.db'), '--buffer', file, ...force],
        dir,
      );
      expect(run.code, run.stderr).toBe(ExitCodes.USAGE);
      expect(run.stderr).toContain(`${join(dir, 'dir.db')} is a directory`);
      expect(existsSync(join(dir, 'dir.db.partial'))).toBe(false);
      expect(readdirSync(join(dir, 'dir.db'))).toEqual([]);
    }
  });
});
