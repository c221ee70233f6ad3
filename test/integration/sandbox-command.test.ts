import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommandExit } from '../../src/cli/exit.js';
import { registerSandboxCommand } from '../../src/cli/sandbox-command.js';
import { silentLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { waitFor } from '../helpers/wait.js';
import { Readable } from 'node:stream';
import { sftpSchema } from '../../src/config/schema.js';
import { sftpConnector } from '../../src/upstream/sftp-client.js';

// `scan-gateway sandbox`: starts, prints its URL and clients (never a secret), serves, and
// resolves its action once the stop signal fires.

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'sandbox-cmd-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function start(args: string[], stopSignal?: Promise<unknown>) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const output = { out: '', err: '' };
  stdout.on('data', (c: Buffer) => (output.out += c.toString()));
  stderr.on('data', (c: Buffer) => (output.err += c.toString()));
  const controller = new AbortController();
  const program = new Command('scan-gateway').exitOverride();
  registerSandboxCommand(program, {
    stdout,
    stderr,
    logger: silentLogger(),
    signal: controller.signal,
    cwd: dir,
    ...(stopSignal ? { stopSignal } : {}),
  });
  const done = program.parseAsync(['node', 'scan-gateway', 'sandbox', ...args]).then(
    () => 0,
    (e: unknown) => {
      if (e instanceof CommandExit) return e.exitCode;
      throw e;
    },
  );
  return { output, done, stop: () => controller.abort() };
}

describe('sandbox command', () => {
  it('serves until aborted, printing URL and client but not the secret', async () => {
    const run = start(['--port', '0']);
    const url = await waitFor(() => /listening on (http:\/\/\S+)/.exec(run.output.out)?.[1]);
    expect(run.output.out).toContain('client demo-client: DCPs GI-01, SOP-3, EOL-3, GO-01');
    expect(run.output.out).not.toContain(SECRET);
    const token = await fetch(`${url}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        client_id: 'demo-client',
        client_secret: SECRET,
        grant_type: 'client_credentials',
      }),
    });
    expect(token.status).toBe(200);
    run.stop();
    expect(await run.done).toBe(0);
    expect(run.output.out).toContain('stopped');
    await expect(fetch(`${url}/_sandbox/faults`)).rejects.toThrow();
  });

  it('with --sftp-port also runs the SFTP endpoint and prints its host key fingerprint', async () => {
    const root = join(dir, 'sftp-root');
    const run = start(['--port', '0', '--sftp-port', '0', '--sftp-root', 'sftp-root']);
    const m = await waitFor(() =>
      /SFTP endpoint on 127\.0\.0\.1:(\d+), host key (SHA256:[A-Za-z0-9+/]{43})/.exec(
        run.output.out,
      ),
    );
    const sftp = sftpSchema.parse({
      host: '127.0.0.1',
      port: Number(m[1]),
      hostKey: m[2],
      connectTimeoutMs: 5000,
    });
    const session = await sftpConnector({
      sftp,
      clientId: 'demo-client',
      password: SECRET,
    }).connect();
    await session.write('/hello.json', Readable.from([Buffer.from('[]')]));
    await session.close();
    expect(readFileSync(join(root, 'demo-client', 'hello.json'), 'utf8')).toBe('[]');
    expect(run.output.out).not.toContain(SECRET);
    run.stop();
    expect(await run.done).toBe(0);
  });

  it('stops when the stop promise of main.ts settles, with clients from --config', async () => {
    writeFileSync(
      join(dir, 'sb.yaml'),
      'clients:\n  - { clientId: plant-9, clientSecret: s9, dcps: [D-9] }\nprocessingDelayMs: 10\n',
    );
    let signal: (v: string) => void = () => undefined;
    const stopSignal = new Promise<string>((resolve) => (signal = resolve));
    const run = start(['--port', '0', '--config', 'sb.yaml'], stopSignal);
    await waitFor(() => run.output.out.includes('listening'));
    expect(run.output.out).toContain('client plant-9: DCPs D-9');
    expect(run.output.out).not.toContain('s9\n');
    signal('SIGTERM');
    expect(await run.done).toBe(0);
  });

  it('prints the Kafka endpoint it listens on (--kafka-port), and exits 2 for a bad one', async () => {
    const run = start(['--port', '0', '--kafka-port', '0']);
    const kafka = await waitFor(() =>
      /status events: Kafka at (127\.0\.0\.1:(\d+)) \(SASL_SSL, SCRAM-SHA-512, topic sandbox-demo-client-status-event/.exec(
        run.output.out,
      ),
    );
    expect(Number(kafka[2])).toBeGreaterThan(0);
    run.stop();
    expect(await run.done).toBe(0);
    const bad = start(['--port', '0', '--kafka-port', 'ninety']);
    expect(await bad.done).toBe(2);
    expect(bad.output.err).toContain('--kafka-port must be a number');
  });

  it('exits 2 for a bad port or configuration, 1 when the port is taken', async () => {
    expect(await start(['--port', 'eighty']).done).toBe(2);
    writeFileSync(join(dir, 'bad.yaml'), 'tokenTtlSec: -1\n');
    const bad = start(['--port', '0', '--config', 'bad.yaml']);
    expect(await bad.done).toBe(2);
    expect(bad.output.err).toContain('tokenTtlSec');

    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as AddressInfo).port;
    try {
      const taken = start(['--port', String(port)]);
      expect(await taken.done).toBe(1);
      expect(taken.output.err).toContain('cannot start');
    } finally {
      await new Promise((r) => blocker.close(r));
    }
  });
});
