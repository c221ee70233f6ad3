import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import type { Read } from '../../src/inputs/types.js';
import { Mapper } from '../../src/mapping/mapper.js';
import type { MapOutcome } from '../../src/mapping/outcome.js';

/** ST-20: a module label, then exactly 12 cells (GS1 DataMatrix with a serial). */
const config = (
  onIncomplete: 'refuse' | 'close',
  cellRule = '',
) => `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps:
  - { key: ST-20, kind: startOfProcess, productModelKey: MOD-12, duplicateWindowMs: 0 }
inputs:
  - { id: st20, type: serial, path: /dev/null, dcp: ST-20 }
containers:
  - name: module
    open: { regex: '^MOD-' }
    close: { regex: '^END$' }
    members: 12
    onIncomplete: ${onIncomplete}
rules:
  - name: module
    match: { regex: '^MOD-' }
  - name: cell
    match: { ais: ['01', '21'] }
    reference: { ai: '21' }
    requireContainer: module
    attributes:
      expiry: { ai: '17', as: date, optional: true }
      lot: { ai: '10' }
${cellRule}`;

let clock = Date.parse('2026-11-18T06:00:00Z');
const read = (text: string): Read => {
  clock += 1000;
  return { inputId: 'st20', raw: Buffer.from(text), receivedAt: new Date(clock) };
};
const cell = (n: number) => `(01)09521234543213(21)C${String(n).padStart(4, '0')}(10)L1`;
const mapper = (onIncomplete: 'refuse' | 'close', extra = '') =>
  new Mapper(parseConfigText(config(onIncomplete, extra), 'members.yaml'));
const open = (m: Mapper) => m.openContainers(clock)[0];

describe('a container of members: 12', () => {
  it('takes 12 cells, closes by itself at the 12th as complete, and refuses a 13th saying why', () => {
    const m = mapper('refuse');
    expect(m.map(read('MOD-L2-000124')).outcome).toBe('scan');
    for (let i = 1; i <= 12; i++) {
      const o = m.map(read(cell(i)));
      expect(o.outcome).toBe('scan');
      if (o.outcome === 'scan') expect(o.scan.parents).toEqual(['MOD-L2-000124']);
      if (i < 12) expect(open(m)).toMatchObject({ reads: i, expected: 12 });
    }
    expect(m.openContainers(clock)).toEqual([]);
    const o13 = m.map(read(cell(13)));
    expect(o13).toMatchObject({ outcome: 'rejected', code: 'containerFull' });
    if (o13.outcome === 'rejected')
      expect(o13.message).toBe(
        "MOD-L2-000124 is complete (12 of 12): scan the next module's label first",
      );
  });

  it('records each change: opened, members, complete at 12', () => {
    const m = mapper('close');
    const changes = [
      m.map(read('MOD-A')),
      ...Array.from({ length: 12 }, (_, i) => m.map(read(cell(i + 1)))),
    ].flatMap((o) => o.changes ?? []);
    expect(changes[0]).toMatchObject({ parent: 'MOD-A', state: 'open', members: 0, expected: 12 });
    expect(changes.at(-1)).toMatchObject({
      state: 'complete',
      members: 12,
      why: '12 of 12: complete',
    });
  });

  it('onIncomplete: refuse keeps the short container and refuses the new label and the closing code', () => {
    const m = mapper('refuse');
    m.map(read('MOD-L2-000124'));
    for (let i = 1; i <= 3; i++) m.map(read(cell(i)));
    const label = m.map(read('MOD-L2-000125'));
    expect(label).toMatchObject({
      outcome: 'rejected',
      code: 'containerShort',
      message: 'MOD-L2-000124 has 3 of 12: finish it first',
    });
    expect(label.changes).toBeUndefined();
    expect(m.map(read('END'))).toMatchObject({ outcome: 'rejected', code: 'containerShort' });
    expect(open(m)).toMatchObject({ parent: 'MOD-L2-000124', reads: 3 });
    const fourth = m.map(read(cell(4)));
    expect(fourth.outcome === 'scan' && fourth.scan.parents).toEqual(['MOD-L2-000124']);
  });

  it('onIncomplete: close closes the short container as incomplete and opens the new one', () => {
    const m = mapper('close');
    m.map(read('MOD-1'));
    for (let i = 1; i <= 3; i++) m.map(read(cell(i)));
    const o = m.map(read('MOD-2'));
    expect(o.outcome).toBe('scan');
    expect(o.changes).toEqual([
      expect.objectContaining({
        parent: 'MOD-1',
        state: 'incomplete',
        members: 3,
        why: 'new label MOD-2',
      }),
      expect.objectContaining({ parent: 'MOD-2', state: 'open', members: 0 }),
    ]);
    expect(open(m)).toMatchObject({ parent: 'MOD-2', reads: 0 });
  });

  it('the open label scanned again changes nothing, and a cell scanned twice counts once', () => {
    const m = mapper('refuse');
    m.map(read('MOD-1'));
    m.map(read(cell(1)));
    m.map(read(cell(2)));
    const again = m.map(read('MOD-1'));
    expect(again).toMatchObject({ outcome: 'noRead', container: { action: 'rescanned' } });
    expect(again.outcome === 'noRead' && again.reason).toMatch(/MOD-1 is open already \(2 of 12\)/);
    m.map(read(cell(2)));
    expect(open(m)).toMatchObject({ parent: 'MOD-1', reads: 2 });
  });

  it('a supervisor closes or abandons a short container, recorded with who and why', () => {
    const m = mapper('refuse');
    m.map(read('MOD-1'));
    m.map(read(cell(1)));
    const c = m.closeContainer('module', 'st20', clock, { by: 'anna', why: 'cell scrapped' });
    expect(c).toMatchObject({ state: 'incomplete', members: 1, by: 'anna', why: 'cell scrapped' });
    expect(m.openContainers(clock)).toEqual([]);
    m.map(read('MOD-2'));
    const a = m.closeContainer('module', 'st20', clock, {
      by: 'ben',
      why: 'housing damaged',
      abandon: true,
    });
    expect(a).toMatchObject({ state: 'abandoned', by: 'ben' });
    expect(m.closeContainer('module', 'st20', clock, { by: 'ben', why: 'x' })).toBeUndefined();
  });

  it('restores an open container with its count and members', () => {
    const m = mapper('refuse');
    const rows = [m.map(read('MOD-1')), m.map(read(cell(1))), m.map(read(cell(2)))].flatMap(
      (o) => o.changes ?? [],
    );
    const again = mapper('refuse');
    expect(again.restoreContainers([rows.at(-1)!])).toBe(1);
    expect(open(again)).toMatchObject({ parent: 'MOD-1', reads: 2, expected: 12 });
    again.map(read(cell(2)));
    expect(open(again)).toMatchObject({ reads: 2 });
    expect(again.map(read('MOD-2'))).toMatchObject({ code: 'containerShort' });
  });
});

describe('required and optional attributes', () => {
  it('an optional attribute that is missing is left out without a note', () => {
    const m = mapper('close');
    m.map(read('MOD-1'));
    const o = m.map(read(cell(1)));
    expect(o.outcome).toBe('scan');
    if (o.outcome === 'scan') {
      expect(o.notes).toBeUndefined();
      expect(o.scan.attributes).toEqual([{ key: 'lot', value: 'L1' }]);
    }
    const noLot = m.map(read('(01)09521234543213(21)C0099'));
    expect(noLot.outcome === 'scan' && noLot.notes).toEqual([
      expect.stringMatching(/^attribute lot not sent/),
    ]);
  });

  it('a required attribute that is missing refuses the read with the reason, and fills no container', () => {
    const m = new Mapper(
      parseConfigText(
        config('close').replace("lot: { ai: '10' }", "lot: { ai: '10', required: true }"),
        'required.yaml',
      ),
    );
    m.map(read('MOD-1'));
    const o: MapOutcome = m.map(read('(01)09521234543213(21)C0099'));
    expect(o).toMatchObject({ outcome: 'rejected', code: 'requiredAttribute' });
    expect(o.outcome === 'rejected' && o.reason).toMatch(
      /^rule cell: required attribute lot has no value/,
    );
    expect(open(m)).toMatchObject({ reads: 0 });
  });

  it('config: required and optional together, or members with closeAfter, are errors', () => {
    expect(() =>
      parseConfigText(
        config('close').replace(
          "lot: { ai: '10' }",
          "lot: { ai: '10', required: true, optional: true }",
        ),
        'both.yaml',
      ),
    ).toThrow(/either `required` or `optional`/);
    expect(() =>
      parseConfigText(
        config('close').replace('members: 12', 'members: 12\n    closeAfter: 12'),
        'm.yaml',
      ),
    ).toThrow(/drop closeAfter/);
  });
});

describe('open containers across a reload and a start', () => {
  it('a reload keeps the count; a container gone from the configuration is closed, not left open', () => {
    const m = mapper('refuse');
    m.map(read('MOD-1'));
    m.map(read(cell(1)));
    m.map(read(cell(2)));
    const same = mapper('refuse');
    same.adoptSessions(m);
    expect(open(same)).toMatchObject({ parent: 'MOD-1', reads: 2, expected: 12 });

    const without = new Mapper(
      parseConfigText(
        config('refuse')
          .replace(/containers:[\s\S]*?rules:/, 'rules:')
          .replace('requireContainer: module', ''),
        'gone.yaml',
      ),
    );
    without.adoptSessions(same);
    expect(without.openContainers(clock)).toEqual([]);
    expect(without.map(read('(01)09521234543213(21)C0777')).changes).toEqual([
      expect.objectContaining({
        parent: 'MOD-1',
        state: 'incomplete',
        why: 'configuration reloaded without it',
      }),
    ]);
  });
});
