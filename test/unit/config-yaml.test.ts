import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import { BASE_CONFIG, problemLines, problemsOf } from '../helpers/config-problems.js';

/** YAML-level problems: duplicate keys, aliases and anchors, merge keys, tabs. */

const GOOD = BASE_CONFIG;

const lines = problemLines;

/** A config with a `lookups` table of `n` entries (K0000000…), plus `extra` lines in the table. */
function withTable(n: number, extra = ''): string {
  const rows: string[] = [];
  for (let i = 0; i < n; i++) rows.push(`    K${String(i).padStart(7, '0')}: PACK-A\n`);
  return `${GOOD}lookups:\n  big:\n${rows.join('')}${extra}`;
}

describe('duplicate keys', () => {
  it('are refused with the key, its line and the line of the first', () => {
    const text = `${GOOD}lookups:\n  stations:\n    GI-01: GI-01\n    GI-02: GI-01\n    GI-01: GI-02\n`;
    expect(lines(text)).toEqual([
      '11:5 lookups.stations.GI-01: duplicate key "GI-01" (first at line 9)',
    ]);
  });

  it('are found in flow maps, in list items and at the top level', () => {
    const text =
      GOOD.replace('kind: goodsIn,', 'kind: goodsIn, key: GI-02,') +
      'site: { id: s2, timezone: UTC }\n';
    expect(lines(text)).toEqual([
      '4:34 dcps[0].key: duplicate key "key" (first at line 4)',
      '7:1 site: duplicate key "site" (first at line 1)',
    ]);
  });

  it('compares lookup keys as written: 01 and 1 are two GS1 keys, "1" and 1 elsewhere are one', () => {
    const cfg = parseConfigText(`${GOOD}lookups:\n  ais:\n    01: A\n    1: B\n`, 'site.yaml');
    expect(cfg.lookups).toEqual({ ais: { '01': 'A', '1': 'B' } });
    expect(lines(`${GOOD}lookups:\n  t: { 1: A, "1": B }\n`)).toEqual([
      '8:14 lookups.t.1: duplicate key "1" (first at line 8)',
    ]);
  });

  // Behaviour only; how long a large table takes is measured outside the tests (the library's own
  // check was quadratic: minutes for 100,000 entries).
  it('are found in a 20,000-entry table', () => {
    const problems = problemsOf(withTable(20_000, '    K0000007: MOD-48V\n'));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({
      line: 20_009,
      path: 'lookups.big.K0000007',
      message: 'duplicate key "K0000007" (first at line 16)',
    });
  });
});

describe('aliases and anchors', () => {
  it('an alias without its anchor is a problem with its line', () => {
    expect(lines('site: *nothere\n')).toEqual([
      '1:7 site: unresolved alias *nothere: no anchor &nothere before it',
    ]);
    expect(lines(`${GOOD}lookups:\n  t: { a: *later }\n  u: &later { b: c }\n`)).toEqual([
      '8:11 lookups.t.a: unresolved alias *later: no anchor &later before it',
    ]);
  });

  it('an alias bomb is refused at the alias that makes it too large, before it is expanded', () => {
    const bomb = [
      'a: &a [x, x, x, x, x, x, x, x, x, x]',
      ...'bcdefghij'.split('').map((n, i) => {
        const prev = 'abcdefghij'[i]!;
        return `${n}: &${n} [${Array(10).fill(`*${prev}`).join(', ')}]`;
      }),
    ].join('\n');
    const problems = problemsOf(`${bomb}\n`);
    expect(problems).toHaveLength(1);
    expect(problems[0]?.line).toBeGreaterThan(1);
    expect(problems[0]?.message).toMatch(
      /^aliases expand to more than 100000 values \(an alias bomb\?\); \*[a-j] alone stands for \d+$/,
    );
  });

  it('an alias inside the node it names is a problem, not an endless structure', () => {
    expect(lines(`${GOOD}lookups: &l\n  t: *l\n`)).toEqual([
      '8:6 lookups.t: alias *l is inside the node &l it names: it would never end',
    ]);
  });

  it('an anchor may be used more than 100 times (the library refused that as an attack)', () => {
    const rows = Array.from({ length: 150 }, (_, i) => `    k${i}: *p\n`).join('');
    const cfg = parseConfigText(`${GOOD}lookups:\n  t:\n    k: &p PACK-A\n${rows}`, 'site.yaml');
    expect(Object.values(cfg.lookups.t!).every((v) => v === 'PACK-A')).toBe(true);
    expect(Object.keys(cfg.lookups.t!)).toHaveLength(151);
  });
});

describe('merge keys', () => {
  it('<< takes the keys of an anchored entry in dcps and inputs; keys written win', () => {
    const text = `site: { id: s1, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:8090, authUrl: http://127.0.0.1:8090, clientId: c1 }
dcps:
  - &gi { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1, attributes: { hall: '3' } }
  - { <<: *gi, key: GI-02 }
inputs:
  - &scanner { id: gi-1, type: serial, path: /dev/ttyS0, baudRate: 19200, dcp: GI-01 }
  - <<: *scanner
    id: gi-2
    path: /dev/ttyS1
    dcp: GI-02
`;
    const cfg = parseConfigText(text, 'site.yaml');
    expect(cfg.dcps[1]).toMatchObject({
      key: 'GI-02',
      kind: 'goodsIn',
      productModelKey: 'PACK-A',
      supplierKey: 'SUP-1',
      attributes: { hall: '3' },
    });
    expect(cfg.inputs[1]).toMatchObject({
      id: 'gi-2',
      type: 'serial',
      path: '/dev/ttyS1',
      baudRate: 19200,
      dcp: 'GI-02',
    });
    expect(cfg.inputs[0]).toMatchObject({ id: 'gi-1', path: '/dev/ttyS0' });
  });

  it('<< with a list merges several; a mistake in a merged entry is still found', () => {
    const text = GOOD.replace(
      'dcps:\n',
      'dcps:\n  - &kind { key: X-01, kind: startOfProcess }\n  - &attrs { key: X-02, kind: endOfProcess, attributes: { line: L3 } }\n  - { <<: [*kind, *attrs], key: X-03, productModelKy: M }\n',
    );
    const problems = problemsOf(text);
    expect(problems.map((p) => `${p.line} ${p.path}`)).toEqual(['6 dcps[2].productModelKy']);
  });

  it('<< with a value that is not a map is a problem with its line', () => {
    expect(
      lines(GOOD.replace('dcps:\n', 'dcps:\n  - { <<: GI, key: X-01, kind: startOfProcess }\n')),
    ).toEqual([
      '4:11 dcps[0].<<: a merge key (<<) takes a map, an alias of one (*name), or a list of them',
    ]);
  });
});

describe('YAML syntax', () => {
  it('a tab as indentation says to indent with spaces', () => {
    const problems = problemsOf(
      GOOD.replace('  clientId: c1', 'x').replace(
        'site: { id: s1, timezone: Europe/Berlin }',
        'site:\n\tid: s1',
      ),
    );
    expect(problems[0]).toMatchObject({ line: 2 });
    expect(problems[0]?.message).toBe(
      'a tab indents this line: YAML indents with spaces only; at `id: s1` [YAML: Tabs are not allowed as indentation]',
    );
  });
});
