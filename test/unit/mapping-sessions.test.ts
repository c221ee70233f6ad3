import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import type { Read } from '../../src/inputs/types.js';
import { DuplicateWindow } from '../../src/mapping/duplicate-window.js';
import { Mapper } from '../../src/mapping/mapper.js';
import type { MapOutcome } from '../../src/mapping/outcome.js';

const BASE = `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1, duplicateWindowMs: 2000 }
  - { key: GO-01, kind: goodsOut, productModelKey: PACK-A, clientKey: CL-7, duplicateWindowMs: 0 }
  - { key: SOP-3, kind: startOfProcess, productModelKey: MOD-48V, duplicateWindowMs: 10000 }
inputs:
  - { id: gi-a, type: serial, path: /dev/null, dcp: GI-01 }
  - { id: gi-b, type: serial, path: /dev/null, dcp: GI-01 }
  - { id: go, type: serial, path: /dev/null, dcp: GO-01 }
  - { id: plc, type: serial, path: /dev/null, dcp: SOP-3 }
containers:
  - name: pallet
    dcps: [GI-01]
    open: { ais: ['00'] }
    reference: { ai: '00' }
    close: { regex: '^END$' }
    idleTimeoutMs: 60000
  - name: outgoing
    inputs: [go]
    per: dcp
    open: { regex: '^PAL-' }
    idleTimeoutMs: 0
  - name: tray
    inputs: [plc]
    per: dcp
    open: { ais: ['8004'] }
    reference: { ai: '8004' }
    sendParent: false
  - name: box
    inputs: [plc]
    open: { regex: '^BOX-(?<box>\\d+)$' }
    reference: { group: box }
`;

const SSCC_1 = ']C100095212345678901235';
const SSCC_2 = ']C100095212345678901242';
const TRAY = ']C18004952123400001234';

function mapper(extra = ''): Mapper {
  return new Mapper(parseConfigText(BASE + extra, 'sessions.yaml'));
}

let clock = Date.parse('2026-11-18T06:00:00Z');
function read(inputId: string, text: string, afterMs = 1000, over: Partial<Read> = {}): Read {
  clock += afterMs;
  return { inputId, raw: Buffer.from(text), receivedAt: new Date(clock), ...over };
}

/** A compact view of an outcome: reference and parents of a scan, or outcome and reason. */
function brief(o: MapOutcome): string {
  if (o.outcome === 'scan') return `${o.scan.reference} ← [${o.scan.parents.join(',')}]`;
  return `${o.outcome}: ${o.outcome === 'rejected' ? o.reason : (o.reason ?? '')}`;
}

describe('container sessions', () => {
  it.each([
    {
      what: 'a pallet SSCC opens, the items after it get it as parent, a closing code ends it',
      reads: [
        ['gi-a', 'C1'],
        ['gi-a', SSCC_1],
        ['gi-a', 'C2'],
        ['gi-a', 'C3'],
        ['gi-a', 'END'],
        ['gi-a', 'C4'],
      ],
      expected: [
        'C1 ← []',
        `${SSCC_1} ← []`,
        'C2 ← [095212345678901235]',
        'C3 ← [095212345678901235]',
        'noRead: closing code of container pallet at gi-a: closes 095212345678901235',
        'C4 ← []',
      ],
    },
    {
      what: 'another parent replaces the open one',
      reads: [
        ['gi-a', SSCC_1],
        ['gi-a', 'C1'],
        ['gi-a', SSCC_2],
        ['gi-a', 'C2'],
      ],
      expected: [
        `${SSCC_1} ← []`,
        'C1 ← [095212345678901235]',
        `${SSCC_2} ← []`,
        'C2 ← [095212345678901242]',
      ],
    },
    {
      what: 'sessions are per input by default: another scanner at the same DCP has its own',
      reads: [
        ['gi-a', SSCC_1],
        ['gi-b', 'C1'],
        ['gi-a', 'C2'],
      ],
      expected: [`${SSCC_1} ← []`, 'C1 ← []', 'C2 ← [095212345678901235]'],
    },
    {
      what: 'an idle timeout closes the container; each read keeps it alive',
      reads: [
        ['gi-a', SSCC_1],
        ['gi-a', 'C1', 50_000],
        ['gi-a', 'C2', 59_000],
        ['gi-a', 'C3', 61_000],
      ],
      expected: [
        `${SSCC_1} ← []`,
        'C1 ← [095212345678901235]',
        'C2 ← [095212345678901235]',
        'C3 ← []',
      ],
    },
    {
      what: 'a closing code with nothing open is still not sent',
      reads: [['gi-a', 'END']],
      expected: ['noRead: closing code of container pallet at gi-a: none was open'],
    },
    {
      what: 'sendParent: false opens without a scan; nested containers give both parents',
      reads: [
        ['plc', TRAY],
        ['plc', 'BOX-7'],
        ['plc', 'CELL-1'],
        ['plc', 'BOX-8'],
        ['plc', 'CELL-2'],
      ],
      expected: [
        'noRead: opens container tray at SOP-3 with parent 952123400001234 (sendParent: false)',
        'BOX-7 ← [952123400001234]',
        'CELL-1 ← [952123400001234,7]',
        'BOX-8 ← [952123400001234]',
        'CELL-2 ← [952123400001234,8]',
      ],
    },
    {
      what: 'per DCP: the station is the DCP the source names, else the input DCP; no timeout with 0',
      reads: [
        ['go', 'PAL-1', 1000, { dcpKey: 'GO-01' }],
        ['go', 'PK-1', 86_400_000],
        ['go', 'PK-2', 1000, { dcpKey: 'OTHER' }],
      ],
      expected: [
        'PAL-1 ← []',
        'PK-1 ← [PAL-1]',
        'rejected: DCP "OTHER" is not configured (known: GI-01, GO-01, SOP-3)',
      ],
    },
  ])('$what', ({ reads, expected }) => {
    const m = mapper();
    const got = reads.map(([input, text, after, over]) =>
      brief(
        m.map(
          read(
            input as string,
            text as string,
            (after as number | undefined) ?? 1000,
            (over as Partial<Read> | undefined) ?? {},
          ),
        ),
      ),
    );
    expect(got).toEqual(expected);
  });

  it('says which container a read opened or belongs to', () => {
    const m = mapper();
    expect(m.map(read('gi-a', SSCC_1))).toMatchObject({
      outcome: 'scan',
      container: { name: 'pallet', action: 'opened', parent: '095212345678901235' },
    });
    expect(m.map(read('gi-a', 'C1'))).toMatchObject({
      outcome: 'scan',
      container: { name: 'pallet', action: 'member', parent: '095212345678901235' },
    });
  });

  it('a rejected read does not keep the container alive', () => {
    const m = mapper(`rules:\n  - { name: only-c, match: { regex: '^(C|00)' } }\n`);
    m.map(read('gi-a', SSCC_1));
    expect(brief(m.map(read('gi-a', 'XX', 50_000)))).toMatch(/^rejected: no rule matched/);
    expect(brief(m.map(read('gi-a', 'C1', 20_000)))).toBe('C1 ← []');
  });

  it('lists the open containers per station with since when, and drops idle ones', () => {
    const m = mapper();
    const opened = read('gi-a', SSCC_1);
    m.map(opened);
    m.map(read('gi-a', 'C1'));
    m.map(read('plc', TRAY));
    const now = clock;
    expect(m.openContainers(now)).toEqual([
      {
        container: 'pallet',
        per: 'input',
        station: 'gi-a',
        parent: '095212345678901235',
        openedAt: opened.receivedAt.toISOString(),
        lastReadAt: new Date(opened.receivedAt.getTime() + 1000).toISOString(),
        reads: 1,
        idleTimeoutMs: 60000,
      },
      expect.objectContaining({
        container: 'tray',
        per: 'dcp',
        station: 'SOP-3',
        parent: '952123400001234',
        reads: 0,
      }),
    ]);
    expect(m.openContainers(now + 10 * 60_000).map((c) => c.container)).toEqual(['tray']);
  });

  it('hands open containers to the mapper of a reloaded configuration, unless the container is gone', () => {
    const before = mapper();
    before.map(read('gi-a', SSCC_1));
    before.map(read('plc', TRAY));
    const after = new Mapper(
      parseConfigText(
        BASE.replace(/ {2}- name: tray[\s\S]*?sendParent: false\n/, ''),
        'reloaded.yaml',
      ),
    );
    after.adoptSessions(before);
    expect(brief(after.map(read('gi-a', 'C9')))).toBe('C9 ← [095212345678901235]');
    expect(after.openContainers(clock).map((c) => c.container)).toEqual(['pallet']);
  });
});

describe('duplicate windows per DCP (the intake applies them to mapped scans)', () => {
  it.each([
    {
      what: 'same reference at the same DCP within the window',
      dcp: 'GI-01',
      gaps: [0, 1999],
      duplicates: [false, true],
    },
    {
      what: 'same reference after the window',
      dcp: 'GI-01',
      gaps: [0, 2000],
      duplicates: [false, false],
    },
    { what: 'window 0 turns it off', dcp: 'GO-01', gaps: [0, 0], duplicates: [false, false] },
    {
      what: 'a longer window at another DCP',
      dcp: 'SOP-3',
      gaps: [0, 9000, 2000],
      duplicates: [false, true, false],
    },
  ])('$what', ({ dcp, gaps, duplicates }) => {
    const m = mapper();
    const window = new DuplicateWindow();
    let at = Date.parse('2026-11-18T06:00:00Z');
    const got = gaps.map((gap) => {
      at += gap;
      const o = m.map({
        inputId: 'gi-a',
        raw: Buffer.from('C-1'),
        receivedAt: new Date(at),
        dcpKey: dcp,
      });
      if (o.outcome !== 'scan') throw new Error(brief(o));
      return window.check(
        o.scan.dcpKey,
        o.scan.reference,
        o.instant.getTime(),
        m.duplicateWindowMs(o.scan.dcpKey),
      );
    });
    expect(got).toEqual(duplicates);
  });

  it('keeps DCPs apart: the same reference at two DCPs is two scans', () => {
    const m = mapper();
    const window = new DuplicateWindow();
    const at = new Date('2026-11-18T06:00:00Z');
    const a = m.map({ inputId: 'gi-a', raw: Buffer.from('C-1'), receivedAt: at });
    const b = m.map({ inputId: 'plc', raw: Buffer.from('C-1'), receivedAt: at });
    if (a.outcome !== 'scan' || b.outcome !== 'scan') throw new Error('expected scans');
    expect(
      window.check(
        a.scan.dcpKey,
        a.scan.reference,
        at.getTime(),
        m.duplicateWindowMs(a.scan.dcpKey),
      ),
    ).toBe(false);
    expect(
      window.check(
        b.scan.dcpKey,
        b.scan.reference,
        at.getTime(),
        m.duplicateWindowMs(b.scan.dcpKey),
      ),
    ).toBe(false);
  });
});
