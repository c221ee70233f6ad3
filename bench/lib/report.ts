import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Shapes of benchmark results, the table printed at the end of `npm run bench` and the JSON file
 * (`bench/results/latest.json`). Every speed figure is paired with the ceiling it is compared with,
 * measured in the same run on the same machine, because absolute speeds on a shared
 * machine mean little.
 */

/** A target: the figure's value (or its ratio to the ceiling) must be at least / at most `value`. */
export interface Target {
  /** `min`: value ≥ target; `max`: value < target (a ceiling that must not be reached); `atMost`: value ≤ target. */
  kind: 'min' | 'max' | 'atMost';
  /** Whether the target applies to the raw value or to value / ceiling. */
  of: 'value' | 'ratio';
  value: number;
}

/** The ceiling a figure is compared with: the same work done by the bare tool (raw SQLite, bare mqtt.js, bare undici). */
export interface Ceiling {
  value: number;
  /** What was measured as the ceiling, for people. */
  what: string;
}

/** One measured figure. */
export interface Figure {
  /** What is measured, e.g. `intake rate`. */
  name: string;
  value: number;
  /** Unit of `value` and of the ceiling, e.g. `reads/s`, `ms`, `MB`. */
  unit: string;
  ceiling?: Ceiling;
  /** `value / ceiling.value`, when there is a ceiling. */
  ratio?: number;
  targets?: Target[];
  /** Whether every target is met; absent when the figure has no target. */
  met?: boolean;
  /** What limits this figure, or how it was measured. */
  note?: string;
}

/** How busy the machine was with other people's work around a benchmark. */
export interface Background {
  /** Share of all cores busy over one second before the benchmark, with the benchmark idle, in %. */
  busyPct: number;
  /** The 1-minute load average at that moment. */
  loadavg1: number;
  /** Share of all cores busy with other processes while the benchmark ran (its own CPU subtracted), in %. */
  othersDuringPct?: number;
  /** The 1-minute load average when the benchmark ended (its own processes included). */
  loadavg1After?: number;
}

/** The outcome of one benchmark of the suite. */
export interface BenchResult {
  id: string;
  title: string;
  figures: Figure[];
  notes: string[];
  background?: Background;
  durationSec: number;
  /** Set when the benchmark could not run; its figures are then missing or partial. */
  error?: string;
}

/** The machine the suite ran on. */
export interface MachineInfo {
  cpuModel: string;
  cores: number;
  memTotalMiB: number;
  node: string;
  os: string;
  /** Free space of the file system holding the temp folder, in GiB. */
  tmpFreeGiB?: number;
}

/** The whole JSON file. */
export interface BenchReport {
  date: string;
  machine: MachineInfo;
  durationSec: number;
  /** Options the suite ran with (sizes, selection). */
  options: Record<string, unknown>;
  results: BenchResult[];
}

/** Adds `ratio` and `met` to a figure from its value, ceiling and targets. */
export function judge(figure: Figure): Figure {
  const out: Figure = { ...figure };
  if (figure.ceiling && figure.ceiling.value > 0) out.ratio = figure.value / figure.ceiling.value;
  if (figure.targets && figure.targets.length > 0) {
    out.met = figure.targets.every((t) => {
      const x = t.of === 'ratio' ? out.ratio : figure.value;
      if (x === undefined || !Number.isFinite(x)) return false;
      return t.kind === 'min' ? x >= t.value : t.kind === 'max' ? x < t.value : x <= t.value;
    });
  }
  return out;
}

/** A number for people: thousands separated, few decimals for small values. */
export function formatNumber(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  const abs = Math.abs(x);
  const digits = abs >= 100 ? 0 : abs >= 10 ? 1 : abs >= 1 ? 2 : 3;
  return x.toLocaleString('en-US', { minimumFractionDigits: 0, maximumFractionDigits: digits });
}

/** `≥ 0.5 × ceiling`, `< 20 ms`, … */
export function formatTarget(t: Target, unit: string): string {
  const op = t.kind === 'min' ? '≥' : t.kind === 'max' ? '<' : '≤';
  return t.of === 'ratio'
    ? `${op} ${formatNumber(t.value)} × ceiling`
    : `${op} ${formatNumber(t.value)} ${unit}`;
}

/** The results as a fixed-width text table: one row per figure, the ceiling and ratio beside the value. */
export function formatTable(results: readonly BenchResult[]): string {
  const header = ['benchmark', 'figure', 'value', 'ceiling', 'ratio', 'target', 'met'];
  const rows: string[][] = [];
  for (const r of results) {
    if (r.figures.length === 0)
      rows.push([r.id, r.error ? `not measured: ${r.error}` : 'no figures', '', '', '', '', '']);
    for (const f of r.figures) {
      rows.push([
        r.id,
        f.name,
        `${formatNumber(f.value)} ${f.unit}`,
        f.ceiling ? `${formatNumber(f.ceiling.value)} ${f.unit}` : '',
        f.ratio !== undefined ? f.ratio.toFixed(3) : '',
        (f.targets ?? []).map((t) => formatTarget(t, f.unit)).join(', '),
        f.met === undefined ? '' : f.met ? 'yes' : 'NO',
      ]);
    }
    if (r.error && r.figures.length > 0)
      rows.push([r.id, `partly failed: ${r.error}`, '', '', '', '', '']);
  }
  const widths = header.map((h, i) =>
    Math.max(h.length, ...rows.map((row) => (row[i] ?? '').length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i >= 2 && i <= 4 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

/** The results as a Markdown table (for docs/performance.md): benchmark, figure, value, ceiling, ratio, target, met. */
export function formatMarkdown(results: readonly BenchResult[]): string {
  const rows = [
    '| benchmark | figure | value | ceiling (same run) | ratio | target | met |',
    '|---|---|--:|--:|--:|---|---|',
  ];
  for (const r of results) {
    if (r.figures.length === 0)
      rows.push(`| ${r.id} | not measured: ${r.error ?? 'no figures'} | | | | | |`);
    for (const f of r.figures) {
      const cells = [
        r.id,
        f.name,
        `${formatNumber(f.value)} ${f.unit}`,
        f.ceiling ? `${formatNumber(f.ceiling.value)} ${f.unit}` : '',
        f.ratio !== undefined ? f.ratio.toFixed(3) : '',
        (f.targets ?? []).map((t) => formatTarget(t, f.unit)).join(', '),
        f.met === undefined ? '' : f.met ? 'yes' : '**no**',
      ];
      rows.push(`| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`);
    }
  }
  return rows.join('\n');
}

/** Writes the report as pretty JSON, atomically (temp file + rename), creating the folder. */
export function writeReport(path: string, report: BenchReport): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(report, null, 2)}\n`);
  renameSync(tmp, path);
}
