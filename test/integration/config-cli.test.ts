import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { MAIN_JS } from '../helpers/gateway-process.js';

/** Runs the compiled CLI (`npm test` builds it first), as plant IT would. */
function cli(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [MAIN_JS, ...args], {
    cwd: PACKAGE_ROOT,
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '' },
    timeout: 30_000,
  });
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
      `${file}:4:25: dcps[GI-01].kind: Invalid option: expected one of "goodsIn"|"startOfProcess"|"endOfProcess"|"goodsOut"; did you mean "goodsIn"?`,
      `${file}:6:46: inputs[gi].baudrate: unknown key "baudrate"; did you mean "baudRate"?`,
      `${file}:6:67: inputs[gi].dcp: unknown DCP "GI-02"; did you mean "GI-01"?; known: GI-01`,
      `${file}:10:25: rules[serial].reference.group: the regex has no group named "serail"; did you mean "serial"?; its named groups: serial`,
    ]);
    const json = cli('config', 'check', '--config', file, '--json');
    expect(json.code).toBe(2);
    const parsed = JSON.parse(json.stdout) as {
      valid: boolean;
      problems: { line: number; path: string }[];
    };
    expect(parsed.valid).toBe(false);
    expect(parsed.problems.map((p) => [p.line, p.path])).toEqual([
      [1, 'site.timezone'],
      [4, 'dcps[0].kind'],
      [6, 'inputs[0].baudrate'],
      [6, 'inputs[0].dcp'],
      [10, 'rules[0].reference.group'],
    ]);
  });

  it('config check: says when the byte quota is larger than the disk of the buffer can hold', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-cli-'));
    const file = join(dir, 'quota.yaml');
    const yaml = (maxBytes?: number) => `site: { id: plant-1, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${join(dir, 'data', 'buffer.db')}${maxBytes === undefined ? '' : `, maxBytes: ${maxBytes}`} }
http: { listen: '127.0.0.1:0' }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }
inputs: []
`;
    writeFileSync(file, yaml(1e15));
    const big = cli('config', 'check', '--config', file);
    expect(big.code, big.stderr).toBe(0);
    expect(big.stdout).toMatch(
      /^disk: buffer\.maxBytes \(1000000000000000 bytes of scans\) is larger than the disk can hold/m,
    );
    writeFileSync(file, yaml(1024));
    expect(cli('config', 'check', '--config', file).stdout).toContain(
      'disk: the buffer quota fits the disk here',
    );
    // Not set: derived from the disk, and the figure for this disk now.
    writeFileSync(file, yaml());
    expect(cli('config', 'check', '--config', file).stdout).toMatch(
      /^disk: buffer\.maxBytes not set: the byte quota is derived from the disk at start and rechecked every second \(here now \d+ bytes of scans\)$/m,
    );
  });

  it('config check: YAML problems (aliases, duplicate keys, tabs) are configuration errors with file and line, exit 2', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-cli-'));
    const check = (name: string, text: string) => {
      const file = join(dir, name);
      writeFileSync(file, text);
      const r = cli('config', 'check', '--config', file);
      return { code: r.code, out: r.stdout.replaceAll(file, name), err: r.stderr };
    };
    expect(check('alias.yaml', 'site: *nothere\n')).toEqual({
      code: 2,
      out: 'alias.yaml: 1 problem\nalias.yaml:1:7: site: unresolved alias *nothere: no anchor &nothere before it\n',
      err: '',
    });
    const levels = 'abcdefghij'.split('');
    const bomb = levels
      .map((n, i) =>
        i === 0
          ? `a: &a [${Array(10).fill('x').join(', ')}]`
          : `${n}: &${n} [${Array(10)
              .fill(`*${levels[i - 1]}`)
              .join(', ')}]`,
      )
      .join('\n');
    const bombed = check('bomb.yaml', `${bomb}\n`);
    expect(bombed.code).toBe(2);
    expect(bombed.out).toMatch(
      /^bomb\.yaml:\d+:\d+: [a-j]\[\d\]: aliases expand to more than 100000 values \(an alias bomb\?\)/m,
    );
    expect(
      check('dup.yaml', 'site: { id: a }\nlookups:\n  t:\n    GI-01: A\n    GI-01: B\n').out,
    ).toContain('dup.yaml:5:5: lookups.t.GI-01: duplicate key "GI-01" (first at line 4)');
    expect(check('tab.yaml', 'site:\n\tid: a\n')).toMatchObject({
      code: 2,
      out: expect.stringContaining(
        'tab.yaml:2:1: a tab indents this line: YAML indents with spaces only; at `id: a` [YAML: Tabs are not allowed as indentation]',
      ),
    });
  });

  it('config check --offline: the example configuration is valid (exit 0)', () => {
    const r = cli('config', 'check', '--config', 'config/example.yaml', '--offline');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /^config\/example\.yaml: valid \(4 DCPs, inputs: gi-scanner \(serial\), gi-inbox \(files\)/,
    );
    expect(r.stdout).toContain('rules: pallet-sscc, gs1-serialised');
    // What a reload does not apply is said before the change is made.
    expect(r.stdout).toMatch(
      /^reload: systemctl reload scan-gateway \(SIGHUP\) applies every other change, secrets and tokens included; a restart is needed for: upstream\.baseUrl; upstream\.authUrl;/m,
    );
  });

  it('config schema prints the JSON Schema', () => {
    const r = cli('config', 'schema');
    expect(r.code).toBe(0);
    const schema = JSON.parse(r.stdout) as {
      title: string;
      properties: Record<string, unknown>;
      $defs: Record<string, unknown>;
    };
    expect(schema.title).toBe('scan-gateway configuration');
    expect(Object.keys(schema.properties)).toEqual(
      expect.arrayContaining(['site', 'dcps', 'inputs', 'rules', 'lookups', 'containers']),
    );
    expect(Object.keys(schema.$defs)).toEqual(['Match', 'ValueSource']);
  });

  it('try shows what a read becomes, GS given as \\x1d or <GS>, without a secret or network', () => {
    const dm = ']d2010952123454321310B2611-03\\x1d21C2611030001234';
    const a = cli(
      'try',
      '--config',
      'config/example.yaml',
      '--input',
      'gi-scanner',
      '--at',
      '2026-11-18T06:00:00Z',
      '--json',
      dm,
    );
    const b = cli(
      'try',
      '--config',
      'config/example.yaml',
      '--input',
      'gi-scanner',
      '--at',
      '2026-11-18T06:00:00Z',
      '--json',
      dm.replace('\\x1d', '<GS>'),
    );
    expect(a.code).toBe(0);
    expect(a.stdout).toBe(b.stdout);
    const [result] = JSON.parse(a.stdout) as {
      outcome: string;
      rule: string;
      read: string;
      scan: unknown;
      gs1: { elements: { ai: string; value: string }[] };
    }[];
    expect(result).toMatchObject({
      outcome: 'scan',
      rule: 'gs1-serialised',
      read: ']d2010952123454321310B2611-03<GS>21C2611030001234',
    });
    expect(result!.scan).toEqual({
      reference: 'https://id.gs1.org/01/09521234543213/21/C2611030001234',
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
    expect(result!.gs1.elements.map((e) => `${e.ai}=${e.value}`)).toEqual([
      '01=09521234543213',
      '10=B2611-03',
      '21=C2611030001234',
    ]);

    const text = cli('try', '-c', 'config/example.yaml', '-i', 'gi-scanner', dm);
    expect(text.stdout).toContain('(21) SERIAL: C2611030001234');
    expect(text.stdout).toContain('→ scan, as it would be sent');
  });

  it('every `try` example in config/example.yaml and docs/configuration.md maps its reads to scans', () => {
    const examples: { where: string; args: string[] }[] = [];
    for (const file of ['config/example.yaml', 'docs/configuration.md']) {
      readFileSync(join(PACKAGE_ROOT, file), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          // Examples run against the example configuration (usage lines with FILE/ID/READ are not examples).
          const command = /scan-gateway try (.*-c(?:onfig)? config\/example\.yaml.*?)`?$/.exec(
            line,
          )?.[1];
          if (command)
            examples.push({
              where: `${file}:${i + 1}`,
              args: [...command.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]!),
            });
        });
    }
    expect(examples.length).toBeGreaterThanOrEqual(7);
    expect(examples.map((e) => e.args.join(' '))).toContain(
      '-c config/example.yaml -i line3-cameras --dcp EOL-3 ]d1C24A0K3B0712345',
    );
    for (const { where, args } of examples) {
      const r = cli('try', ...args, '--json');
      const results =
        r.code === 2 ? [] : (JSON.parse(r.stdout) as { outcome: string; reason?: string }[]);
      expect(
        { where, code: r.code, outcomes: results.map((x) => x.reason ?? x.outcome) },
        r.stderr,
      ).toEqual({ where, code: 0, outcomes: results.map(() => 'scan') });
      expect(results.length).toBeGreaterThan(0);
    }
  });

  it('try: a rejection exits 1 and says why; an unknown input exits 2 with the input meant', () => {
    const rejected = cli(
      'try',
      '-c',
      'config/example.yaml',
      '-i',
      'gi-scanner',
      ']d20109521234543214<GS>10LOT',
      'LOWER-case',
    );
    expect(rejected.code).toBe(1);
    expect(rejected.stdout).toMatch(/→ rejected: invalid GS1 data: .*check digit/);
    expect(rejected.stdout).toContain(
      '→ rejected: no rule matched the read from input gi-scanner (rules tried: pallet-sscc, gs1-serialised, gs1-batch, cell-at-goods-in)',
    );
    const unknown = cli('try', '-c', 'config/example.yaml', '-i', 'gi-scaner', 'X');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain(
      'scan-gateway try: no input "gi-scaner" in config/example.yaml; did you mean "gi-scanner"?',
    );
  });
});
