// `npm run gs1:table`: writes src/gs1/ai-rows.generated.ts, the rows of the GS1 Application
// Identifier table, from the repository's copy of the GS1 Barcode Syntax Dictionary
// (data/gs1/gs1-syntax-dictionary.txt; source, release and licence in data/gs1/README.md).
// `--check` writes nothing and exits 1 when the checked-in file differs from what the dictionary
// gives. test/unit/gs1-ai-table-generated.test.ts runs the same comparison in the unit suite.
//
// One row per dictionary entry, in the dictionary's order and notation (AIs, flags, specification,
// attributes, title), so a reader can hold the two side by side; src/gs1/ai-table.ts expands the
// rows into definitions. Plain JavaScript so that it runs without a build.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const DICTIONARY_PATH = 'data/gs1/gs1-syntax-dictionary.txt';
export const OUTPUT_PATH = 'src/gs1/ai-rows.generated.ts';

/**
 * Titles that differ from the dictionary's, with the reason. Every other title is the dictionary's.
 * These are the names readers and the upstream service already see in reasons and element titles.
 */
export const TITLE_OVERRIDES = {
  17: ['USE BY OR EXPIRY', 'the data title of the GS1 General Specifications'],
  8110: ['COUPON CODE', 'the dictionary gives none (the General Specifications: "-")'],
  8112: ['COUPON POS OFFER', 'the dictionary gives none (the General Specifications: "-")'],
};

const FLAG_CHARACTERS = /^[*!?"$%&'()+,\-./:;<=>@[\\\]^_`{|}~]+$/;
const COMPONENT = /^\[?[NXYZ](\.\.)?\d+\]?(,[a-z0-9]+)*$/;
const ATTRIBUTE = /^(req=|ex=|dlpkey(=|$))/;

/**
 * The dictionary's entries: `{ ais, flags, spec, attrs, title }`, each a string, `spec` and `attrs`
 * with single spaces between their tokens. Throws on a line it cannot read, naming it.
 */
export function parseDictionary(text) {
  const entries = [];
  const lines = text.split('\n');
  lines.forEach((raw, index) => {
    const line = raw.replace(/\r$/, '');
    if (/^\s*(#|$)/.test(line)) return;
    const hash = line.indexOf('#');
    const body = hash >= 0 ? line.slice(0, hash) : line;
    const title = hash >= 0 ? line.slice(hash + 1).trim() : '';
    const tokens = body.trim().split(/\s+/);
    const fail = (why) => {
      throw new Error(`${DICTIONARY_PATH}:${index + 1}: ${why}: ${line}`);
    };
    const ais = tokens.shift() ?? '';
    if (!/^\d{2,4}(-\d{2,4})?$/.test(ais)) fail('no AI or AI range first');
    let flags = '';
    if (tokens[0] !== undefined && FLAG_CHARACTERS.test(tokens[0])) flags = tokens.shift() ?? '';
    const spec = [];
    while (tokens[0] !== undefined && COMPONENT.test(tokens[0])) spec.push(tokens.shift());
    if (spec.length === 0) fail('no specification');
    const attrs = [];
    for (const token of tokens) {
      if (!ATTRIBUTE.test(token)) fail(`unknown attribute "${token}"`);
      attrs.push(token);
    }
    entries.push({ ais, flags, spec: spec.join(' '), attrs: attrs.join(' '), title });
  });
  return entries;
}

function quote(text) {
  return `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

/** The content of src/gs1/ai-rows.generated.ts for the dictionary's text. */
export function generateAiRows(dictionaryText) {
  const digest = createHash('sha256').update(dictionaryText).digest('hex');
  const entries = parseDictionary(dictionaryText);
  const seen = new Set();
  const rows = entries.map((e) => {
    seen.add(e.ais);
    const override = TITLE_OVERRIDES[e.ais];
    const title = override ? override[0] : e.title;
    if (title === '')
      throw new Error(`${DICTIONARY_PATH}: AI ${e.ais} has no title and no override`);
    const cells = [e.ais, e.flags, e.spec, e.attrs, title].map(quote).join(', ');
    const note = override ? ` // dictionary: ${JSON.stringify(e.title)}` : '';
    return `  [${cells}],${note}`;
  });
  for (const ai of Object.keys(TITLE_OVERRIDES))
    if (!seen.has(ai)) throw new Error(`title override for AI ${ai}, which the dictionary lacks`);
  const overrides = Object.entries(TITLE_OVERRIDES).map(
    ([ai, [title, why]]) => `//   AI ${ai}: ${JSON.stringify(title)}, ${why}.`,
  );
  return [
    '// GENERATED FILE, do not edit. Written by scripts/generate-ai-table.mjs (`npm run gs1:table`)',
    `// from ${DICTIONARY_PATH} (sha256 ${digest}),`,
    '// the GS1 Barcode Syntax Dictionary, Apache-2.0; source and release in data/gs1/README.md.',
    '// test/unit/gs1-ai-table-generated.test.ts fails when this file and the dictionary disagree.',
    '// Titles not taken from the dictionary (TITLE_OVERRIDES in the generator):',
    ...overrides,
    '',
    '/**',
    ' * One dictionary entry: AI or range `3100-3105`, flags, data specification, attributes, title,',
    ' * in the dictionary notation that `ai-table.ts` documents and expands.',
    ' */',
    'export type AiRow = readonly [ais: string, flags: string, spec: string, attrs: string, title: string];',
    '',
    '/** Every entry of the GS1 Barcode Syntax Dictionary, in its order. */',
    'export const AI_ROWS: readonly AiRow[] = [',
    ...rows,
    '];',
    '',
  ].join('\n');
}

const isMain = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1];
if (isMain) {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  const content = generateAiRows(readFileSync(join(root, DICTIONARY_PATH), 'utf8'));
  const target = join(root, OUTPUT_PATH);
  if (process.argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(target, 'utf8');
    } catch {
      // A missing file differs like any other.
    }
    if (current !== content) {
      console.error(`${OUTPUT_PATH} is not what ${DICTIONARY_PATH} gives: run npm run gs1:table`);
      process.exit(1);
    }
    console.log(`${OUTPUT_PATH} matches ${DICTIONARY_PATH}`);
  } else {
    writeFileSync(target, content);
    console.log(`wrote ${OUTPUT_PATH} from ${DICTIONARY_PATH}`);
  }
}
