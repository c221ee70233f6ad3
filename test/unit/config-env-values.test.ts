import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { isGatewayError } from '../../src/errors.js';

/** A configuration error names the variable, never the value it holds. */

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function problemsOf(yaml: string, env: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'sg-env-values-'));
  dirs.push(dir);
  const file = join(dir, 'config.yaml');
  writeFileSync(file, yaml);
  try {
    loadConfig(file, { baseDir: dir, env, skipSecret: true });
  } catch (err) {
    if (isGatewayError(err)) return err.message;
    throw err;
  }
  throw new Error('the configuration was accepted');
}

const CONFIG = `site:
  id: t
  timezone: \${SITE_TZ}
upstream:
  baseUrl: \${UPSTREAM_URL}
  authUrl: http://127.0.0.1:9
  clientId: c
dcps:
  - key: GI-01
    kind: \${DCP_KIND}
    productModelKey: PACK-A
    supplierKey: SUP-1
inputs:
  - id: gi-a
    type: \${INPUT_TYPE}
    path: /dev/null
    dcp: GI-01
  - id: gi-b
    type: serial
    path: /dev/null
    dcp: GI-01
    baudRate: \${BAUD}
`;

describe('configuration errors and environment values', () => {
  it('name the variable where a value from the environment is refused, never the value', () => {
    const values = {
      SITE_TZ: 'Mars/TOPSECRET-1',
      UPSTREAM_URL: 'no url TOPSECRET-2',
      DCP_KIND: 'TOPSECRET-3',
      INPUT_TYPE: 'TOPSECRET-4',
      BAUD: 'TOPSECRET-5',
    };
    const message = problemsOf(CONFIG, values);
    expect(message).not.toContain('TOPSECRET');
    // Quoting the unknown type would show the value: `unknown type "TOPSECRET-4"`.
    expect(message).toContain('inputs[gi-a].type: unknown type "${INPUT_TYPE}"');
    expect(message).toContain('site.timezone:');
    expect(message).toContain('inputs[gi-b].baudRate:');
  });

  it('a one- or two-character value is hidden where quoted, without garbling the rest', () => {
    const message = problemsOf(CONFIG, {
      SITE_TZ: 'Europe/Berlin',
      UPSTREAM_URL: 'http://127.0.0.1:9',
      DCP_KIND: 'goodsIn',
      INPUT_TYPE: 'x',
      BAUD: '9600',
    });
    expect(message).toContain('unknown type "${INPUT_TYPE}"');
    expect(message).toContain('one of: files, serial, mqtt, tcp, http');
  });
});
