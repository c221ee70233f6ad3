import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import { BASE_CONFIG, problemLines, problemsOf } from '../helpers/config-problems.js';

const BASE = BASE_CONFIG;

const lines = problemLines;

describe('configuration of the mapping', () => {
  it('keeps digits as written where the schema wants text', () => {
    const cfg = parseConfigText(
      `${BASE}lookups:
  gtinToProduct:
    09521234543213: 0042
rules:
  - name: 4711
    match: { ais: [00, 01] }
    reference: { ai: 00 }
    productModelKey: { ai: 01, lookup: gtinToProduct }
    attributes: { plant: 007, flag: true }
`,
      'site.yaml',
    );
    expect(cfg.lookups).toEqual({ gtinToProduct: { '09521234543213': '0042' } });
    expect(cfg.rules[0]).toMatchObject({
      name: '4711',
      match: { ais: ['00', '01'] },
      reference: { ai: '00' },
      productModelKey: { ai: '01' },
      attributes: { plant: '007', flag: 'true' },
    });
  });

  it('fills the defaults of every mapping section', () => {
    const cfg = parseConfigText(`${BASE}rules:\n  - { name: all }\n`, 'site.yaml');
    expect(cfg.rules[0]).toEqual({
      name: 'all',
      match: {},
      reference: { code: 'whole' },
      attributes: {},
      sourceAttributes: true,
      parents: [],
    });
    expect(cfg.containers).toEqual([]);
    expect(cfg.lookups).toEqual({});
    expect(cfg.timeCheck).toEqual({
      maxAheadMs: 1_800_000,
      maxBehindMs: 2_592_000_000,
      action: 'flag',
    });
    expect(cfg.productCheck).toEqual({
      enabled: true,
      intervalMs: 3_600_000,
      rejectUnknown: false,
    });
    expect(cfg.dcps[0]?.attributes).toEqual({});
  });

  it.each([
    [
      'an unknown key, with the key meant at that place',
      `rules:\n  - { name: a, match: { regexp: '^A' } }\n`,
      ['8:25 rules[0].match.regexp: unknown key "regexp"; did you mean "regex"?'],
    ],
    [
      'an unknown key with no near match lists the keys there',
      `rules:\n  - { name: a, colour: red }\n`,
      [
        '8:16 rules[0].colour: unknown key "colour"; keys here: name, inputs, dcps, match, reference, dcp, productModelKey, supplierKey, clientKey, attributes, sourceAttributes, parents, requireContainer, timeFormat',
      ],
    ],
    [
      'an unknown key inside a value source (a union)',
      `rules:\n  - { name: a, productModelKey: { feild: product } }\n`,
      [
        '8:33 rules[0].productModelKey: say where the value comes from: one of code, ai, gs1, group, field, sourceDcp, value',
        '8:35 rules[0].productModelKey.feild: unknown key "feild"; did you mean "field"?',
      ],
    ],
    [
      'two sources in one value',
      `rules:\n  - { name: a, reference: { ai: '21', group: s } }\n`,
      [
        '8:27 rules[0].reference: give only one source, not ai and group',
        '8:46 rules[0].reference.group: takes the regex group "s", but there is no `match.regex` here',
      ],
    ],
    [
      'a fixed reference',
      `rules:\n  - { name: a, reference: { value: X } }\n`,
      [
        '8:36 rules[0].reference.value: a fixed reference would give every scan the same reference; take it from the code, an ai, a group or a field',
      ],
    ],
    [
      'an AI that does not exist',
      `rules:\n  - { name: a, match: { ais: ['89'] } }\n`,
      [
        '8:31 rules[0].match.ais[0]: is not a GS1 Application Identifier (see the GS1 General Specifications, section 3)',
      ],
    ],
    [
      'a regex group that does not exist',
      `rules:\n  - { name: a, match: { regex: '^(?<serial>\\d+)$' }, reference: { group: serail } }\n`,
      [
        '8:74 rules[0].reference.group: the regex has no group named "serail"; did you mean "serial"?; its named groups: serial',
      ],
    ],
    [
      'a regex that does not compile',
      `rules:\n  - { name: a, match: { regex: '^(A' } }\n`,
      [
        expect.stringMatching(
          /^8:32 rules\[0\]\.match\.regex: not a valid regular expression: .*Unterminated group/,
        ),
      ],
    ],
    [
      'a time format with an unknown letter',
      `rules:\n  - { name: a, timeFormat: 'dd.MM.yyyy hh:mm' }\n`,
      [
        expect.stringMatching(
          /^8:28 rules\[0\]\.timeFormat: "hh" at position 12 is not a pattern letter/,
        ),
      ],
    ],
    [
      'a lookup table that does not exist',
      `lookups: { gtinToProduct: {} }\nrules:\n  - { name: a, productModelKey: { ai: '01', lookup: gtinToProducts } }\n`,
      [
        '9:53 rules[0].productModelKey.lookup: unknown lookup table "gtinToProducts"; did you mean "gtinToProduct"?; tables in `lookups`: gtinToProduct',
      ],
    ],
    [
      'a DCP lookup table mapping to an unknown DCP',
      `lookups: { st: { A: GI-09 } }\nrules:\n  - { name: a, dcp: { sourceDcp: true, lookup: st } }\n`,
      ['7:21 lookups.st.A: "A" maps to "GI-09", which is not a configured DCP'],
    ],
    [
      'a fixed DCP that does not exist',
      `rules:\n  - { name: a, dcp: GI-1 }\n`,
      ['8:21 rules[0].dcp: unknown DCP "GI-1"; did you mean "GI-01"?; known: GI-01'],
    ],
    [
      'scopes naming unknown inputs and DCPs',
      `rules:\n  - { name: a, inputs: [gl], dcps: [GO-01] }\n`,
      [
        '8:25 rules[0].inputs[0]: unknown input "gl"; did you mean "gi"?; known: gi',
        '8:37 rules[0].dcps[0]: unknown DCP "GO-01"; did you mean "GI-01"?; known: GI-01',
      ],
    ],
    [
      'duplicate rule and container names',
      `rules:\n  - { name: a }\n  - { name: a }\ncontainers:\n  - { name: c, open: { gs1: true } }\n  - { name: c, open: { gs1: true } }\n`,
      [
        '9:13 rules[1].name: duplicate rule name "a"',
        '12:13 containers[1].name: duplicate container name "c"',
      ],
    ],
    [
      'a container without open, and an unknown option',
      `containers:\n  - { name: c, per: station }\n`,
      [
        '8:5 containers[0].open: required key is missing (expected object)',
        '8:21 containers[0].per: Invalid option: expected one of "input"|"dcp"',
      ],
    ],
    [
      'gs1: false with AIs',
      `rules:\n  - { name: a, match: { gs1: false, ais: ['01'] } }\n`,
      ['8:42 rules[0].match.ais: a code without GS1 data (gs1: false) carries no AIs'],
    ],
    [
      'an unknown input type, with the type meant',
      `${'inputs:\n  - { id: m, type: mqtts, dcp: GI-01 }\n'}`,
      [
        '7:20 inputs[1].type: unknown type "mqtts"; did you mean "mqtt"?; one of: files, serial, mqtt, tcp, http',
      ],
    ],
  ])('reports %s with its line', (_what, extra, expected) => {
    const text = extra.startsWith('inputs:') ? BASE + extra.replace('inputs:\n', '') : BASE + extra;
    expect(lines(text)).toEqual(expected);
  });

  it('reports mistakes in every section at once, cross-references included', () => {
    const text =
      BASE.replace('Europe/Berlin', 'Europe/Berln').replace('dcp: GI-01 }', 'dcp: GI-02 }') +
      `rules:\n  - { name: a, dcp: NOPE }\n`;
    expect(problemsOf(text).map((p) => p.path)).toEqual([
      'site.timezone',
      'inputs[0].dcp',
      'rules[0].dcp',
    ]);
  });
});
