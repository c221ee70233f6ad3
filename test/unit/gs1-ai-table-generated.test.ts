import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DICTIONARY_PATH,
  OUTPUT_PATH,
  TITLE_OVERRIDES,
  generateAiRows,
  parseDictionary,
} from '../../scripts/generate-ai-table.mjs';
import { allAis, lookupAi } from '../../src/gs1/ai-table.js';
import { lint } from '../../src/gs1/linters.js';

const ROOT = join(import.meta.dirname, '..', '..');
const dictionary = readFileSync(join(ROOT, DICTIONARY_PATH), 'utf8');

describe('the AI table generated from the GS1 Barcode Syntax Dictionary copy', () => {
  it('is checked in exactly as the dictionary in data/gs1 gives it (npm run gs1:table)', () => {
    expect(readFileSync(join(ROOT, OUTPUT_PATH), 'utf8')).toBe(generateAiRows(dictionary));
  });

  it('holds every AI of the dictionary with its format, pairings and Digital Link role', () => {
    const entries = parseDictionary(dictionary);
    let ais = 0;
    for (const e of entries) {
      const [from = '', to = from] = e.ais.split('-');
      for (let n = Number(from); n <= Number(to); n++) {
        const ai = String(n).padStart(from.length, '0');
        const def = lookupAi(ai);
        expect(def, ai).toBeDefined();
        expect(def?.predefinedLength, ai).toBe(e.flags.includes('*'));
        expect(def?.dlAttribute, ai).toBe(e.flags.includes('?'));
        expect(def?.title, ai).toBe(TITLE_OVERRIDES[ai]?.[0] ?? e.title);
        expect(def?.dlQualifiers !== undefined, ai).toBe(/(^| )dlpkey/.test(e.attrs));
        ais++;
      }
    }
    expect(allAis()).toHaveLength(ais);
    // The relationships the 2026-07-27 release changed, read back through the parser's table.
    expect(lookupAi('03')?.excludes).toEqual(['01', '02', '37', '235']);
    expect(lookupAi('7240')?.requires).toEqual([[['01'], ['8006']]]);
    expect(lookupAi('7240')?.excludes).toEqual(['03']);
    expect(lookupAi('250')?.requires).toEqual([
      [
        ['01', '21'],
        ['03', '21'],
        ['8006', '21'],
      ],
    ]);
    expect(lookupAi('7020')?.requires).toEqual([
      [
        ['01', '416'],
        ['03', '416'],
        ['8006', '416'],
      ],
    ]);
    expect(lookupAi('8026')?.excludes).toEqual(['02', '03', '8006']);
  });

  it('names only checks the parser implements', () => {
    const names = new Set(allAis().flatMap((d) => d.components.flatMap((c) => c.linters)));
    for (const name of names) {
      const result = lint(name, '1', { referenceYear: 2026 });
      expect(result, name).toHaveProperty('ok');
    }
  });

  it('refuses a dictionary line it cannot read, naming the line', () => {
    expect(() => generateAiRows('01  *?  N14,csum  frobnicate=1  # GTIN\n')).toThrow(
      /gs1-syntax-dictionary\.txt:1: unknown attribute "frobnicate=1"/,
    );
    expect(() => generateAiRows('# only comments\n99  ?  X..90\n')).toThrow(/AI 99 has no title/);
  });
});
