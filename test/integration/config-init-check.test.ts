import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { MAIN_JS } from '../helpers/gateway-process.js';

// `config init` writes a starter that passes `config check`, and `config check` checks
// what the running gateway needs on this machine (files, access as the service user, environment
// variables, free listen addresses), words YAML errors plainly and explains units.

function cli(
  args: string[],
  env: Record<string, string> = {},
  input?: string,
): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [MAIN_JS, ...args], {
    cwd: PACKAGE_ROOT,
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', ...env },
    timeout: 30_000,
    ...(input !== undefined ? { input } : {}),
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const tmp = () => mkdtempSync(join(tmpdir(), 'sg-init-'));

const BASE = `site: { id: plant-1, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }
`;

describe('scan-gateway config init', () => {
  it('writes a commented starter for every input type that passes config check, and refuses to overwrite', () => {
    const dir = tmp();
    const file = join(dir, 'config.yaml');
    const w = cli([
      'config',
      'init',
      '--input',
      'serial',
      '--input',
      'files',
      '--input',
      'tcp',
      '--input',
      'mqtt',
      '--data-dir',
      dir,
      '--listen',
      '127.0.0.1:0',
      '--output',
      file,
    ]);
    expect(w.code, w.stdout + w.stderr).toBe(0);
    const text = readFileSync(file, 'utf8');
    expect(text).toMatch(
      /^# scan-gateway configuration \(written by: scan-gateway config init --input serial --input files --input tcp --input mqtt\)/,
    );
    expect(text).toContain('# The client secret never goes here');
    expect(statSync(file).mode & 0o777).toBe(0o640);
    const check = cli(['config', 'check', '--config', file]);
    expect(check.code, check.stdout).toBe(0);
    expect(check.stdout).toMatch(
      /valid \(1 DCP, inputs: scanner \(serial\), inbox \(files\), reader \(tcp\), broker \(mqtt\)/,
    );
    // The scanner is not plugged in here: a note, not a problem.
    expect(check.stdout).toContain(
      'note: inputs[scanner].path: /dev/serial/by-id/CHANGE-ME is not there now',
    );
    const again = cli(['config', 'init', '--output', file]);
    expect(again).toMatchObject({
      code: 2,
      stdout: expect.stringContaining('exists; --force overwrites it'),
    });
    expect(cli(['config', 'init', '--output', file, '--force']).code).toBe(0);
    expect(cli(['config', 'check', '--config', file, '--offline']).code).toBe(0);
  });

  it('an http input: the starter passes --offline, and the full check says the ingest token is missing', () => {
    const dir = tmp();
    const file = join(dir, 'c.yaml');
    writeFileSync(
      file,
      cli(['config', 'init', '--input', 'http', '--data-dir', dir, '--listen', '127.0.0.1:0'])
        .stdout,
    );
    expect(cli(['config', 'check', '--config', file, '--offline']).code).toBe(0);
    const full = cli(['config', 'check', '--config', file]);
    expect(full.code).toBe(2);
    expect(full.stdout).toContain(
      `${file}: inputs[ingest].tokenFile: /etc/scan-gateway/ingest-token does not exist`,
    );
  });

  it('an unknown input type is refused with the types it knows', () => {
    expect(cli(['config', 'init', '--input', 'modbus'])).toMatchObject({
      code: 2,
      stdout: 'config init: unknown input type "modbus"; one of: files, serial, mqtt, tcp, http\n',
    });
  });
});

describe('scan-gateway config check on the machine', () => {
  it('names missing files and unset environment variables by input id; --offline checks the file only', () => {
    const r = cli(['config', 'check', '--config', 'config/example.yaml']);
    expect(r.code).toBe(2);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toBe(
      'config/example.yaml: 6 problems on this machine (the file itself is valid; --offline skips these checks)',
    );
    expect(lines).toContain(
      'config/example.yaml: inputs[line3-cameras].caFile: /etc/scan-gateway/broker-ca.pem does not exist',
    );
    expect(lines).toContain(
      'config/example.yaml: inputs[mes-ingest].tokenFile: /etc/scan-gateway/ingest-token does not exist',
    );
    expect(r.stdout).toMatch(
      /^config\/example\.yaml: inputs\[building-broker\]\.passwordEnv: the environment variable BUILDING_MQTT_PASSWORD is not set here/m,
    );
    const withEnv = cli(['config', 'check', '--config', 'config/example.yaml', '--json'], {
      BUILDING_MQTT_PASSWORD: 'x'.repeat(20),
    });
    const parsed = JSON.parse(withEnv.stdout) as { valid: boolean; problems: { path: string }[] };
    expect(parsed.valid).toBe(false);
    expect(parsed.problems.map((p) => p.path)).not.toContain('inputs[building-broker].passwordEnv');
    expect(parsed.problems).toHaveLength(5);
  });

  it('--as USER judges access as that user: a 0600 file of another owner is not readable for it', () => {
    const dir = tmp();
    chmodSync(dir, 0o755);
    const secret = join(dir, 'client-secret');
    writeFileSync(secret, 'a-client-secret\n', { mode: 0o600 });
    const file = join(dir, 'c.yaml');
    writeFileSync(
      file,
      `${BASE.replace('clientId: c }', `clientId: c, clientSecretFile: ${secret} }`)}buffer: { path: ${dir}/buffer.db }\nhttp: { listen: '127.0.0.1:0' }\ninputs: []\n`,
    );
    const asMe = cli(['config', 'check', '--config', file]);
    expect(asMe.code, asMe.stdout).toBe(0);
    const asNobody = cli(['config', 'check', '--config', file, '--as', 'nobody']);
    expect(asNobody.code).toBe(2);
    expect(asNobody.stdout).toContain(
      `${file}: upstream.clientSecretFile: nobody cannot read ${secret} (owner ${process.getuid?.()}:`,
    );
    expect(asNobody.stdout).toContain(`${file}: buffer.path: nobody cannot read and write ${dir}`);
    expect(cli(['config', 'check', '--config', file, '--as', 'no-such-user-16']).stderr).toContain(
      '--as no-such-user-16: no such user in /etc/passwd',
    );
  });

  it('a listen address in use is a problem that names it', async () => {
    const hold = async () => {
      const server = createServer();
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return server;
    };
    const servers = [await hold(), await hold()];
    const [port, port2] = servers.map((s) => (s.address() as AddressInfo).port);
    try {
      const dir = tmp();
      const file = join(dir, 'c.yaml');
      writeFileSync(
        file,
        `${BASE}buffer: { path: ${dir}/buffer.db }\nhttp: { listen: '127.0.0.1:${port}' }\ninputs:\n  - { id: readers, type: tcp, mode: server, host: 127.0.0.1, port: ${port2}, dcp: GI-01 }\n`,
      );
      const r = cli(['config', 'check', '--config', file]);
      expect(r.code).toBe(2);
      expect(r.stdout).toContain(
        `${file}: http.listen: 127.0.0.1:${port} is in use by another program`,
      );
      expect(r.stdout).toContain(
        `${file}: inputs[readers].port: 127.0.0.1:${port2} is in use by another program`,
      );
      expect(cli(['config', 'check', '--config', file, '--offline']).code).toBe(0);
    } finally {
      for (const s of servers) await new Promise((resolve) => s.close(resolve));
    }
  });

  it('YAML syntax errors in plain words with the line; a value in the wrong unit says the unit meant', () => {
    const dir = tmp();
    const flow = join(dir, 'flow.yaml');
    writeFileSync(flow, `${BASE}inputs: [\n  - { id: a, type: files, dir: x, dcp: GI-01 }\n]\n`);
    const r = cli(['config', 'check', '--config', flow]);
    expect(r.code).toBe(2);
    expect(r.stdout).toContain(
      `${flow}:6:3: a list or map on lines of its own inside { } or [ ]: inside braces and brackets write everything on one line, separated by commas`,
    );
    const unclosed = join(dir, 'unclosed.yaml');
    writeFileSync(
      unclosed,
      'site: { id: plant-1, timezone: Europe/Berlin\nupstream:\n  baseUrl: x\n',
    );
    expect(cli(['config', 'check', '--config', unclosed]).stdout).toContain(
      `${unclosed}:2:1: a { opened on this or an earlier line is not closed with }`,
    );
    const units = join(dir, 'units.yaml');
    writeFileSync(
      units,
      `${BASE}inputs:\n  - { id: gate, type: tcp, mode: client, host: 127.0.0.1, port: 9, idleTimeoutMs: "15 min", dcp: GI-01 }\n  - { id: drop, type: files, dir: ${dir}/in, maxFileBytes: "2 GiB", dcp: GI-01 }\n`,
    );
    const u = cli(['config', 'check', '--config', units]);
    expect(u.stdout).toContain(
      `${units}:6:83: inputs[gate].idleTimeoutMs: "15 min" is text; idleTimeoutMs takes a number of milliseconds, e.g. 900000 for 15 min`,
    );
    expect(u.stdout).toContain(
      `inputs[drop].maxFileBytes: "2 GiB" is text; maxFileBytes takes a number of bytes, e.g. 2147483648 for 2 GiB`,
    );
  });
});
