// Types of generate-ai-table.mjs for the TypeScript tests that import it.

/** The dictionary copy the table is generated from, relative to the repository root. */
export const DICTIONARY_PATH: string;
/** The generated file, relative to the repository root. */
export const OUTPUT_PATH: string;
/** AI → [title used, why it differs from the dictionary's]. */
export const TITLE_OVERRIDES: Readonly<Record<string, readonly [string, string]>>;

/** One dictionary entry in its notation; `spec` and `attrs` tokens are single-space separated. */
export interface DictionaryEntry {
  ais: string;
  flags: string;
  spec: string;
  attrs: string;
  title: string;
}

/** The dictionary's entries in order; throws on a line it cannot read. */
export function parseDictionary(text: string): DictionaryEntry[];

/** The content of src/gs1/ai-rows.generated.ts for the dictionary's text. */
export function generateAiRows(dictionaryText: string): string;
