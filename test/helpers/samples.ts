import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/paths.js';

/** `shared/samples/` beside the checkout, wherever the checkout is (CI clones it elsewhere). */
export const SAMPLES_DIR = join(PACKAGE_ROOT, '..', 'shared', 'samples');

/** The path of one sample file. */
export function samplePath(name: string): string {
  return join(SAMPLES_DIR, name);
}
