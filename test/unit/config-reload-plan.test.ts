import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import { planReload } from '../../src/config/reload.js';

const BASE = `site: { id: s, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }
inputs:
  - { id: a, type: serial, path: /dev/ttyA, dcp: GI-01 }
  - { id: b, type: serial, path: /dev/ttyB, dcp: GI-01 }
`;
const cfg = (text: string) => parseConfigText(text, 'x.yaml');

describe('reload plan', () => {
  it.each([
    [
      'nothing changed',
      BASE,
      {
        unchanged: ['a', 'b'],
        changed: [],
        added: [],
        removed: [],
        needsRestart: [],
        productCheckChanged: false,
        retentionChanged: false,
      },
    ],
    [
      'a rule added: no input restarts',
      `${BASE}rules:\n  - { name: r }\n`,
      { unchanged: ['a', 'b'], changed: [], needsRestart: [] },
    ],
    [
      'one input setting changed',
      BASE.replace('/dev/ttyB', '/dev/ttyC'),
      { unchanged: ['a'], changed: ['b'] },
    ],
    [
      'an input renamed (its name for people): no restart',
      BASE.replace('path: /dev/ttyB,', 'path: /dev/ttyB, name: Line 2 handheld,'),
      { unchanged: ['a', 'b'], changed: [] },
    ],
    [
      'ackOn changed: the input restarts',
      BASE.replace('path: /dev/ttyB,', 'path: /dev/ttyB, ackOn: verdict,'),
      { unchanged: ['a'], changed: ['b'] },
    ],
    [
      'an input removed, one added',
      BASE.replace('id: b,', 'id: c,'),
      { unchanged: ['a'], removed: ['b'], added: ['c'] },
    ],
    [
      'a default written out is no change',
      BASE.replace('dcp: GI-01 }\n  - { id: b', 'dcp: GI-01, baudRate: 9600 }\n  - { id: b'),
      { unchanged: ['a', 'b'], changed: [] },
    ],
    [
      'sections that need a restart',
      `${BASE}delivery: { mode: presigned }\nhttp: { listen: 127.0.0.1:9999 }\n`,
      { needsRestart: ['delivery', 'http'] },
    ],
    [
      'the audit period and the early-prune window apply at once; the rest of buffer waits',
      `${BASE}buffer: { retentionDays: 7, earlyPruneKeepHours: 12 }\n`,
      { needsRestart: [], retentionChanged: true },
    ],
    [
      'another buffer key still needs a restart',
      `${BASE}buffer: { retentionDays: 7, maxPendingScans: 1000 }\n`,
      { needsRestart: ['buffer'], retentionChanged: true },
    ],
    [
      'a new http input needs a restart',
      `${BASE}  - { id: h, type: http, dcp: GI-01 }\n`,
      { added: ['h'], needsRestart: ['inputs.h (a new http input)'] },
    ],
    [
      'product check settings',
      `${BASE}productCheck: { intervalMs: 600000 }\n`,
      { productCheckChanged: true },
    ],
  ])('%s', (_what, next, expected) => {
    expect(planReload(cfg(BASE), cfg(next))).toMatchObject(expected);
  });
});
