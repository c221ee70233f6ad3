import { printableRaw } from '../format/printable.js';
import type { Read } from '../inputs/types.js';
import type { DuplicateWindow } from '../mapping/duplicate-window.js';
import { canonicalReference, type BarcodeParse } from '../gs1/index.js';
import type { Mapper } from '../mapping/mapper.js';
import type { MapOutcome } from '../mapping/outcome.js';

/** What `try` found for one read; the `--json` output is an array of these. */
export interface TryResult {
  /** The read as given, control bytes shown as `failures` shows them: `<GS>`, `<CR>`, `\xHH` (not UTF-8). */
  read: string;
  outcome: MapOutcome['outcome'] | 'duplicate';
  reason?: string;
  /** A refusal's stable code (`containerShort`, `requiredAttribute`…), when it has one. */
  code?: string;
  rule?: string;
  tried?: string[];
  scan?: unknown;
  /** UTC instant of the scan's time stamp. */
  instant?: string;
  timeWarning?: string;
  /** Attributes of the rule not sent, each with why (their source had no value in this read). */
  notes?: string[];
  /** With `--payload`: what the input's own parsing gave the mapping besides the code (DCP, time, parents, attributes, origin). */
  fromInput?: {
    dcp?: string;
    time?: string;
    parents?: string[];
    attributes?: Record<string, string>;
    origin?: Record<string, string | number>;
  };
  container?: unknown;
  gs1?: {
    kind: BarcodeParse['kind'];
    symbology?: string;
    form?: string;
    elements?: { ai: string; title: string; value: string; date?: string; decimal?: string }[];
    reason?: string;
    /** The canonical GS1 reference (`{ gs1: canonical }`, src/gs1/canonical.ts) and which AIs made it. */
    canonical?: { reference: string; why: string };
  };
}

/** What the input's parsing handed the mapping besides the code. */
export function fromInputOf(read: Read): NonNullable<TryResult['fromInput']> {
  return {
    ...(read.dcpKey !== undefined ? { dcp: read.dcpKey } : {}),
    ...(read.sourceTime !== undefined ? { time: read.sourceTime } : {}),
    ...(read.parents ? { parents: read.parents } : {}),
    ...(read.attributes ? { attributes: read.attributes } : {}),
    ...(read.origin ? { origin: read.origin } : {}),
  };
}

/** One read's outcome as `try` answers it: the GS1 data found, the scan or why not, and a duplicate within the DCP's window. */
export function toResult(
  raw: Buffer,
  outcome: MapOutcome,
  mapper: Mapper,
  dedupe: DuplicateWindow,
): TryResult {
  const barcode =
    outcome.outcome === 'noRead' || outcome.outcome === 'rejected' || outcome.outcome === 'scan'
      ? outcome.barcode
      : undefined;
  const result: TryResult = {
    read: printableRaw(raw),
    outcome: outcome.outcome,
    ...(barcode ? { gs1: gs1Of(barcode) } : {}),
  };
  if (outcome.outcome === 'rejected')
    return {
      ...result,
      reason: outcome.reason,
      ...(outcome.code ? { code: outcome.code } : {}),
      ...(outcome.tried ? { tried: outcome.tried } : {}),
    };
  if (outcome.outcome === 'noRead')
    return {
      ...result,
      ...(outcome.reason ? { reason: outcome.reason } : {}),
      ...(outcome.container ? { container: outcome.container } : {}),
    };
  const { scan, instant } = outcome;
  const windowMs = mapper.duplicateWindowMs(scan.dcpKey);
  const more = {
    ...(outcome.rule ? { rule: outcome.rule } : {}),
    ...(outcome.tried ? { tried: outcome.tried } : {}),
    scan,
    instant: instant.toISOString(),
    ...(outcome.timeWarning ? { timeWarning: outcome.timeWarning } : {}),
    ...(outcome.notes ? { notes: outcome.notes } : {}),
    ...(outcome.container ? { container: outcome.container } : {}),
  };
  if (dedupe.check(scan.dcpKey, scan.reference, instant.getTime(), windowMs)) {
    return {
      ...result,
      ...more,
      outcome: 'duplicate',
      reason: `same reference at ${scan.dcpKey} within ${windowMs} ms: counted, not sent again`,
    };
  }
  return { ...result, ...more };
}

function gs1Of(b: BarcodeParse): NonNullable<TryResult['gs1']> {
  const symbology = b.symbology ? `${b.symbology.name} (${b.symbology.identifier})` : undefined;
  const base = { kind: b.kind, ...(symbology ? { symbology } : {}) };
  if (b.kind === 'plain') return base;
  const elements = b.elements.map((e) => ({
    ai: e.ai,
    title: e.title,
    value: e.value,
    ...(e.date ? { date: e.date } : {}),
    ...(e.decimal ? { decimal: e.decimal } : {}),
  }));
  const canonical = b.kind === 'gs1' ? canonicalReference(b.elements) : undefined;
  return {
    ...base,
    form: b.form,
    elements,
    ...(b.kind === 'invalid' ? { reason: b.reason } : {}),
    ...(canonical ? { canonical: { reference: canonical.uri, why: canonical.why } } : {}),
  };
}

/** The result for a person: the read, the GS1 data found, then the scan or why not. */
export function describeResult(r: TryResult): string {
  const lines = [`read: ${r.read}`];
  if (r.gs1) {
    const what =
      r.gs1.kind === 'plain'
        ? 'not GS1 (a plain code)'
        : r.gs1.kind === 'gs1'
          ? `GS1 ${r.gs1.form}`
          : `invalid GS1 ${r.gs1.form}`;
    lines.push(`  code: ${r.gs1.symbology ? `${r.gs1.symbology}, ` : ''}${what}`);
    for (const e of r.gs1.elements ?? []) {
      lines.push(
        `    (${e.ai}) ${e.title}: ${e.value}${e.date ? ` = ${e.date}` : ''}${e.decimal ? ` = ${e.decimal}` : ''}`,
      );
    }
    if (r.gs1.reason) lines.push(`    problem: ${r.gs1.reason}`);
    if (r.gs1.canonical)
      lines.push(
        `  canonical GS1 reference: ${r.gs1.canonical.reference}`,
        `    ${r.gs1.canonical.why}`,
      );
  }
  if (r.fromInput) {
    const f = r.fromInput;
    const parts = [
      f.dcp !== undefined ? `DCP ${f.dcp}` : '',
      f.time !== undefined ? `time ${f.time}` : '',
      f.parents ? `parents ${f.parents.join(', ')}` : '',
      f.attributes
        ? `fields ${Object.entries(f.attributes)
            .map(([k, v]) => `${k}=${v}`)
            .join(', ')}`
        : 'no fields',
    ].filter(Boolean);
    lines.push(
      `  from the input: ${parts.join('; ')}${
        f.origin
          ? `   (${Object.entries(f.origin)
              .map(([k, v]) => `${k} ${v}`)
              .join(', ')})`
          : ''
      }`,
    );
  }
  if (r.tried)
    lines.push(`  rules tried: ${r.tried.join(', ')}${r.rule ? `; mapped by: ${r.rule}` : ''}`);
  if (r.container) lines.push(`  container: ${JSON.stringify(r.container)}`);
  switch (r.outcome) {
    case 'scan':
      lines.push(`  → scan, as it would be sent (time stamp in the site zone; UTC ${r.instant}):`);
      lines.push(
        ...compactJson(r.scan)
          .split('\n')
          .map((l) => `    ${l}`),
      );
      if (r.timeWarning) lines.push(`  warning: ${r.timeWarning}`);
      for (const n of r.notes ?? []) lines.push(`  note: ${n}`);
      break;
    case 'duplicate':
      lines.push(`  → duplicate: ${r.reason}`);
      break;
    case 'noRead':
      lines.push(`  → not sent: ${r.reason ?? 'the scanner could not read a code (no-read text)'}`);
      break;
    case 'rejected':
      lines.push(`  → rejected: ${r.reason}`);
      break;
  }
  return `${lines.join('\n')}\n`;
}

/** JSON with two-space indent, but each attribute `{ "key": …, "value": … }` on one line. */
function compactJson(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(
    /\{\n\s+"key": (".*?"),\n\s+"value": (".*?")\n\s+\}/g,
    '{ "key": $1, "value": $2 }',
  );
}
