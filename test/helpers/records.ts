import type { IntakeRecord } from '../../src/buffer/store.js';

/** A scan record for buffer tests: reference, DCP, received and scanned at `at` (ms), a minimal JSON body. */
export function scanAt(reference: string, dcpKey: string, at: number): IntakeRecord {
  const body = JSON.stringify({ reference });
  return {
    inputId: 'in',
    receivedAt: new Date(at),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: { reference, dcpKey, instant: new Date(at), body },
  };
}

/** A scan record (DCP GI-01, at the epoch) whose JSON body is exactly `bytes` long: for byte-exact packing tests. */
export function scanRecord(reference: string, bytes: number): IntakeRecord {
  const skeleton = JSON.stringify({ reference, pad: '' });
  const body = JSON.stringify({ reference, pad: 'x'.repeat(bytes - skeleton.length) });
  if (Buffer.byteLength(body) !== bytes)
    throw new RangeError(`a body of ${bytes} bytes cannot hold reference ${reference}`);
  return {
    inputId: 'in',
    receivedAt: new Date(0),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: { reference, dcpKey: 'GI-01', instant: new Date(0), body },
  };
}
