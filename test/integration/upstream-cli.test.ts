import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommandExit } from '../../src/cli/exit.js';
import { registerUpstreamCommands } from '../../src/cli/upstream-commands.js';
import { ErrorCodes, GatewayError } from '../../src/errors.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { UpstreamClient } from '../../src/upstream/client.js';
import { MAX_DIRECT_BODY_BYTES } from '@scan-gateway/contract';

// `products`, `status` and `upload` against the sandbox over real HTTP: output and exit codes.

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const SCAN = {
  reference: 'CLI-1',
  timeStamp: '2025-01-02T03:04:05',
  dcpKey: 'GI-01',
  productModelKey: 'PACK-A',
  parents: [],
  attributes: [],
};

let sandbox: RunningSandbox;
let dir: string;
let offlineUrl: string;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0, processingDelayMs: 100 });
  const offline = await startSandbox({ port: 0 });
  offlineUrl = offline.url;
  await offline.close();
  dir = mkdtempSync(join(tmpdir(), 'upstream-cli-'));
});
afterAll(async () => {
  await sandbox.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs one command line; `--config` picks the client: ok, wrong-secret, offline, broken. */
async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (c: Buffer) => (out += c.toString()));
  stderr.on('data', (c: Buffer) => (err += c.toString()));
  const program = new Command('scan-gateway')
    .exitOverride()
    .configureOutput({ writeOut: (s) => (out += s), writeErr: (s) => (err += s) });
  registerUpstreamCommands(program, {
    stdout,
    stderr,
    cwd: dir,
    pollIntervalMs: 20,
    resolveClient: async (config) => {
      if (config === 'broken')
        throw new GatewayError(ErrorCodes.CONFIG, 'broken: upstream.baseUrl: Invalid URL');
      const url = config === 'offline' ? offlineUrl : sandbox.url;
      return new UpstreamClient({
        baseUrl: url,
        authUrl: url,
        clientId: 'demo-client',
        clientSecret: config === 'wrong-secret' ? 'nope' : SECRET,
      });
    },
  });
  let code = 0;
  try {
    await program.parseAsync(['node', 'scan-gateway', ...args]);
  } catch (e) {
    if (e instanceof CommandExit) code = e.exitCode;
    else if ((e as { exitCode?: number }).exitCode !== undefined)
      code = (e as { exitCode: number }).exitCode;
    else throw e;
  }
  return { code, out, err };
}

function file(name: string, content: unknown): string {
  writeFileSync(
    join(dir, name),
    typeof content === 'string' ? content : JSON.stringify(content, null, 2),
  );
  return name;
}

describe('products', () => {
  it('lists as a table and as JSON', async () => {
    const human = await cli('products', 'list', '--config', 'ok');
    expect(human.code).toBe(0);
    expect(human.out).toMatch(/^KEY\s+NAME\nPACK-A\s+Battery pack A\n/);
    const json = await cli('products', 'list', '--config', 'ok', '--json');
    expect(JSON.parse(json.out)).toContainEqual({ key: 'PACK-A', name: 'Battery pack A' });
  });

  it('creates, and exits 1 with the service problem on a duplicate', async () => {
    const created = await cli(
      'products',
      'create',
      '--key',
      'CLI-P',
      '--name',
      'CLI pack',
      '--config',
      'ok',
    );
    expect(created).toMatchObject({
      code: 0,
      out: expect.stringContaining('Created product CLI-P (BatteryPack), version 0'),
    });
    const dup = await cli(
      'products',
      'create',
      '--key',
      'CLI-P',
      '--name',
      'again',
      '--config',
      'ok',
    );
    expect(dup.code).toBe(1);
    expect(dup.err).toContain('409');
  });
});

describe('upload and status', () => {
  it('uploads directly, follows to Success and exits 0; status then reads it', async () => {
    const result = await cli('upload', file('ok.json', [SCAN]), '--config', 'ok');
    expect(result.code).toBe(0);
    expect(result.out).toContain('directly');
    expect(result.out).toMatch(/Request \d+: Success/);
    const id = /Accepted as request (\d+)/.exec(result.out)?.[1] ?? '';
    const status = await cli('status', id, '--config', 'ok', '--json');
    expect(status.code).toBe(0);
    expect(JSON.parse(status.out)).toMatchObject({ state: 'Success', requestId: id, processed: 1 });
  });

  it('uploads through a pre-signed address with --presigned and prints JSON', async () => {
    const result = await cli(
      'upload',
      file('ps.json', [SCAN, { ...SCAN, reference: 'CLI-2' }]),
      '--presigned',
      '--json',
      '--config',
      'ok',
    );
    expect(result.code).toBe(0);
    expect(JSON.parse(result.out)).toMatchObject({
      via: 'presigned',
      scans: 2,
      status: { state: 'Success', processed: 2 },
    });
  });

  it('switches to the pre-signed upload when the file is over the direct limit', async () => {
    const big = Array.from({ length: 100 }, (_, i) => ({
      ...SCAN,
      reference: `BIG-${i}`,
      attributes: [{ key: 'blob', value: 'x'.repeat(62_000) }],
    }));
    expect(JSON.stringify(big).length).toBeGreaterThan(MAX_DIRECT_BODY_BYTES);
    const result = await cli('upload', file('big.json', big), '--json', '--config', 'ok');
    expect(result.code).toBe(0);
    expect(JSON.parse(result.out)).toMatchObject({
      via: 'presigned',
      scans: 100,
      status: { state: 'Success', processed: 100 },
    });
  });

  it('exits 1 when the batch has failures and lists them', async () => {
    const result = await cli(
      'upload',
      file('fail.json', [SCAN, { ...SCAN, reference: 'BAD-DCP', dcpKey: 'XX' }]),
      '--config',
      'ok',
    );
    expect(result.code).toBe(1);
    expect(result.out).toContain('HasFailures');
    expect(result.out).toContain('BAD-DCP: Invalid DCP');
  });

  it('exits 1 for an unknown request id', async () => {
    const result = await cli('status', '99', '--config', 'ok');
    expect(result).toMatchObject({ code: 1, out: expect.stringContaining('Request 99: NotFound') });
  });

  it('exits 2 for a file that is not a valid array of scans, naming the field', async () => {
    const invalid = await cli(
      'upload',
      file('bad.json', [{ ...SCAN, timeStamp: 'yesterday' }]),
      '--config',
      'ok',
    );
    expect(invalid.code).toBe(2);
    expect(invalid.err).toContain('[0].timeStamp');
    expect((await cli('upload', file('empty.json', []), '--config', 'ok')).code).toBe(2);
    expect((await cli('upload', file('text.json', 'nope'), '--config', 'ok')).code).toBe(2);
    expect((await cli('upload', 'missing.json', '--config', 'ok')).code).toBe(2);
  });
});

describe('exit codes of failures', () => {
  it('2 for a configuration error, 3 for unreachable, refused credentials or a 5xx', async () => {
    const broken = await cli('products', 'list', '--config', 'broken');
    expect(broken).toMatchObject({ code: 2, err: expect.stringContaining('upstream.baseUrl') });
    expect((await cli('products', 'list', '--config', 'offline')).code).toBe(3);
    const refused = await cli('products', 'list', '--config', 'wrong-secret');
    expect(refused.code).toBe(3);
    expect(refused.err).toContain('invalid_client');
    sandbox.setFaults({ errorRate: 1 });
    try {
      expect((await cli('status', '1', '--config', 'ok')).code).toBe(3);
    } finally {
      sandbox.setFaults({ errorRate: 0 });
    }
  });

  it('shows an example in --help', async () => {
    for (const command of [['upload'], ['status'], ['products', 'list'], ['products', 'create']]) {
      const help = await cli(...command, '--help');
      expect(help.out, command.join(' ')).toContain('Example:');
      expect(help.out).toContain('--config');
    }
  });
});
