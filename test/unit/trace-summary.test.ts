import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { queriesOf } from '../helpers/queries.js';

/** The genealogy line of a relative (trace, /api/v1/items) on a real SQLite file. */

function scan(
  reference: string,
  dcpKey: string,
  instantIso: string,
  parents: string[] = [],
): IntakeRecord {
  const instant = new Date(instantIso);
  const body = JSON.stringify({
    reference,
    timeStamp: instantIso.slice(0, 19),
    dcpKey,
    productModelKey: 'PACK-A',
    parents,
    attributes: [],
  });
  return {
    inputId: 'plc',
    receivedAt: new Date('2026-11-27T10:00:00Z'),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: { reference, dcpKey, instant, body },
  };
}

describe("trace's line of a relative", () => {
  it('takes the DCP, state and time of one scan, the one stored last, even when an earlier one has a later time', () => {
    const store = BufferStore.openAt(
      join(mkdtempSync(join(tmpdir(), 'sg-trace-summary-')), 'buffer.db'),
    );
    try {
      // The pack at end of line, then at Goods Out with a source time before the end-of-line scan.
      store.intake.commitIntake(
        [
          scan('PK-1', 'EOL-3', '2026-11-27T09:30:00Z'),
          scan('PK-1', 'GO-01', '2026-11-27T09:10:00Z'),
          scan('MOD-1', 'MA-3', '2026-11-27T09:00:00Z', ['PK-1']),
        ],
        Date.parse('2026-11-27T10:00:00Z'),
      );
      const t = queriesOf(store).trace('MOD-1');
      expect(t.parents).toMatchObject([
        {
          reference: 'PK-1',
          scans: 2,
          lastDcp: 'GO-01',
          lastState: 'pending',
          lastAt: expect.stringMatching(/^2026-11-27T09:10:00/),
        },
      ]);
    } finally {
      store.close();
    }
  });
});
