import type { IntakeRecord } from '../../src/buffer/store.js';

/** A scan record for buffer tests: reference, DCP, received and scanned at `at` (ms), a minimal JSON body. */
export function scanAt(reference: string, dcpKey: string, at: number): IntakeRecord {
  const body = JSON.stringify({ reference });
  return { inputId: 'in', receivedAt: new Date(at), raw: Buffer.from(reference), outcome: 'scan', scan: { reference, dcpKey, instant: new Date(at), body } };
}
