import type { ValueConfig } from '../config/schema.js';
import type { Read } from '../inputs/types.js';
import { canonicalReference, type BarcodeParse, type Gs1Element } from '../gs1/index.js';

/**
 * One read as the rules see it: the code as read, the code without its AIM symbology identifier,
 * the GS1 elements (when the code is valid GS1), and what the source supplied.
 */
export interface ReadView {
  read: Read;
  /** The code exactly as read (symbology identifier and GS bytes included). */
  text: string;
  /** The code without its AIM symbology identifier: what regular expressions are tested against. */
  data: string;
  barcode: BarcodeParse;
  /** GS1 elements by AI, first occurrence; empty for a plain code. */
  elements: ReadonlyMap<string, Gs1Element>;
}

/** What a value source gave for one read. */
export type ValueResult =
  | { ok: true; value: string }
  /** The source holds nothing (AI absent, group did not take part, field not sent). */
  | { ok: false; absent: true; reason: string }
  /** The source had a value but the lookup table has no entry for it. */
  | { ok: false; absent: false; reason: string };

/** A compiled value: evaluated against a read and the named groups its rule's regex captured. */
export interface CompiledValue {
  /** For messages and `try`: where the value comes from, e.g. `ai 01 → lookup gtinToProduct`. */
  readonly describe: string;
  /** The source's field name when the value comes from a field, so it is not also sent as an attribute. */
  readonly field?: string;
  /** An attribute marked `required: true`: a read without it is refused. */
  readonly required?: true;
  /** An attribute marked `optional: true`: missing is neither noted nor counted. */
  readonly optional?: true;
  evaluate(
    view: ReadView,
    groups: Readonly<Record<string, string | undefined>> | undefined,
  ): ValueResult;
}

/** Lookup tables by name (`lookups` of the configuration). */
export type LookupTables = Readonly<Record<string, Readonly<Record<string, string>>>>;

/**
 * Compiles a value of the configuration (a fixed text or a source, see rules-schema.ts). The
 * configuration was validated: exactly one source is set and named lookup tables exist.
 */
export function compileValue(config: ValueConfig, lookups: LookupTables): CompiledValue {
  if (typeof config === 'string') {
    const value = config;
    return { describe: `"${value}"`, evaluate: () => ({ ok: true, value }) };
  }
  const take = sourceOf(config);
  const table = config.lookup !== undefined ? (lookups[config.lookup] ?? {}) : undefined;
  const fallback = config.default;
  const describe = `${take.describe}${config.lookup !== undefined ? ` → lookup ${config.lookup}` : ''}${fallback !== undefined ? ` (default "${fallback}")` : ''}`;
  return {
    describe,
    ...(config.field !== undefined ? { field: config.field } : {}),
    ...(config.required === true ? { required: true as const } : {}),
    ...(config.optional === true ? { optional: true as const } : {}),
    evaluate(view, groups) {
      const found = take.get(view, groups);
      if (found === undefined) {
        return fallback !== undefined
          ? { ok: true, value: fallback }
          : { ok: false, absent: true, reason: `${take.describe} has no value in this read` };
      }
      if (!table) return { ok: true, value: found };
      const mapped = Object.hasOwn(table, found) ? table[found] : undefined;
      if (mapped !== undefined) return { ok: true, value: mapped };
      if (fallback !== undefined) return { ok: true, value: fallback };
      return {
        ok: false,
        absent: false,
        reason: `${take.describe} is "${found}", which lookup table ${config.lookup} has no entry for`,
      };
    },
  };
}

interface Source {
  describe: string;
  get(
    view: ReadView,
    groups: Readonly<Record<string, string | undefined>> | undefined,
  ): string | undefined;
}

function sourceOf(config: Exclude<ValueConfig, string>): Source {
  if (config.code !== undefined) {
    const whole = config.code === 'whole';
    return {
      describe: whole ? 'the whole code' : 'the code data',
      get: (v) => (whole ? v.text : v.data),
    };
  }
  if (config.ai !== undefined) {
    const ai = config.ai;
    const as = config.as ?? 'text';
    return {
      describe: `AI (${ai})`,
      get: (v) => {
        const e = v.elements.get(ai);
        if (!e) return undefined;
        if (as === 'date') return e.date ?? e.value;
        if (as === 'decimal') return e.decimal ?? e.value;
        return e.value;
      },
    };
  }
  if (config.gs1 !== undefined) {
    return {
      describe: 'the canonical GS1 reference',
      get: (v) =>
        v.barcode.kind === 'gs1' ? canonicalReference(v.barcode.elements)?.uri : undefined,
    };
  }
  if (config.group !== undefined) {
    const group = config.group;
    return { describe: `regex group ${group}`, get: (_v, groups) => nonEmpty(groups?.[group]) };
  }
  if (config.field !== undefined) {
    const field = config.field;
    return { describe: `field ${field}`, get: (v) => fieldOf(v.read, field) };
  }
  if (config.sourceDcp !== undefined) {
    return { describe: 'the DCP the source named', get: (v) => nonEmpty(v.read.dcpKey?.trim()) };
  }
  const value = config.value ?? '';
  return { describe: `"${value}"`, get: () => value };
}

/** A field the source supplied, as text (an input that passes a number through still gives text). */
export function fieldOf(read: Read, field: string): string | undefined {
  const attributes = read.attributes;
  if (!attributes || !Object.hasOwn(attributes, field)) return undefined;
  const v: unknown = attributes[field];
  if (v === undefined || v === null) return undefined;
  return nonEmpty(typeof v === 'string' ? v : String(v));
}

function nonEmpty(s: string | undefined): string | undefined {
  return s === undefined || s === '' ? undefined : s;
}
