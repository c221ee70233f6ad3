import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CATALOGUE, HealthCodes, withErrorsTable } from '../../src/error-catalogue.js';
import { ErrorCodes } from '../../src/errors.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

describe('error codes', () => {
  const doc = readFileSync(join(PACKAGE_ROOT, 'docs/errors.md'), 'utf8');

  it('lists every code in docs/errors.md', () => {
    for (const code of [...Object.values(ErrorCodes), ...Object.values(HealthCodes)])
      expect(doc, code).toContain(`\`${code}\``);
  });

  it('the catalogue has every code once, each with a meaning and a what-to-do', () => {
    const codes = CATALOGUE.map((e) => e.code);
    expect(new Set(codes).size).toBe(codes.length);
    expect([...codes].sort()).toEqual(
      [...Object.values(ErrorCodes), ...Object.values(HealthCodes)].sort(),
    );
    for (const e of CATALOGUE) {
      expect(e.meaning.length, e.code).toBeGreaterThan(10);
      expect(e.whatToDo.length, e.code).toBeGreaterThan(5);
    }
  });

  it('the table in docs/errors.md is the one generated from the catalogue (npm run docs:errors)', () => {
    expect(doc).toBe(withErrorsTable(doc));
  });
});
