import type { z } from 'zod';
import { didYouMean } from './cross-check.js';

/**
 * Turns zod issues into sentences a person can act on: an unknown key with the key meant at that
 * level ("did you mean"), an unknown option with the option meant, a union that failed reported by
 * the branch the value was written for, a missing key named.
 */

/** One zod issue, made readable, with the key path it belongs to. */
export interface ReadableIssue {
  path: (string | number)[];
  message: string;
  /** For an unknown key: the path is the key itself (point at the key, not its value). */
  atKey?: boolean;
}

type AnySchema = { _zod: { def: Record<string, unknown> & { type: string } } };

/** Flattens and words the issues of a failed parse of `root` over `value`. */
export function readableIssues(
  root: unknown,
  value: unknown,
  issues: readonly z.core.$ZodIssue[],
  base: (string | number)[] = [],
): ReadableIssue[] {
  const out: ReadableIssue[] = [];
  for (const issue of issues) {
    const path = [...base, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))];
    switch (issue.code) {
      case 'unrecognized_keys': {
        const known = keysAt(root, path, value);
        for (const k of issue.keys) {
          const hint = known ? didYouMean(k, known) || `; keys here: ${known.join(', ')}` : '';
          out.push({ path: [...path, k], message: `unknown key "${k}"${hint}`, atKey: true });
        }
        break;
      }
      case 'invalid_union': {
        if (issue.errors.length === 0) {
          const given = valueAt(value, path);
          const options = ((issue as { options?: unknown[] }).options ?? []).map(String);
          const discriminator = (issue as { discriminator?: string }).discriminator;
          const shown =
            given === undefined
              ? `${discriminator ?? 'a value'} is missing`
              : `unknown ${discriminator ?? 'value'} "${String(given)}"`;
          out.push({
            path,
            message: `${shown}${typeof given === 'string' ? didYouMean(given, options) : ''}; one of: ${options.join(', ')}`,
          });
          break;
        }
        out.push(...readableIssues(root, value, bestBranch(issue.errors), path));
        break;
      }
      case 'invalid_value': {
        const given = valueAt(value, path);
        const options = issue.values.map(String);
        out.push({
          path,
          message: `${issue.message}${typeof given === 'string' ? didYouMean(given, options) : ''}`,
        });
        break;
      }
      case 'invalid_type': {
        const given = valueAt(value, path);
        const unit = issue.expected === 'number' ? unitMistake(path, given) : undefined;
        out.push({
          path,
          message:
            given === undefined
              ? `required key is missing (expected ${issue.expected})`
              : (unit ?? issue.message),
        });
        break;
      }
      case 'too_small':
      case 'too_big': {
        const unit = unitOfKey(path);
        out.push({ path, message: unit ? `${issue.message} (${unit.name})` : issue.message });
        break;
      }
      default:
        out.push({ path, message: issue.message });
    }
  }
  return out;
}

/**
 * The union branch the value was most likely written for: for an object value, the branch whose
 * errors are not about the value's type as a whole and are fewest.
 */
function bestBranch(
  branches: readonly (readonly z.core.$ZodIssue[])[],
): readonly z.core.$ZodIssue[] {
  const wholeTypeWrong = (errs: readonly z.core.$ZodIssue[]) =>
    errs.some((e) => e.code === 'invalid_type' && e.path.length === 0);
  const candidates = branches.filter((b) => !wholeTypeWrong(b));
  const pool = candidates.length > 0 ? candidates : branches;
  return [...pool].sort((a, b) => a.length - b.length)[0] ?? [];
}

/** The value at a key path, or undefined. */
export function valueAt(value: unknown, path: readonly (string | number)[]): unknown {
  let v = value;
  for (const p of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string | number, unknown>)[p];
  }
  return v;
}

/**
 * The keys an object schema knows at `path` (walking arrays, records, optional and default
 * wrappers, and unions by the branch that fits the value), for "did you mean". Undefined when the
 * schema at that path is not an object.
 */
export function keysAt(
  root: unknown,
  path: readonly (string | number)[],
  value: unknown,
): string[] | undefined {
  let schema = unwrap(root as AnySchema, valueAt(value, []));
  for (let i = 0; i < path.length && schema; i++) {
    const p = path[i]!;
    const def = schema._zod.def;
    let next: AnySchema | undefined;
    if (def.type === 'array') next = def.element as AnySchema;
    else if (def.type === 'record') next = def.valueType as AnySchema;
    else if (def.type === 'object') next = (def.shape as Record<string, AnySchema>)[String(p)];
    schema = next ? unwrap(next, valueAt(value, path.slice(0, i + 1))) : undefined;
  }
  if (!schema || schema._zod.def.type !== 'object') return undefined;
  return Object.keys(schema._zod.def.shape as Record<string, unknown>);
}

function unwrap(schema: AnySchema, value: unknown): AnySchema | undefined {
  let s: AnySchema | undefined = schema;
  for (let guard = 0; s && guard < 20; guard++) {
    const def: AnySchema['_zod']['def'] = s._zod.def;
    if (
      ['optional', 'default', 'prefault', 'nullable', 'readonly', 'catch', 'nonoptional'].includes(
        def.type,
      )
    )
      s = def.innerType as AnySchema;
    else if (def.type === 'pipe') s = def.in as AnySchema;
    // `inputs` entries: the union of the registered input kinds, built on first use.
    else if (def.type === 'lazy') s = (def.getter as () => AnySchema)();
    else if (def.type === 'union')
      s = pickOption(def.options as AnySchema[], value, def.discriminator as string | undefined);
    else return s;
  }
  return s;
}

function pickOption(
  options: AnySchema[],
  value: unknown,
  discriminator: string | undefined,
): AnySchema | undefined {
  const objects = options
    .map((o) => unwrap(o, value))
    .filter((o): o is AnySchema => o?._zod.def.type === 'object');
  if (value === null || typeof value !== 'object') return objects[0];
  const given = value as Record<string, unknown>;
  if (discriminator !== undefined) {
    const hit = objects.find((o) => {
      const d = (o._zod.def.shape as Record<string, AnySchema>)[discriminator]?._zod.def;
      return d?.type === 'literal' && (d.values as unknown[]).includes(given[discriminator]);
    });
    if (hit) return hit;
  }
  // Otherwise the branch that knows most of the keys written.
  let best: AnySchema | undefined;
  let bestScore = -1;
  for (const o of objects) {
    const shape = o._zod.def.shape as Record<string, unknown>;
    const score = Object.keys(given).filter((k) => k in shape).length;
    if (score > bestScore) {
      best = o;
      bestScore = score;
    }
  }
  return best;
}

/** A key's unit, from its name's suffix (the schema's naming rule: `…Ms`, `…Sec`, `…Bytes`, `…Days`). */
interface KeyUnit {
  /** "milliseconds" */
  name: string;
  /** How many of this unit one second, one byte or one day is (for converting what was written). */
  perBase: number;
  base: 'time' | 'bytes' | 'days';
  example: string;
}

const UNITS: readonly [RegExp, KeyUnit][] = [
  [/Ms$/, { name: 'milliseconds', perBase: 1000, base: 'time', example: '900000 for 15 min' }],
  [/(Sec|PerSec)$/, { name: 'seconds', perBase: 1, base: 'time', example: '3600 for 1 h' }],
  [/Bytes$/, { name: 'bytes', perBase: 1, base: 'bytes', example: '1048576 for 1 MiB' }],
  [/Days$/, { name: 'days', perBase: 1, base: 'days', example: '30 for a month' }],
];

function unitOfKey(path: readonly (string | number)[]): KeyUnit | undefined {
  const last = path[path.length - 1];
  if (typeof last !== 'string' || last.endsWith('BytesPerSec')) return undefined;
  return UNITS.find(([re]) => re.test(last))?.[1];
}

/** Seconds per written time unit, for "15 min", "2h", "500 ms". */
const TIME_WORDS: Record<string, number> = {
  ms: 0.001,
  s: 1,
  sec: 1,
  secs: 1,
  second: 1,
  seconds: 1,
  m: 60,
  min: 60,
  mins: 60,
  minute: 60,
  minutes: 60,
  h: 3600,
  hour: 3600,
  hours: 3600,
  d: 86_400,
  day: 86_400,
  days: 86_400,
};
/** Bytes per written size unit. */
const BYTE_WORDS: Record<string, number> = {
  b: 1,
  kb: 1000,
  mb: 1e6,
  gb: 1e9,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  k: 1024,
  m: 1024 ** 2,
  g: 1024 ** 3,
};

/**
 * A number key given as text with a unit (`idleTimeoutMs: "15 min"`) is told which unit
 * the key takes, with the number the text meant where it can be read ("900000 for 15 min"), else an
 * example. Undefined for keys without a unit suffix or values that are not text.
 */
export function unitMistake(
  path: readonly (string | number)[],
  given: unknown,
): string | undefined {
  const unit = unitOfKey(path);
  const key = String(path[path.length - 1]);
  if (!unit || typeof given !== 'string') return undefined;
  const m = /^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)?\s*$/.exec(given);
  let meant: number | undefined;
  if (m) {
    const n = Number(m[1]);
    const word = (m[2] ?? '').toLowerCase();
    if (word === '')
      return `${JSON.stringify(given)} is text (in quotes); ${key} takes a number of ${unit.name}: write ${key}: ${m[1]} without quotes`;
    if (unit.base === 'time' && word in TIME_WORDS) meant = n * TIME_WORDS[word]! * unit.perBase;
    else if (unit.base === 'bytes' && word in BYTE_WORDS) meant = n * BYTE_WORDS[word]!;
    else if (unit.base === 'days' && (word === 'd' || word === 'day' || word === 'days')) meant = n;
  }
  const example =
    meant !== undefined && Number.isFinite(meant)
      ? `${Math.round(meant)} for ${given.trim()}`
      : unit.example;
  return `${JSON.stringify(given)} is text; ${key} takes a number of ${unit.name}, e.g. ${example}`;
}
