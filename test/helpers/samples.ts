import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/paths.js';

/** `samples/` in the repository: the realistic reads the tests, the README and the docs use. */
export const SAMPLES_DIR = join(PACKAGE_ROOT, 'samples');

/** The path of one sample file. */
export function samplePath(name: string): string {
  return join(SAMPLES_DIR, name);
}

const GS = '\x1d';

/** The frames of `serial-capture-line3.bin`, as latin1 text, in order (CR terminators removed). */
export const CAPTURE_FRAMES: readonly string[] = [
  `]d2010952123454321310B2611-03${GS}21C2611030001234`,
  `]d2010952123454321310B2611-03${GS}21C2611030001235`,
  'NOREAD',
  `]d2010952123454321310B2611-03${GS}21C2611030001236`,
  `]d2010952123454321310B2611-03${GS}21C2611030001236`,
  ']C100095212345678901235400PO-4711',
  `]d2010952123454321310B2611-03${GS}21C2611030001237`,
  '\xff\xfe\x00garbage\x80\x81',
  `]d20109521234543214${GS}10LOT`,
  ']d1C24A0K3B0712345',
  'ERROR',
];
