import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig, parseConfigText, type ConfigProblem } from '../../src/config/load.js';
import { isGatewayError } from '../../src/errors.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import type { FilesInputConfig } from '../../src/inputs/files/schema.js';

function problemsOf(text: string, env: Record<string, string> = {}): ConfigProblem[] {
  try {
    parseConfigText(text, 'site.yaml', { env });
  } catch (err) {
    if (isGatewayError(err) && Array.isArray(err.details.problems))
      return err.details.problems as ConfigProblem[];
    throw err;
  }
  throw new Error('expected the configuration to be refused');
}

const GOOD = `site: { id: s1, timezone: Europe/Berlin }
upstream:
  baseUrl: http://127.0.0.1:8090
  authUrl: http://127.0.0.1:8090
  clientId: c1
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }
inputs:
  - { id: inbox, type: files, dir: var/inbox, dcp: GI-01 }
`;

describe('configuration loading', () => {
  it('accepts a good file and fills defaults', () => {
    const cfg = parseConfigText(GOOD, 'site.yaml');
    expect(cfg.delivery.mode).toBe('direct');
    expect(cfg.http.listen).toBe('127.0.0.1:8080');
    expect(cfg.dcps[0]?.duplicateWindowMs).toBe(2000);
  });

  it('accepts canonical IANA zones, their aliases and fixed zones, and refuses a name ICU does not know, with its line', () => {
    for (const zone of [
      'Europe/Berlin',
      'Asia/Kolkata',
      'UTC',
      'US/Eastern',
      'Asia/Calcutta',
      'Etc/GMT-1',
      'europe/berlin',
    ]) {
      expect(
        parseConfigText(GOOD.replace('Europe/Berlin', zone), 'site.yaml').site.timezone,
        zone,
      ).toBe(zone);
    }
    for (const zone of ['Mars/Olympus_Mons', 'CEST', 'Europe/Berlin ']) {
      const problems = problemsOf(GOOD.replace('Europe/Berlin', JSON.stringify(zone)));
      expect(problems, zone).toHaveLength(1);
      expect(problems[0]).toMatchObject({
        file: 'site.yaml',
        line: 1,
        path: 'site.timezone',
        message: 'must be an IANA time zone such as Europe/Berlin',
      });
    }
  });

  it('names file, line, column, key path and the problem', () => {
    const problems = problemsOf(GOOD.replace('kind: goodsIn', 'kind: goodIn'));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({ file: 'site.yaml', line: 7, path: 'dcps[0].kind' });
    expect(problems[0]?.message).toMatch(/goodsIn/);
  });

  it('suggests the key meant by a typo', () => {
    const problems = problemsOf(GOOD.replace('clientId: c1', 'clientId: c1\n  clientSecretFil: x'));
    expect(problems[0]).toMatchObject({ path: 'upstream.clientSecretFil', line: 6 });
    expect(problems[0]?.message).toContain('did you mean "clientSecretFile"');
  });

  it('refuses a literal secret with what to do instead', () => {
    const problems = problemsOf(
      GOOD.replace('clientId: c1', 'clientId: c1\n  clientSecret: hunter2'),
    );
    expect(problems[0]?.path).toBe('upstream.clientSecret');
    expect(problems[0]?.message).toContain('SCAN_GATEWAY_CLIENT_SECRET');
    expect(JSON.stringify(problems)).not.toContain('hunter2');
  });

  it('reports every problem at once, and cross-checks DCP references', () => {
    const bad = GOOD.replace('Europe/Berlin', 'Europe/Berln')
      .replace('dcp: GI-01 }', 'dcp: GI-02 }')
      .replace('supplierKey: SUP-1', 'supplierKey: ""');
    const problems = problemsOf(bad);
    const paths = problems.map((p) => p.path);
    expect(paths).toContain('site.timezone');
    expect(paths).toContain('dcps[0].supplierKey');
  });

  it('expands ${VAR} and reports an unset one', () => {
    const withVar = GOOD.replace('clientId: c1', 'clientId: ${CLIENT_ID}');
    expect(
      parseConfigText(withVar, 'site.yaml', { env: { CLIENT_ID: 'from-env' } }).upstream.clientId,
    ).toBe('from-env');
    expect(problemsOf(withVar)[0]?.message).toContain('CLIENT_ID is not set');
  });

  it('reports YAML syntax errors with their line', () => {
    const problems = problemsOf('site: { id: s1\nupstream: [');
    expect(problems[0]?.line).toBeGreaterThan(0);
  });

  it('reads the secret from env, credentials directory or file, and resolves relative paths', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-config-'));
    writeFileSync(
      join(dir, 'site.yaml'),
      GOOD.replace('clientId: c1', 'clientId: c1\n  clientSecretFile: secret.txt'),
    );
    writeFileSync(join(dir, 'secret.txt'), 's3cret\n');
    const fromFile = loadConfig(join(dir, 'site.yaml'), { baseDir: dir, env: {} });
    expect(fromFile.clientSecret).toBe('s3cret');
    expect(fromFile.config.buffer.path).toBe(join(dir, 'var/buffer.db'));
    expect((fromFile.config.inputs[0] as FilesInputConfig | undefined)?.dir).toBe(
      join(dir, 'var/inbox'),
    );
    expect(
      loadConfig(join(dir, 'site.yaml'), {
        baseDir: dir,
        env: { SCAN_GATEWAY_CLIENT_SECRET: 'env-secret' },
      }).clientSecret,
    ).toBe('env-secret');
    const creds = mkdtempSync(join(tmpdir(), 'sg-creds-'));
    writeFileSync(join(creds, 'client-secret'), 'cred-secret');
    expect(
      loadConfig(join(dir, 'site.yaml'), { baseDir: dir, env: { CREDENTIALS_DIRECTORY: creds } })
        .clientSecret,
    ).toBe('cred-secret');
    // An empty credential (the package's empty /etc/scan-gateway/client-secret) is no secret: the
    // file named by clientSecretFile is read; with nothing else the error names the empty credential.
    const empty = mkdtempSync(join(tmpdir(), 'sg-creds-'));
    writeFileSync(join(empty, 'client-secret'), '');
    expect(
      loadConfig(join(dir, 'site.yaml'), { baseDir: dir, env: { CREDENTIALS_DIRECTORY: empty } })
        .clientSecret,
    ).toBe('s3cret');
    writeFileSync(join(dir, 'bare.yaml'), GOOD);
    expect(() =>
      loadConfig(join(dir, 'bare.yaml'), { baseDir: dir, env: { CREDENTIALS_DIRECTORY: empty } }),
    ).toThrow(/no client secret \(the systemd credential client-secret, .*client-secret, is empty/);
  });

  it('requires https for baseUrl and authUrl off loopback, naming file, line and key, unless allowInsecureHttp', () => {
    const plain = GOOD.replace(
      'authUrl: http://127.0.0.1:8090',
      'authUrl: http://auth.plant.example',
    ).replace('baseUrl: http://127.0.0.1:8090', 'baseUrl: http://trace.plant.example');
    const problems = problemsOf(plain);
    expect(problems.map((p) => [p.path, p.line])).toEqual([
      ['upstream.baseUrl', 3],
      ['upstream.authUrl', 4],
    ]);
    expect(problems[0]?.message).toContain('must use https');
    expect(problems[0]?.message).toContain('allowInsecureHttp');
    expect(
      parseConfigText(
        plain.replace('clientId: c1', 'clientId: c1\n  allowInsecureHttp: true'),
        'site.yaml',
      ).upstream.allowInsecureHttp,
    ).toBe(true);
    for (const host of ['localhost:8090', '127.0.0.2:1', '[::1]:8090']) {
      expect(
        parseConfigText(
          GOOD.replace('authUrl: http://127.0.0.1:8090', `authUrl: http://${host}`),
          'site.yaml',
        ).upstream.authUrl,
      ).toContain(host);
    }
    expect(
      problemsOf(GOOD.replace('authUrl: http://127.0.0.1:8090', 'authUrl: ftp://auth.example'))[0],
    ).toMatchObject({ path: 'upstream.authUrl', line: 4 });
  });

  it('refuses proxy credentials in proxyUrl and reads them from a file or the environment', () => {
    const problems = problemsOf(
      GOOD.replace('clientId: c1', 'clientId: c1\n  proxyUrl: http://gw:hunter2@proxy.plant:3128'),
    );
    expect(problems[0]).toMatchObject({ path: 'upstream.proxyUrl', line: 6 });
    expect(problems[0]?.message).toContain('proxyCredentialsFile');
    const dir = mkdtempSync(join(tmpdir(), 'sg-proxy-'));
    writeFileSync(
      join(dir, 'site.yaml'),
      GOOD.replace(
        'clientId: c1',
        'clientId: c1\n  proxyUrl: http://proxy.plant:3128\n  proxyCredentialsFile: proxy.txt',
      ),
    );
    writeFileSync(join(dir, 'proxy.txt'), 'gw:pw\n');
    const env = { SCAN_GATEWAY_CLIENT_SECRET: 's' };
    expect(loadConfig(join(dir, 'site.yaml'), { baseDir: dir, env }).proxyCredentials).toBe(
      'gw:pw',
    );
    expect(
      loadConfig(join(dir, 'site.yaml'), {
        baseDir: dir,
        env: { ...env, SCAN_GATEWAY_PROXY_CREDENTIALS: 'a:b' },
      }).proxyCredentials,
    ).toBe('a:b');
    writeFileSync(join(dir, 'proxy.txt'), 'no-colon');
    expect(() => loadConfig(join(dir, 'site.yaml'), { baseDir: dir, env })).toThrow(
      /user:password/,
    );
  });

  it('refuses a status-event staleness shorter than the consumer can read a quiet topic, naming the line', () => {
    const events = (ms: number) =>
      GOOD.replace(
        '  clientId: c1\n',
        `  clientId: c1\n  statusEvents: { enabled: true, bootstrapServers: [kafka.example:9093], environment: prod, staleAfterMs: ${ms} }\n`,
      );
    const problems = problemsOf(events(1000));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({ path: 'upstream.statusEvents.staleAfterMs', line: 6 });
    expect(problems[0]?.message).toMatch(/at least 5000 ms.*every 2 s/);
    expect(() => parseConfigText(events(5000), 'site.yaml', { env: {} })).not.toThrow();
  });

  it('accepts the shipped demo and example configurations', () => {
    for (const file of ['config/demo.yaml', 'config/example.yaml']) {
      const loaded = loadConfig(join(PACKAGE_ROOT, file), {
        baseDir: PACKAGE_ROOT,
        env: {},
        skipSecret: true,
      });
      expect(loaded.config.dcps.length).toBeGreaterThan(0);
    }
  });
});
