import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import { Mapper } from '../../src/mapping/mapper.js';
import { BASE_CONFIG, problemLines } from '../helpers/config-problems.js';

const CONTAINERS = `containers:\n  - { name: pack, open: { regex: "^PK-" }, closeAfter: 2 }\n`;

describe('container rules: requireContainer and closeAfter', () => {
  it('refuses a requireContainer naming no container, and true where no container is defined, with the line', () => {
    expect(
      problemLines(`${BASE_CONFIG}${CONTAINERS}rules:\n  - { name: m, requireContainer: pak }\n`),
    ).toEqual([
      '10:34 rules[0].requireContainer: unknown container "pak"; did you mean "pack"?; containers: pack',
    ]);
    expect(problemLines(`${BASE_CONFIG}rules:\n  - { name: m, requireContainer: true }\n`)).toEqual(
      [
        expect.stringMatching(
          /rules\[0\]\.requireContainer: needs an open container, but `containers` defines none/,
        ),
      ],
    );
  });

  it('a member read with no open container is refused; the pack closes after closeAfter members', () => {
    const config = parseConfigText(
      `${BASE_CONFIG}${CONTAINERS}rules:\n  - { name: packs, match: { regex: "^PK-" } }\n  - { name: modules, requireContainer: true }\n`,
      'site.yaml',
    );
    const mapper = new Mapper(config);
    const inputId = config.inputs[0]!.id;
    let t = Date.parse('2026-11-27T10:00:00Z');
    const map = (code: string) =>
      mapper.map({ inputId, raw: Buffer.from(code), receivedAt: new Date((t += 1000)) });
    expect(map('MOD-1')).toMatchObject({
      outcome: 'rejected',
      reason: expect.stringContaining('rule modules: needs an open container (pack)'),
    });
    expect(map('PK-1')).toMatchObject({
      outcome: 'scan',
      container: { name: 'pack', action: 'opened' },
    });
    expect(map('MOD-2')).toMatchObject({
      outcome: 'scan',
      scan: { parents: ['PK-1'] },
      container: { action: 'member', parent: 'PK-1' },
    });
    const second = map('MOD-3');
    expect(second).toMatchObject({
      outcome: 'scan',
      scan: { parents: ['PK-1'] },
      container: { action: 'member', parent: 'PK-1', closed: 'closeAfter 2 reached' },
    });
    expect(map('MOD-4')).toMatchObject({ outcome: 'rejected' });
    expect(mapper.openContainers(t)).toEqual([]);
  });
});
