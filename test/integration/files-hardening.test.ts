import { spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync } from 'node:fs';
import {
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Intake } from '../../src/intake/intake.js';
import { BufferStore } from '../../src/buffer/store.js';
import { parseConfigText } from '../../src/config/load.js';
import { filesInputSchema, type FilesInputConfig } from '../../src/inputs/files/schema.js';
import { FilesInput } from '../../src/inputs/files/files-input.js';
import { mappingContext } from '../../src/mapping/map-read.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { waitFor } from '../helpers/wait.js';
import { sqlOf } from '../helpers/buffer-sql.js';

/**
 * Only regular files are read, and files of any size in bounded memory, against the real parts: real files (links, a FIFO, a socket) in a real
 * inbox, the real intake and SQLite buffer, and for the crash a real gateway child process killed
 * with SIGKILL in the middle of a 1,000,000-line file.
 */

const SECRET_TEXT = 'TOP-SECRET-client-secret-4711';
const NOW = new Date(2026, 10, 18, 7, 0, 0);
const DAY = '2026-11-18';

let root: string;
let dir: string;
let store: BufferStore | undefined;
let intake: Intake | undefined;
const inputs: FilesInput[] = [];
const servers: Server[] = [];

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'sg-files-hardening-'));
  dir = join(root, 'inbox');
});

afterEach(async () => {
  for (const input of inputs.splice(0)) await input.stop();
  intake?.close();
  store?.close();
  intake = undefined;
  store = undefined;
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  await rm(root, { recursive: true, force: true });
});

/** A files input on `dir` feeding the real intake and a real SQLite buffer; its log lines kept. */
async function startReal(
  overrides: Partial<FilesInputConfig> = {},
): Promise<{ input: FilesInput; logLines: string[] }> {
  const yaml = `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps: [{ key: GI, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }]
inputs: [{ id: drop-1, type: files, dir: ${dir}, dcp: GI }]
`;
  store = BufferStore.openAt(join(root, 'buffer.db'));
  const log = memoryLogger('debug');
  intake = new Intake({
    store,
    mapping: mappingContext(parseConfigText(yaml, 'test.yaml')),
    logger: log.logger,
  });
  intake.open();
  const input = new FilesInput({
    config: filesInputSchema.parse({
      id: 'drop-1',
      dcp: 'GI',
      type: 'files',
      dir,
      stableMs: 100,
      ...overrides,
    }),
    sink: intake,
    logger: log.logger,
    now: () => NOW.getTime(),
    retryBaseMs: 100,
    folderCheckMs: 60_000,
  });
  inputs.push(input);
  await input.start();
  return { input, logLines: log.lines };
}

/** Every row of the buffer's reads table as text (raw bytes, reason, origin). */
function readsText(): string {
  const rows = sqlOf(store!).prepare(`SELECT raw, reason, origin FROM reads`).all() as {
    raw: Buffer;
    reason: string | null;
    origin: string | null;
  }[];
  return rows
    .map((r) => `${r.raw.toString('latin1')}|${r.reason ?? ''}|${r.origin ?? ''}`)
    .join('\n');
}

function rejectionsOf(file: string): { raw: Buffer; reason: string }[] {
  return (
    sqlOf(store!)
      .prepare(`SELECT raw, reason, origin FROM reads WHERE outcome = 'rejected'`)
      .all() as { raw: Buffer; reason: string; origin: string }[]
  ).filter((r) => (JSON.parse(r.origin) as { file: string }).file === file);
}

async function failedTexts(): Promise<string> {
  const failed = join(dir, 'failed');
  const names = (await readdir(failed)).filter((n) => n.endsWith('.error.txt'));
  return (await Promise.all(names.map((n) => readFile(join(failed, n), 'utf8')))).join('\n');
}

function mkfifo(path: string): void {
  const result = spawnSync('mkfifo', [path]);
  if (result.status !== 0)
    throw new Error(
      `mkfifo failed (it must be installed): ${result.stderr?.toString() ?? result.error?.message}`,
    );
}

describe('only regular files are read', () => {
  it('a link to a secret outside the inbox, present at start and made while running: to failed/ as a link, the secret nowhere', async () => {
    const outside = join(root, 'etc');
    await mkdir(outside);
    const secret = join(outside, 'client-secret');
    await writeFile(secret, `${SECRET_TEXT}\n`);
    await mkdir(dir, { recursive: true });
    await symlink(secret, join(dir, 'at-start.csv'));
    const { input, logLines } = await startReal({ format: 'csv' });
    await symlink(secret, join(dir, 'while-running.csv'));
    await writeFile(join(dir, 'good.csv'), 'barcode\nGOOD-1\n');
    await waitFor(
      () =>
        existsSync(join(dir, 'failed', 'while-running.csv.error.txt')) &&
        existsSync(join(dir, 'failed', 'at-start.csv.error.txt')),
      {
        what: 'both links moved to failed/',
      },
    );
    await waitFor(() => existsSync(join(dir, 'processed', DAY, 'good.csv')), {
      what: 'the good file behind them taken',
    });

    for (const name of ['at-start.csv', 'while-running.csv']) {
      const [rejection, ...more] = rejectionsOf(name);
      expect(more).toEqual([]);
      expect(rejection?.reason).toBe(
        `a symbolic link to ${secret}, not a regular file: only regular files dropped into the folder are read (nothing was read from it); drop the file itself`,
      );
      expect(rejection?.raw.length).toBe(0);
    }
    // The link itself was moved, its target left alone.
    expect(readFileSync(secret, 'utf8')).toBe(`${SECRET_TEXT}\n`);
    const errorTexts = await failedTexts();
    expect(errorTexts).toContain('a symbolic link to');
    const status = JSON.stringify(input.status());
    const everything = [readsText(), errorTexts, status, logLines.join('\n')].join('\n');
    expect(everything).not.toContain(SECRET_TEXT);
    expect(readsText()).toContain('GOOD-1');
    expect(intake!.countersFor('drop-1').rejections).toBe(2);
    expect(input.status().state).toBe('up');
  });

  it('a FIFO (and a socket) followed by an ordinary file: the file is committed, the FIFO and socket go to failed/ with their kind', async () => {
    await mkdir(dir, { recursive: true });
    mkfifo(join(dir, 'pipe.txt'));
    const socketServer = createServer();
    servers.push(socketServer);
    await new Promise<void>((resolve) => socketServer.listen(join(dir, 'sock.txt'), resolve));
    const { input } = await startReal();
    // One more FIFO made while running, then an ordinary file: neither FIFO may hold it up.
    mkfifo(join(dir, 'pipe-2.txt'));
    await writeFile(join(dir, 'after.txt'), 'AFTER-1\nAFTER-2\n');
    await waitFor(() => existsSync(join(dir, 'processed', DAY, 'after.txt')), {
      what: 'the ordinary file behind the FIFO taken',
      timeoutMs: 30_000,
    });
    await waitFor(() => existsSync(join(dir, 'failed', 'pipe.txt.error.txt')), {
      what: 'the FIFO moved to failed/',
    });
    await waitFor(() => existsSync(join(dir, 'failed', 'sock.txt.error.txt')), {
      what: 'the socket moved to failed/',
    });
    expect(
      sqlOf(store!)
        .prepare(`SELECT raw FROM reads WHERE outcome = 'scan' ORDER BY id`)
        .pluck()
        .all()
        .map((r) => (r as Buffer).toString()),
    ).toEqual(['AFTER-1', 'AFTER-2']);
    await waitFor(() => existsSync(join(dir, 'failed', 'pipe-2.txt.error.txt')), {
      what: 'the FIFO made while running moved to failed/',
    });
    expect(rejectionsOf('pipe.txt').map((r) => r.reason)).toEqual([
      expect.stringMatching(/^a FIFO \(named pipe\), not a regular file/),
    ]);
    expect(rejectionsOf('pipe-2.txt').map((r) => r.reason)).toEqual([
      expect.stringMatching(/^a FIFO \(named pipe\), not a regular file/),
    ]);
    expect(rejectionsOf('sock.txt').map((r) => r.reason)).toEqual([
      expect.stringMatching(/^a socket, not a regular file/),
    ]);
    expect(await readFile(join(dir, 'failed', 'pipe.txt.error.txt'), 'utf8')).toContain(
      'reason: a FIFO (named pipe), not a regular file',
    );
    expect(input.status().state).toBe('up');
  });

  it('a file over maxFileBytes goes to failed/ with the reason, unread; a smaller one is taken', async () => {
    await mkdir(dir, { recursive: true });
    const { input } = await startReal({ maxFileBytes: 1000 });
    await writeFile(join(dir, 'big.txt'), 'X'.repeat(1500) + '\n');
    await writeFile(join(dir, 'small.txt'), 'SMALL-1\n');
    await waitFor(() => existsSync(join(dir, 'failed', 'big.txt.error.txt')), {
      what: 'the big file moved to failed/',
    });
    await waitFor(() => existsSync(join(dir, 'processed', DAY, 'small.txt')), {
      what: 'the small file taken',
    });
    const [rejection] = rejectionsOf('big.txt');
    expect(rejection?.reason).toBe(
      'file of 1501 bytes is larger than maxFileBytes (1000) of input drop-1; split it, or raise maxFileBytes',
    );
    expect(await readFile(join(dir, 'failed', 'big.txt.error.txt'), 'utf8')).toContain(
      'reason: file of 1501 bytes is larger than maxFileBytes (1000)',
    );
    expect(
      sqlOf(store!).prepare(`SELECT count(*) FROM reads WHERE outcome = 'scan'`).pluck().get(),
    ).toBe(1);
    expect(input.status().state).toBe('up');
  });
});

describe('a CSV that is unreadable as a whole late in the file', () => {
  it('goes to failed/ with none of its rows stored, though its first 5,000 rows came before the fault', async () => {
    await mkdir(dir, { recursive: true });
    const { input } = await startReal({ format: 'csv' });
    const rows = ['barcode'];
    for (let i = 0; i < 5000; i++) rows.push(`ROW-${i}`);
    rows.push('"NEVER-CLOSED');
    await writeFile(join(dir, 'late.csv'), rows.join('\n') + '\n');
    await waitFor(() => existsSync(join(dir, 'failed', 'late.csv.error.txt')), {
      what: 'late.csv moved to failed/',
      timeoutMs: 30_000,
    });
    expect(
      sqlOf(store!).prepare(`SELECT count(*) FROM reads WHERE outcome <> 'rejected'`).pluck().get(),
    ).toBe(0);
    expect(rejectionsOf('late.csv').map((r) => r.reason)).toEqual([
      expect.stringMatching(/^CSV cannot be parsed: Quote Not Closed/),
    ]);
    expect(await readFile(join(dir, 'failed', 'late.csv.error.txt'), 'utf8')).toContain(
      'none of its rows were stored',
    );
    expect(sqlOf(store!).prepare(`SELECT count(*) FROM file_progress`).pluck().get()).toBe(0);
    expect(input.status().state).toBe('up');
  });
});

describe('files of any size in bounded memory, resumed after a crash', () => {
  const ROWS = 1_000_000;
  let gateway: GatewayProcess | undefined;

  afterEach(async () => {
    await gateway?.kill();
    gateway = undefined;
  });

  it('a 1,000,000-line file killed with SIGKILL in its middle: after the restart every row is in the buffer exactly once', async () => {
    const inbox = join(root, 'inbox');
    await mkdir(inbox, { recursive: true });
    const dbFile = join(root, 'buffer.db');
    const config = join(root, 'config.yaml');
    await writeFile(
      config,
      `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: demo-client }
buffer: { path: ${dbFile} }
http: { listen: 127.0.0.1:0 }
log: { level: info }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042, duplicateWindowMs: 0 }
inputs:
  - { id: inbox, type: files, dir: ${inbox}, format: lines, dcp: GI-01, stableMs: 30 }
`,
    );
    // Written under a temporary name, then renamed: taken whole.
    const tmp = join(inbox, 'big.txt.tmp');
    const out = createWriteStream(tmp);
    for (let i = 0; i < ROWS; i += 10_000) {
      let block = '';
      for (let j = i; j < i + 10_000; j++) block += `R${String(j).padStart(7, '0')}\n`;
      if (!out.write(block))
        await new Promise<void>((resolve) => out.once('drain', () => resolve()));
    }
    await new Promise<void>((resolve, reject) =>
      out.end((err?: Error | null) => (err ? reject(err) : resolve())),
    );
    await rename(tmp, join(inbox, 'big.txt'));
    const env = {
      SCAN_GATEWAY_CLIENT_SECRET: readFileSync(
        join(PACKAGE_ROOT, 'config/demo-client-secret'),
        'utf8',
      ).trim(),
    };

    gateway = await startGateway(config, env, root);
    const count = (): number => {
      const db = new Database(dbFile, { readonly: true, fileMustExist: true });
      try {
        db.pragma('busy_timeout = 1000');
        return db.prepare(`SELECT count(*) FROM reads`).pluck().get() as number;
      } finally {
        db.close();
      }
    };
    await waitFor(() => count() >= ROWS / 4, {
      what: 'a quarter of the file committed',
      timeoutMs: 120_000,
      intervalMs: 100,
    });
    // The health status shows the file in progress.
    const status = (await (await fetch(`${gateway.httpUrl}/api/v1/status`)).json()) as {
      inputs: { id: string; progress?: { file: string; rows: number } }[];
    };
    const progress = status.inputs.find((i) => i.id === 'inbox')?.progress;
    expect(progress?.file).toBe('big.txt');
    expect(progress?.rows).toBeGreaterThan(0);
    await gateway.kill();
    gateway = undefined;
    const before = count();
    expect(before).toBeGreaterThan(0);
    expect(before).toBeLessThan(ROWS);
    expect(existsSync(join(inbox, 'big.txt'))).toBe(true);

    gateway = await startGateway(config, env, root);
    await waitFor(
      () =>
        existsSync(join(inbox, 'processed')) &&
        !existsSync(join(inbox, 'big.txt')) &&
        count() >= ROWS,
      {
        what: 'the rest of the file committed and the file moved',
        // 40-60 s on a quiet machine; a loaded one (CI beside other work) may take three times as long.
        timeoutMs: 300_000,
        intervalMs: 250,
      },
    );
    const db = new Database(dbFile, { readonly: true });
    try {
      const row = db
        .prepare(
          `SELECT count(*) AS n, count(DISTINCT raw) AS distinctRaw, count(DISTINCT json_extract(origin, '$.line')) AS lines FROM reads`,
        )
        .get();
      expect(row).toEqual({ n: ROWS, distinctRaw: ROWS, lines: ROWS });
      expect(db.prepare(`SELECT count(*) FROM scans`).pluck().get()).toBe(ROWS);
      expect(db.prepare(`SELECT count(*) FROM file_progress`).pluck().get()).toBe(0);
      expect(db.prepare(`SELECT name, items FROM files`).all()).toEqual([
        { name: 'big.txt', items: ROWS },
      ]);
    } finally {
      db.close();
    }
    expect(gateway.output()).toMatch(
      /partly stored before a restart; going on after its last committed chunk/,
    );
  }, 480_000);
});
