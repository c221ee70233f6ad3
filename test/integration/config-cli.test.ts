import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { MAIN_JS } from '../helpers/gateway-process.js';

/** Runs the compiled CLI (`npm test` builds it first), as plant IT would. */
function cli(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [MAIN_JS, ...args], { cwd: PACKAGE_ROOT, encoding: 'utf8', env: { PATH: process.env.PATH ?? '' }, timeout: 30_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const FIVE_MISTAKES = `site: { id: plant-1, timezone: Europe/Berln }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps:
  - { key: GI-01, kind: goodIn, productModelKey: PACK-A, supplierKey: SUP-1 }
inputs:
  - { id: gi, type: serial, path: /dev/null, baudrate: 9600, dcp: GI-02 }
rules:
  - name: serial
    match: { regex: '^(?<serial>\\d+)$' }
    reference: { group: serail }
`;

describe('scan-gateway config (compiled CLI)', () => {
  it('config check: five different mistakes give five precise errors with their lines, and exit 2', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-cli-'));
    const file = join(dir, 'site.yaml');
    writeFileSync(file, FIVE_MISTAKES);
    const r = cli('config', 'check', '--config', file);
    expect(r.code).toBe(2);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toBe(`${file}: 5 problems`);
    expect(lines.slice(1)).toEqual([
      `${file}:1:32: site.timezone: must be an IANA time zone such as Europe/Berlin`,
      `${file}:4:25: dcps[0].kind: Invalid option: expected one of "goodsIn"|"startOfProcess"|"endOfProcess"|"goodsOut"; did you mean "goodsIn"?`,
      `${file}:6:46: inputs[0].baudrate: unknown key "baudrate"; did you mean "baudRate"?`,
      `${file}:6:67: inputs[0].dcp: unknown DCP "GI-02"; did you mean "GI-01"?; known: GI-01`,
      `${file}:10:25: rules[0].reference.group: the regex has no group named "serail"; did you mean "serial"?; its named groups: serial`,
    ]);
    const json = cli('config', 'check', '--config', file, '--json');
    expect(json.code).toBe(2);
    const parsed = JSON.parse(json.stdout) as { valid: boolean; problems: { line: number; path: string }[] };
    expect(parsed.valid).toBe(false);
    expect(parsed.problems.map((p) => [p.line, p.path])).toEqual([
      [1, 'site.timezone'],
      [4, 'dcps[0].kind'],
      [6, 'inputs[0].baudrate'],
      [6, 'inputs[0].dcp'],
      [10, 'rules[0].reference.group'],
    ]);
  });

  it('config check: the example configuration is valid (exit 0)', () => {
    const r = cli('config', 'check', '--config', 'config/example.yaml');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^config\/example\.yaml: valid \(4 DCPs, inputs: gi-scanner \(serial\), gi-inbox \(files\)/);
    expect(r.stdout).toContain('rules: pallet-sscc, gs1-serialised');
  });

  it('config schema prints the JSON Schema', () => {
    const r = cli('config', 'schema');
    expect(r.code).toBe(0);
    const schema = JSON.parse(r.stdout) as { title: string; properties: Record<string, unknown>; $defs: Record<string, unknown> };
    expect(schema.title).toBe('scan-gateway configuration');
    expect(Object.keys(schema.properties)).toEqual(expect.arrayContaining(['site', 'dcps', 'inputs', 'rules', 'lookups', 'containers']));
    expect(Object.keys(schema.$defs)).toEqual(['Match', 'ValueSource']);
  });

  it('try shows what a read becomes, GS given as \\x1d or <GS>, without a secret or network', () => {
    const dm = ']d2010952123454321310B2611-03\\x1d21C2611030001234';
    const a = cli('try', '--config', 'config/example.yaml', '--input', 'gi-scanner', '--at', '2026-11-18T06:00:00Z', '--json', dm);
    const b = cli('try', '--config', 'config/example.yaml', '--input', 'gi-scanner', '--at', '2026-11-18T06:00:00Z', '--json', dm.replace('\\x1d', '<GS>'));
    expect(a.code).toBe(0);
    expect(a.stdout).toBe(b.stdout);
    const [result] = JSON.parse(a.stdout) as { outcome: string; rule: string; read: string; scan: unknown; gs1: { elements: { ai: string; value: string }[] } }[];
    expect(result).toMatchObject({ outcome: 'scan', rule: 'gs1-serialised', read: ']d2010952123454321310B2611-03<GS>21C2611030001234' });
    expect(result!.scan).toEqual({
      reference: 'C2611030001234',
      timeStamp: '2026-11-18T07:00:00',
      dcpKey: 'GI-01',
      productModelKey: 'PACK-A',
      supplierKey: 'SUP-0042',
      parents: [],
      attributes: [
        { key: 'gtin', value: '09521234543213' },
        { key: 'batch', value: 'B2611-03' },
      ],
    });
    expect(result!.gs1.elements.map((e) => `${e.ai}=${e.value}`)).toEqual(['01=09521234543213', '10=B2611-03', '21=C2611030001234']);

    const text = cli('try', '-c', 'config/example.yaml', '-i', 'gi-scanner', dm);
    expect(text.stdout).toContain('(21) SERIAL: C2611030001234');
    expect(text.stdout).toContain('→ scan, as it would be sent');
  });

  it('try: a rejection exits 1 and says why; an unknown input exits 2 with the input meant', () => {
    const rejected = cli('try', '-c', 'config/example.yaml', '-i', 'gi-scanner', ']d20109521234543214<GS>10LOT', 'LOWER-case');
    expect(rejected.code).toBe(1);
    expect(rejected.stdout).toMatch(/→ rejected: invalid GS1 data: .*check digit/);
    expect(rejected.stdout).toContain('→ rejected: no rule matched the read from input gi-scanner (rules tried: pallet-sscc, gs1-serialised, gs1-batch, cell-at-goods-in)');
    const unknown = cli('try', '-c', 'config/example.yaml', '-i', 'gi-scaner', 'X');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('scan-gateway try: no input "gi-scaner" in config/example.yaml; did you mean "gi-scanner"?');
  });
});
