import type { JsonFieldsConfig } from './schema-parts.js';
import type { Read } from './types.js';

/**
 * One read written as JSON, as MQTT readers, MES software (HTTP ingest) and ndjson/json files send
 * it: `{ "code": "…", "ts": "…", "dcp": "…", "parents": […], "attributes": {…} }`, field names
 * configurable as dotted paths ({@link JsonFieldsConfig}). Pure validation, shared by every
 * adapter so the same object means the same read whichever way it came in.
 */

/** The field paths used when a configuration does not set them. */
export const DEFAULT_JSON_FIELDS: JsonFieldsConfig = {
  code: 'code',
  time: 'ts',
  dcp: 'dcp',
  parents: 'parents',
  attributes: 'attributes',
};

/** The parts of a {@link Read} a JSON object supplies. */
export interface JsonReadFields {
  /** The barcode text, exactly as sent. */
  code: string;
  sourceTime?: string;
  dcpKey?: string;
  parents?: string[];
  attributes?: Record<string, string>;
}

/** The outcome of {@link jsonRead}: the read's fields, or the offending field and why. */
export type JsonReadResult =
  | { ok: true; fields: JsonReadFields }
  /** `field` is the offending path (`code`, `attributes.cellVoltage`), '' for the object itself. */
  | { ok: false; field: string; reason: string };

/**
 * Validates one decoded JSON value as a read.
 *
 * Rules: the value is an object; `code` is non-blank text (a JSON number is refused: it would
 * lose leading zeros); `ts` and `dcp`, when present and not null, are text (`dcp` without white
 * space); `parents` is text or a list of texts (empty text = none); `attributes` is an object
 * whose values are text, finite numbers or booleans, taken as text (`3.652` → `"3.652"`); each
 * `attributeFields` path, when present and not null, holds such a value too, taken under its key.
 * Other fields are ignored (readers add their own, such as `deviceId`).
 */
export function jsonRead(
  value: unknown,
  paths: JsonFieldsConfig = DEFAULT_JSON_FIELDS,
): JsonReadResult {
  if (!isObject(value)) return fail('', `expected a JSON object, got ${describe(value)}`);

  const code = at(value, paths.code);
  if (code === undefined || code === null) return fail(paths.code, 'is missing');
  if (typeof code !== 'string') return fail(paths.code, `must be text, got ${describe(code)}`);
  if (code.trim() === '') return fail(paths.code, 'is empty');
  const fields: JsonReadFields = { code };

  const time = at(value, paths.time);
  if (time !== undefined && time !== null) {
    if (typeof time !== 'string')
      return fail(paths.time, `must be ISO 8601 text, got ${describe(time)}`);
    if (time.trim() !== '') fields.sourceTime = time;
  }

  const dcp = at(value, paths.dcp);
  if (dcp !== undefined && dcp !== null) {
    if (typeof dcp !== 'string') return fail(paths.dcp, `must be text, got ${describe(dcp)}`);
    if (/\s/.test(dcp)) return fail(paths.dcp, 'must not contain white space');
    if (dcp !== '') fields.dcpKey = dcp;
  }

  const parents = at(value, paths.parents);
  if (parents !== undefined && parents !== null) {
    if (typeof parents === 'string') {
      if (parents.trim() !== '') fields.parents = [parents];
    } else if (Array.isArray(parents)) {
      const list: string[] = [];
      for (const [i, p] of parents.entries()) {
        if (typeof p !== 'string' || p.trim() === '')
          return fail(`${paths.parents}[${i}]`, `must be non-empty text, got ${describe(p)}`);
        list.push(p);
      }
      if (list.length > 0) fields.parents = list;
    } else {
      return fail(paths.parents, `must be text or a list of texts, got ${describe(parents)}`);
    }
  }

  const attributes = at(value, paths.attributes);
  if (attributes !== undefined && attributes !== null) {
    if (!isObject(attributes))
      return fail(paths.attributes, `must be an object, got ${describe(attributes)}`);
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(attributes)) {
      const path = `${paths.attributes}.${k}`;
      if (k.trim() === '') return fail(path, 'attribute key is empty');
      if (typeof v === 'string') out[k] = v;
      else if (typeof v === 'number' && Number.isFinite(v)) out[k] = String(v);
      else if (typeof v === 'boolean') out[k] = String(v);
      else return fail(path, `must be text, a number or a boolean, got ${describe(v)}`);
    }
    if (Object.keys(out).length > 0) fields.attributes = out;
  }

  // Fields anywhere in the payload (`attributeFields`), the way CSV's attributeColumns takes columns.
  for (const [key, path] of Object.entries(paths.attributeFields ?? {})) {
    const v = at(value, path);
    if (v === undefined || v === null) continue;
    let text: string;
    if (typeof v === 'string') text = v;
    else if ((typeof v === 'number' && Number.isFinite(v)) || typeof v === 'boolean')
      text = String(v);
    else
      return fail(
        path,
        `(attribute ${key}) must be text, a number or a boolean, got ${describe(v)}`,
      );
    fields.attributes = { ...fields.attributes, [key]: text };
  }
  return { ok: true, fields };
}

/** A {@link Read} of validated fields; `raw` is the code's UTF-8 bytes. `dcpKey` from the JSON wins over `fallbackDcp`. */
export function readFromJsonFields(
  fields: JsonReadFields,
  inputId: string,
  receivedAt: Date,
  origin?: Record<string, string | number>,
  fallbackDcp?: string,
): Read {
  const dcpKey = fields.dcpKey ?? fallbackDcp;
  return {
    inputId,
    raw: Buffer.from(fields.code, 'utf8'),
    receivedAt,
    ...(fields.sourceTime !== undefined ? { sourceTime: fields.sourceTime } : {}),
    ...(dcpKey !== undefined ? { dcpKey } : {}),
    ...(fields.parents ? { parents: fields.parents } : {}),
    ...(fields.attributes ? { attributes: fields.attributes } : {}),
    ...(origin ? { origin } : {}),
  };
}

/** `field: reason`, or the reason alone for the object itself: the text stored with a rejection. */
export function jsonReadProblem(result: { field: string; reason: string }): string {
  return result.field === '' ? result.reason : `field "${result.field}" ${result.reason}`;
}

function at(value: Record<string, unknown>, path: string): unknown {
  let current: unknown = value;
  for (const part of path.split('.')) {
    if (Array.isArray(current) && /^\d+$/.test(part)) current = current[Number(part)];
    else if (isObject(current) && Object.hasOwn(current, part)) current = current[part];
    else return undefined;
  }
  return current;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string')
    return `text ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}

function fail(field: string, reason: string): JsonReadResult {
  return { ok: false, field, reason };
}
