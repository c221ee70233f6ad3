import type { DcpConfig, TimeCheckConfig } from '../config/schema.js';
import type { Read } from '../inputs/types.js';
import { parseSourceTime } from '../format/time.js';
import type { CompiledRule, Groups } from './rules.js';
import type { CompiledValue, ReadView } from './value-source.js';

/**
 * The fields of a Scan a rule gives beside its reference and containers: a rule's optional values
 * (DCP, product, supplier, client), the time stamp with its plausibility check, and the attributes.
 * Pure functions of the read, the rule and the DCP.
 */

/** A rule's optional value: its text, nothing (the rule does not set it or the source is empty), or why not. */
export function optionalValue(
  value: CompiledValue | undefined,
  view: ReadView,
  groups: Groups,
): { value?: string; error?: string } {
  if (!value) return {};
  const v = value.evaluate(view, groups);
  if (v.ok) return { value: v.value };
  return v.absent ? {} : { error: v.reason };
}

/**
 * The instant of a read's time stamp: its `sourceTime` read by the rule's `timeFormat` or as ISO
 * 8601 in `timeZone`, else the time the read was received. A `sourceTime` neither reads is the
 * reason (a string) the read is refused.
 */
export function readInstant(read: Read, rule: CompiledRule, timeZone: string): Date | string {
  if (read.sourceTime === undefined || read.sourceTime.trim() === '') return read.receivedAt;
  const parsed =
    rule.timeFormat?.parse(read.sourceTime, timeZone) ?? parseSourceTime(read.sourceTime, timeZone);
  if (parsed) return parsed;
  return rule.timeFormat
    ? `time stamp "${read.sourceTime}" fits neither the format "${rule.timeFormat.pattern}" of rule ${rule.name} nor ISO 8601`
    : `time stamp "${read.sourceTime}" is not ISO 8601 (expected e.g. 2026-11-18T06:58:12+01:00)`;
}

/** Why a time stamp is implausible (too far after or before the read was received, `timeCheck`), or undefined. */
export function implausibleTime(
  instant: Date,
  receivedAt: Date,
  timeCheck: TimeCheckConfig,
): string | undefined {
  const drift = instant.getTime() - receivedAt.getTime();
  if (drift > timeCheck.maxAheadMs)
    return `time stamp is ${describeDuration(drift)} after the read was received`;
  if (-drift > timeCheck.maxBehindMs)
    return `time stamp is ${describeDuration(-drift)} before the read was received`;
  return undefined;
}

/**
 * Attributes in order: the DCP's fixed ones, the source's, the rule's; a later one replaces an
 * earlier one of the same key. A rule's attribute whose source gave no value is not sent, and
 * `notes` says so (`attribute voltage: field voltage has no value in this read`), so a dropped
 * attribute is never silent; one marked `optional` is left out without a note, and one marked
 * `required` refuses the read: the answer is then the reason (a string).
 */
export function attributesOf(
  rule: CompiledRule,
  view: ReadView,
  groups: Groups,
  dcp: DcpConfig,
  notes: string[],
): Map<string, string> | string {
  const out = new Map<string, string>(Object.entries(dcp.attributes));
  const source = view.read.attributes ?? {};
  if (rule.sourceAttributes !== false) {
    for (const [key, value] of Object.entries(source)) {
      if (rule.consumedFields.has(key)) continue;
      if (rule.sourceAttributes !== true && !rule.sourceAttributes.has(key)) continue;
      if (value === undefined || value === null) continue;
      out.set(key, typeof value === 'string' ? value : String(value));
    }
  }
  for (const [key, value] of rule.attributes) {
    const v = value.evaluate(view, groups);
    if (v.ok) out.set(key, v.value);
    else if (value.required)
      return `required attribute ${key} has no value: ${v.reason}; this read is not sent`;
    else if (!(value.optional && v.absent)) notes.push(`attribute ${key} not sent: ${v.reason}`);
  }
  return out;
}

function describeDuration(ms: number): string {
  if (ms >= 2 * 86_400_000) return `${Math.round(ms / 86_400_000)} days`;
  if (ms >= 2 * 3_600_000) return `${Math.round(ms / 3_600_000)} hours`;
  if (ms >= 120_000) return `${Math.round(ms / 60_000)} minutes`;
  return `${Math.round(ms / 1000)} s`;
}
