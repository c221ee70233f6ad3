import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

// The suite's own hygiene (test/setup/scratch.ts): what a test makes under os.tmpdir() lands in
// the run's scratch directory, which the run removes, and not in /tmp for good.
describe('the test run scratch directory', () => {
  it('is the TMPDIR of the test workers, open to service users as /tmp is', () => {
    const scratch = process.env.SCAN_GATEWAY_TEST_SCRATCH;
    expect(scratch).toBeDefined();
    expect(tmpdir()).toBe(scratch);
    expect(basename(scratch!)).toMatch(/^sgt-/);
    expect(statSync(scratch!).mode & 0o7777).toBe(0o1777);
    const made = mkdtempSync(join(tmpdir(), 'sg-scratch-'));
    expect(dirname(made)).toBe(scratch);
  });
});
