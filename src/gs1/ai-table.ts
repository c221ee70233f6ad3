import { ErrorCodes, GatewayError } from '../errors.js';
import { AI_ROWS, type AiRow } from './ai-rows.generated.js';

/**
 * The GS1 Application Identifier table: for every AI its title, the format of its data field
 * (components with character set, length and content checks), whether a GS separator must follow
 * it, its requisite and invalid pairings, and its role in a GS1 Digital Link URI.
 *
 * Source: the GS1 Barcode Syntax Dictionary (github.com/gs1/gs1-syntax-dictionary, Apache-2.0), whose
 * copy in data/gs1/ (release and source in its README) `scripts/generate-ai-table.mjs` turns into
 * `ai-rows.generated.ts` (`npm run gs1:table`); a unit test fails when the two disagree. The
 * dictionary states in machine-readable form what the GS1 General Specifications state in section 3
 * (AI definitions), 4.14 (requisite and invalid AI pairings) and figure 7.8.5-2 (AIs of predefined
 * length, no separator). The rows keep the dictionary's notation, expanded here:
 *
 * - flags: `*` predefined length (no GS needed after it), `?` allowed as a Digital Link query attribute;
 * - spec: components `N` (digits), `X` (CSET 82), `Y` (CSET 39), `Z` (CSET 64), `N6` fixed length,
 *   `X..20` 1 to 20, `[...]` optional, `,name` a content check ({@link LinterName});
 * - attributes: `req=01,8006` needs one of them (`01+21`: both), `ex=02` must not appear together
 *   (`310n` / `31nn`: any AI with that prefix), `dlpkey=22,10,21|235` a Digital Link primary key
 *   with its ordered key qualifiers (alternatives after `|`).
 *
 * Titles are the dictionary's but for the few the generator names (`TITLE_OVERRIDES`): AI 17 is
 * `USE BY OR EXPIRY` as in the General Specifications, and AIs 8110 and 8112, untitled there, keep
 * the titles readers already see.
 */

/** Character sets of AI data (General Specifications figure 7.11-1 and 7.11-2, 7.11-3). */
export type CharacterSet = 'N' | 'X' | 'Y' | 'Z';

/** Content checks applied to a component after its character set (see `linters.ts`). */
export type LinterName =
  | 'csum'
  | 'csumalpha'
  | 'gcppos1'
  | 'gcppos2'
  | 'yymmd0'
  | 'yymmdd'
  | 'yyyymmdd'
  | 'hh'
  | 'mi'
  | 'ss'
  | 'hhmi'
  | 'zero'
  | 'nonzero'
  | 'nozeroprefix'
  | 'pieceoftotal'
  | 'yesno'
  | 'winding'
  | 'hyphen'
  | 'hasnondigit'
  | 'iso3166'
  | 'iso3166999'
  | 'iso3166alpha2'
  | 'iso4217'
  | 'iso5218'
  | 'pcenc'
  | 'posinseqslash'
  | 'latitude'
  | 'longitude'
  | 'mediatype'
  | 'importeridx'
  | 'packagetype'
  | 'iban'
  | 'couponcode'
  | 'couponposoffer';

/** One part of an AI's data field, e.g. the N13 GLN of AI 253 or the optional X..17 serial after it. */
export interface AiComponent {
  cset: CharacterSet;
  /** Minimum length in characters when present (equals `max` for fixed-length parts). */
  min: number;
  max: number;
  optional: boolean;
  linters: readonly LinterName[];
}

/** Everything the parser needs to know about one AI. */
export interface AiDefinition {
  /** The AI, 2 to 4 digits. */
  ai: string;
  /** GS1 data title, e.g. `BATCH/LOT`. */
  title: string;
  components: readonly AiComponent[];
  /** Sum of the mandatory components' minimum lengths. */
  minLength: number;
  /** Sum of all components' maximum lengths. */
  maxLength: number;
  /** Predefined length (figure 7.8.5-2): no GS separator is needed after the value. */
  predefinedLength: boolean;
  /** May appear as a GS1 Digital Link query attribute. */
  dlAttribute: boolean;
  /**
   * Requisites: every group must be satisfied; a group is satisfied when all AIs of one of its
   * alternatives are present. AIs may be patterns (`31nn`).
   */
  requires: readonly (readonly (readonly string[])[])[];
  /** AIs (or patterns) that must not appear together with this AI. */
  excludes: readonly string[];
  /** When this AI is a Digital Link primary key: the allowed qualifier sequences, in path order. */
  dlQualifiers?: readonly (readonly string[])[];
  /** Decimal places of the value for measures and amounts (the last digit of AIs 31nn–36nn, 39nn). */
  decimals?: number;
}

function parseComponent(token: string): AiComponent {
  let text = token;
  let optional = false;
  if (text.startsWith('[')) {
    optional = true;
    text = text.replace('[', '').replace(']', '');
  }
  const [type = '', ...linters] = text.split(',');
  const match = /^([NXYZ])(\.\.)?(\d+)$/.exec(type);
  if (!match) throw new GatewayError(ErrorCodes.INTERNAL, `AI table: bad component "${token}"`);
  const max = Number(match[3]);
  return {
    cset: match[1] as CharacterSet,
    min: match[2] ? 1 : max,
    max,
    optional,
    linters: linters as LinterName[],
  };
}

function expandRange(ais: string): string[] {
  const [from = '', to] = ais.split('-');
  if (to === undefined) return [from];
  const out: string[] = [];
  for (let n = Number(from); n <= Number(to); n++) out.push(String(n).padStart(from.length, '0'));
  return out;
}

function buildTable(rows: readonly AiRow[]): Map<string, AiDefinition> {
  const table = new Map<string, AiDefinition>();
  for (const [ais, flags, spec, attrs, title] of rows) {
    const components = spec.split(/\s+/).map(parseComponent);
    const requires: string[][][] = [];
    let excludes: string[] = [];
    let dlQualifiers: string[][] | undefined;
    for (const attr of attrs.split(/\s+/).filter((a) => a !== '')) {
      if (attr.startsWith('req='))
        requires.push(
          attr
            .slice(4)
            .split(',')
            .map((alt) => alt.split('+')),
        );
      else if (attr.startsWith('ex=')) excludes = excludes.concat(attr.slice(3).split(','));
      else if (attr === 'dlpkey') dlQualifiers = [[]];
      else if (attr.startsWith('dlpkey='))
        dlQualifiers = attr
          .slice(7)
          .split('|')
          .map((seq) => seq.split(','));
      else
        throw new GatewayError(ErrorCodes.INTERNAL, `AI table: bad attribute "${attr}" for ${ais}`);
    }
    for (const ai of expandRange(ais)) {
      const measure = /^3[1-6]\d\d$/.test(ai) || /^39[0-5]\d$/.test(ai);
      table.set(ai, {
        ai,
        title,
        components,
        minLength: components.reduce((sum, c) => sum + (c.optional ? 0 : c.min), 0),
        maxLength: components.reduce((sum, c) => sum + c.max, 0),
        predefinedLength: flags.includes('*'),
        dlAttribute: flags.includes('?'),
        requires,
        excludes,
        ...(dlQualifiers ? { dlQualifiers } : {}),
        ...(measure ? { decimals: Number(ai.slice(-1)) } : {}),
      });
    }
  }
  return table;
}

const TABLE = buildTable(AI_ROWS);

/**
 * The length of every AI beginning with the same two digits (GS1 keeps it uniform so that an AI
 * can be found in unseparated data). Prefixes absent from the map begin no AI.
 */
const AI_LENGTH_BY_PREFIX: ReadonlyMap<string, number> = new Map(
  [...TABLE.keys()].map((ai) => [ai.slice(0, 2), ai.length] as const),
);

/** The definition of an AI, or `undefined` when GS1 has not assigned it. */
export function lookupAi(ai: string): AiDefinition | undefined {
  return TABLE.get(ai);
}

/**
 * How many digits an AI starting with these two digits has (2, 3 or 4), or `undefined` when no AI
 * starts with them (e.g. `89`).
 */
export function aiLengthForPrefix(twoDigits: string): number | undefined {
  return AI_LENGTH_BY_PREFIX.get(twoDigits);
}

/** Every defined AI, in table order (for tests and documentation). */
export function allAis(): readonly AiDefinition[] {
  return [...TABLE.values()];
}

/** `AI 01 (GTIN)`: how reasons name an AI. Unknown AIs are named by number alone. */
export function describeAi(ai: string): string {
  const def = TABLE.get(ai);
  return def ? `AI ${ai} (${def.title})` : `AI ${ai}`;
}

/**
 * Whether an AI matches a pattern of the table's `req=` / `ex=` attributes: either the AI itself,
 * or a prefix followed by `n` placeholders (`310n`, `31nn`) standing for any digit.
 */
export function aiMatchesPattern(ai: string, pattern: string): boolean {
  if (ai.length !== pattern.length) return false;
  const prefix = pattern.replace(/n+$/, '');
  return ai.startsWith(prefix);
}
