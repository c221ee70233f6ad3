import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  formatMarkdown,
  formatTable,
  judge,
  writeReport,
  type BenchReport,
  type BenchResult,
} from '../../bench/lib/report.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('bench report', () => {
  it('judges a figure against its ceiling and targets', () => {
    const f = judge({
      name: 'intake',
      value: 60_000,
      unit: 'reads/s',
      ceiling: { value: 100_000, what: 'raw' },
      targets: [
        { kind: 'min', of: 'ratio', value: 0.5 },
        { kind: 'min', of: 'value', value: 100_000 },
      ],
    });
    expect(f.ratio).toBeCloseTo(0.6);
    expect(f.met).toBe(false);
    expect(judge({ ...f, targets: [{ kind: 'min', of: 'ratio', value: 0.5 }] }).met).toBe(true);
  });

  it('tells a strict ceiling (max) from an inclusive one (atMost)', () => {
    expect(
      judge({
        name: 'rss',
        value: 200,
        unit: 'MiB',
        targets: [{ kind: 'max', of: 'value', value: 200 }],
      }).met,
    ).toBe(false);
    expect(
      judge({
        name: 'bytes',
        value: 200,
        unit: 'B',
        targets: [{ kind: 'atMost', of: 'value', value: 200 }],
      }).met,
    ).toBe(true);
    expect(
      judge({
        name: 'bytes',
        value: 201,
        unit: 'B',
        targets: [{ kind: 'atMost', of: 'value', value: 200 }],
      }).met,
    ).toBe(false);
  });

  it('counts a target on a ratio without a ceiling as missed, and leaves figures without targets unjudged', () => {
    expect(
      judge({ name: 'x', value: 1, unit: 'u', targets: [{ kind: 'min', of: 'ratio', value: 0.5 }] })
        .met,
    ).toBe(false);
    expect(judge({ name: 'x', value: 1, unit: 'u' }).met).toBeUndefined();
  });

  it('prints each figure beside its ceiling, ratio and target, and a benchmark that could not run', () => {
    const results: BenchResult[] = [
      {
        id: 'drain',
        title: 'Drain',
        durationSec: 1,
        notes: [],
        figures: [
          judge({
            name: 'drain time',
            value: 42.5,
            unit: 's',
            ceiling: { value: 2.1, what: 'bare undici' },
            targets: [{ kind: 'max', of: 'value', value: 60 }],
          }),
        ],
      },
      {
        id: 'mqtt',
        title: 'MQTT',
        durationSec: 0,
        notes: [],
        figures: [],
        error: 'mosquitto is required',
      },
    ];
    const lines = formatTable(results).split('\n');
    expect(lines[0]).toMatch(/benchmark\s+figure\s+value\s+ceiling\s+ratio\s+target\s+met/);
    const row = lines.find((l) => l.includes('drain time'))!;
    expect(row).toContain('42.5 s');
    expect(row).toContain('2.1 s');
    expect(row).toContain('20.238');
    expect(row).toContain('< 60 s');
    expect(row).toMatch(/yes$/);
    expect(lines.find((l) => l.startsWith('mqtt'))).toContain(
      'not measured: mosquitto is required',
    );
  });

  it('renders the same figures as a Markdown table for the docs', () => {
    const md = formatMarkdown([
      {
        id: 'fill',
        title: 'Batch fill',
        durationSec: 1,
        notes: [],
        figures: [
          judge({
            name: 'mean batch',
            value: 5_000_000,
            unit: 'bytes',
            ceiling: { value: 6_081_740, what: 'limit' },
            targets: [{ kind: 'min', of: 'ratio', value: 0.95 }],
          }),
        ],
      },
    ]).split('\n');
    expect(md[0]).toBe(
      '| benchmark | figure | value | ceiling (same run) | ratio | target | met |',
    );
    expect(md[2]).toBe(
      '| fill | mean batch | 5,000,000 bytes | 6,081,740 bytes | 0.822 | ≥ 0.95 × ceiling | **no** |',
    );
  });

  it('writes the JSON file, creating its folder, and leaves no temp file behind', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-bench-report-'));
    dirs.push(dir);
    const path = join(dir, 'results', 'latest.json');
    const report: BenchReport = {
      date: '2026-11-22T00:00:00.000Z',
      machine: { cpuModel: 'test', cores: 2, memTotalMiB: 1024, node: 'v20.20.2', os: 'Linux' },
      durationSec: 3,
      options: { quick: true },
      results: [
        {
          id: 'fill',
          title: 'Batch fill',
          durationSec: 1,
          notes: ['n'],
          figures: [judge({ name: 'fill', value: 0.99, unit: '' })],
        },
      ],
    };
    writeReport(path, report);
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual(report);
    expect(existsSync(`${path}.tmp`)).toBe(false);
  });
});
