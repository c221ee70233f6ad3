import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/errors.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

describe('error codes', () => {
  it('lists every code in docs/errors.md', () => {
    const doc = readFileSync(join(PACKAGE_ROOT, 'docs/errors.md'), 'utf8');
    for (const code of Object.values(ErrorCodes)) expect(doc, code).toContain(`\`${code}\``);
  });
});
