import { type ErrorCode, ErrorCodes, GatewayError } from './errors.js';
import { ERROR_ENTRIES } from './error-catalogue/error-codes.js';
import { HEALTH_ENTRIES, type HealthCode } from './error-catalogue/health-codes.js';

/**
 * What every stable code means and what a person should do about it: the one source of the table
 * in `docs/errors.md` (written by `npm run docs:errors`, checked by test/unit/errors-docs.test.ts)
 * and of the hints the health page shows beside each problem.
 *
 * Two families share the catalogue:
 * - `SCANGW_E_…` ({@link ErrorCodes}): errors the gateway raises (`GatewayError.code`), also used
 *   for a health problem whose cause is such an error (an input down, the upstream unreachable);
 * - `SCANGW_H_…` ({@link HealthCodes}): health conditions that are no thrown error (scans held,
 *   files refused, a high rejection rate…), raised by the rules of src/health/derive.ts.
 *
 * Texts are Markdown (backticks for keys, commands and file names); the page shows backticked
 * parts as code.
 */
export { HealthCodes, type HealthCode } from './error-catalogue/health-codes.js';

/** One code: what it means, and what to do. */
export interface CatalogueEntry {
  code: ErrorCode | HealthCode;
  meaning: string;
  whatToDo: string;
}

/**
 * Every code, in the order of `docs/errors.md`: the errors the gateway raises
 * (error-catalogue/error-codes.ts), then the health conditions (error-catalogue/health-codes.ts).
 */
export const CATALOGUE: readonly CatalogueEntry[] = [...ERROR_ENTRIES, ...HEALTH_ENTRIES];

const BY_CODE = new Map<string, CatalogueEntry>(CATALOGUE.map((e) => [e.code, e]));

/** The entry of `code`, or undefined for a code the catalogue does not know. */
export function catalogueEntry(code: string): CatalogueEntry | undefined {
  return BY_CODE.get(code);
}

/** The table of `docs/errors.md`, as Markdown (what `npm run docs:errors` writes). */
export function errorsTableMarkdown(): string {
  const cell = (text: string) => text.replace(/\|/g, '\\|');
  return [
    '| code | meaning | what to do |',
    '|---|---|---|',
    ...CATALOGUE.map((e) => `| \`${e.code}\` | ${cell(e.meaning)} | ${cell(e.whatToDo)} |`),
  ].join('\n');
}

/** Marks around the generated table in `docs/errors.md`; the text outside them is written by hand. */
export const ERRORS_TABLE_BEGIN =
  '<!-- BEGIN generated from src/error-catalogue.ts by npm run docs:errors -->';
export const ERRORS_TABLE_END = '<!-- END generated -->';

/**
 * `doc` (the text of `docs/errors.md`) with the table between the marks replaced by
 * {@link errorsTableMarkdown}. Throws when a mark is missing.
 */
export function withErrorsTable(doc: string): string {
  const begin = doc.indexOf(ERRORS_TABLE_BEGIN);
  const end = doc.indexOf(ERRORS_TABLE_END);
  if (begin < 0 || end < begin)
    throw new GatewayError(
      ErrorCodes.USAGE,
      `docs/errors.md must hold the marks ${ERRORS_TABLE_BEGIN} and ${ERRORS_TABLE_END}`,
    );
  return `${doc.slice(0, begin + ERRORS_TABLE_BEGIN.length)}\n${errorsTableMarkdown()}\n${doc.slice(end)}`;
}
