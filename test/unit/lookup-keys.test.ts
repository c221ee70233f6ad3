import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import { lookupKeyNotes } from '../../src/config/lookup-keys.js';

const config = (lookups: string) => `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps:
  - { key: ST-10, kind: startOfProcess, productModelKey: CELL }
inputs:
  - { id: st10, type: serial, path: /dev/null, dcp: ST-10 }
rules:
  - name: cells
    match: { ais: ['01'] }
    productModelKey: { ai: '01', lookup: gtinToProduct }
lookups:
${lookups}
`;

describe('config check: lookup keys no read can match', () => {
  it('names a GTIN key with a wrong check digit, and one of the wrong length, in a lookup fed by AI 01', () => {
    const notes = lookupKeyNotes(
      parseConfigText(
        config(
          `  gtinToProduct: { "09521234543213": CELL-A, "09521234543214": CELL-B, "9521234543213": CELL-C }`,
        ),
        'lookups.yaml',
      ),
    );
    expect(notes.map((n) => n.where)).toEqual([
      'lookups.gtinToProduct["09521234543214"]',
      'lookups.gtinToProduct["9521234543213"]',
    ]);
    expect(notes[0]!.message).toMatch(
      /no read can match this key: the table is fed by AI 01 \(rules\[cells\]\.productModelKey\).*check digit/i,
    );
  });

  it('has nothing to say about valid keys, or tables not fed by an AI', () => {
    expect(
      lookupKeyNotes(
        parseConfigText(
          config(`  gtinToProduct: { "09521234543213": CELL-A }\n  other: { x: y }`),
          'ok.yaml',
        ),
      ),
    ).toEqual([]);
  });
});
