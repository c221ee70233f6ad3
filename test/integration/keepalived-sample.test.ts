import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';

/**
 * The sample keepalived files (packaging/keepalived/): the check script answers "leads" only for a
 * 200 of the leader route, and "does not lead" for a 503, a silent gateway (within its 1 s
 * limit) or none at all; keepalived.conf tracks that script under the name it declares.
 */

const DIR = join(PACKAGE_ROOT, 'packaging/keepalived');
const SCRIPT = join(DIR, 'scan-gateway-is-leader');

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = undefined;
});

/** A stand-in for the gateway's leader route: answers `status` (or nothing at all), and records the Authorization header. */
async function leaderRoute(status: number | 'silent', seen: string[] = []): Promise<string> {
  server = createServer((req, res) => {
    seen.push(`${req.url} ${req.headers.authorization ?? '-'}`);
    if (status === 'silent') return;
    res.writeHead(status, { 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return `http://127.0.0.1:${address.port}/api/v1/ha/leader`;
}

function check(env: Record<string, string>): Promise<{ code: number }> {
  return new Promise((resolve) => {
    execFile(SCRIPT, [], { env: { PATH: process.env.PATH ?? '', ...env } }, (err) => {
      const code = err ? ((err as { code?: number }).code ?? 1) : 0;
      resolve({ code: typeof code === 'number' ? code : 1 });
    });
  });
}

describe('keepalived check script', () => {
  it('passes on the leader (200) and fails on a follower (503)', async () => {
    const seen: string[] = [];
    expect((await check({ SCAN_GATEWAY_LEADER_URL: await leaderRoute(200, seen) })).code).toBe(0);
    expect(seen).toEqual(['/api/v1/ha/leader -']);
    await new Promise((resolve) => server!.close(resolve));
    expect((await check({ SCAN_GATEWAY_LEADER_URL: await leaderRoute(503) })).code).not.toBe(0);
  });

  it('fails by its one-second limit on a gateway that does not answer, and at once when none listens', async () => {
    const silent = await check({ SCAN_GATEWAY_LEADER_URL: await leaderRoute('silent') });
    // curl's exit code 28: its --max-time (1 s) ended the check, not a refusal. Told by the exit
    // code, not by the elapsed ms, which a loaded machine stretches.
    expect(silent.code).toBe(28);
    const port = (server!.address() as { port: number }).port;
    server!.closeAllConnections();
    await new Promise((resolve) => server!.close(resolve));
    server = undefined;
    expect(
      (await check({ SCAN_GATEWAY_LEADER_URL: `http://127.0.0.1:${port}/api/v1/ha/leader` })).code,
    ).not.toBe(0);
  });

  it('sends the headers of its header file (a read token), not on its command line', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'sg-keepalived-')), 'headers');
    writeFileSync(file, 'Authorization: Bearer read-token-of-the-health-page\n', { mode: 0o600 });
    const seen: string[] = [];
    expect(
      (
        await check({
          SCAN_GATEWAY_LEADER_URL: await leaderRoute(200, seen),
          SCAN_GATEWAY_HEADER_FILE: file,
        })
      ).code,
    ).toBe(0);
    expect(seen).toEqual(['/api/v1/ha/leader Bearer read-token-of-the-health-page']);
  });

  it('is what keepalived.conf runs and tracks, by the path its install line gives it', () => {
    const conf = readFileSync(join(DIR, 'keepalived.conf'), 'utf8');
    const script = /vrrp_script (\S+) \{\s*script "([^"]+)"/.exec(conf);
    expect(script?.[2]).toBe('/usr/local/sbin/scan-gateway-is-leader');
    expect(conf).toContain(`install -m 0755 scan-gateway-is-leader ${script?.[2]}`);
    expect(conf).toMatch(new RegExp(`track_script \\{\\s*${script?.[1]}\\s`));
    // The default of the script is the route of the gateway's default listen address (config/example.yaml).
    expect(readFileSync(SCRIPT, 'utf8')).toContain('http://127.0.0.1:8080/api/v1/ha/leader');
    expect(readFileSync(join(PACKAGE_ROOT, 'config/example.yaml'), 'utf8')).toContain(
      'listen: 127.0.0.1:8080',
    );
  });
});
