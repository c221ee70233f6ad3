import type { GatewayConfig, InputConfig, ValueConfig } from './schema.js';

/**
 * Where a rule's `{ field: … }` can find a value: the fields each input hands the mapping. A
 * serial or TCP scanner, an MQTT text payload and a `lines` file hand none; a CSV file the keys of
 * its `attributeColumns`; a JSON input (MQTT json, HTTP ingest, ndjson/json files) the members of
 * its `attributes` object, whatever their names, and the keys of its `attributeFields`.
 */
type InputFields =
  | { kind: 'none'; why: string }
  | { kind: 'only'; keys: string[]; why: string }
  | { kind: 'json'; keys: string[]; objectPath: string };

function fieldsOf(input: InputConfig): InputFields {
  switch (input.type) {
    case 'serial':
    case 'tcp':
      return { kind: 'none', why: `a ${input.type} input hands only the code` };
    case 'mqtt':
      if (input.format === 'text')
        return { kind: 'none', why: 'its payloads are text (format: text): only the code' };
      return {
        kind: 'json',
        keys: Object.keys(input.fields.attributeFields ?? {}),
        objectPath: input.fields.attributes,
      };
    case 'http':
      return {
        kind: 'json',
        keys: Object.keys(input.fields.attributeFields ?? {}),
        objectPath: input.fields.attributes,
      };
    case 'files':
      if (input.format === 'lines')
        return { kind: 'none', why: 'its files are lines: only the code' };
      if (input.format === 'csv')
        return {
          kind: 'only',
          keys: Object.keys(input.attributeColumns ?? {}),
          why: 'its CSV rows give fields only by attributeColumns',
        };
      return {
        kind: 'json',
        keys: Object.keys(input.fields.attributeFields ?? {}),
        objectPath: input.fields.attributes,
      };
  }
}

/** A rule's value source that a configured input can never (or only by its `attributes` object) fill. */
export interface FieldSourceNote {
  /** The key, e.g. `rules[eol].attributes.voltage`. */
  where: string;
  input: string;
  /** `never`: the input cannot supply the field; `objectOnly`: only a member of the payload's attributes object would. */
  kind: 'never' | 'objectOnly';
  message: string;
}

/**
 * The rules' `{ field: … }` sources that an input in the rule's scope never supplies (the field
 * is absent on every read of that input, so the value is never there), and those a JSON input
 * supplies only when the payload carries them inside its `attributes` object. For `config check`
 * and `try`; the mapping notes each read that lacked the value (mapper.ts).
 */
export function fieldSourceNotes(config: GatewayConfig, onlyInput?: string): FieldSourceNote[] {
  const out: FieldSourceNote[] = [];
  for (const rule of config.rules) {
    const values: [string, ValueConfig | undefined][] = [
      ['productModelKey', rule.productModelKey],
      ['supplierKey', rule.supplierKey],
      ['clientKey', rule.clientKey],
      ['dcp', rule.dcp],
      ...Object.entries(rule.attributes).map(([k, v]): [string, ValueConfig] => [
        `attributes.${k}`,
        v,
      ]),
      ...rule.parents.map((p, i): [string, ValueConfig] => [`parents[${i}]`, p]),
    ];
    const fields = values.flatMap(([key, v]) =>
      typeof v === 'object' && v.field !== undefined && v.default === undefined
        ? [[key, v.field] as const]
        : [],
    );
    if (fields.length === 0) continue;
    for (const input of config.inputs) {
      if (onlyInput !== undefined && input.id !== onlyInput) continue;
      const inScope =
        (rule.inputs === undefined && rule.dcps === undefined) ||
        rule.inputs?.includes(input.id) ||
        rule.dcps?.includes(input.dcp);
      if (!inScope) continue;
      const has = fieldsOf(input);
      for (const [key, field] of fields) {
        const where = `rules[${rule.name}].${key}`;
        const source = `{ field: ${field} }`;
        if (has.kind === 'none') {
          out.push({
            where,
            input: input.id,
            kind: 'never',
            message: `${source} never has a value on input ${input.id}: ${has.why}`,
          });
        } else if (has.kind === 'only' && !has.keys.includes(field)) {
          out.push({
            where,
            input: input.id,
            kind: 'never',
            message: `${source} never has a value on input ${input.id}: ${has.why} (${has.keys.join(', ') || 'none'}); add ${field} there`,
          });
        } else if (has.kind === 'json' && !has.keys.includes(field)) {
          out.push({
            where,
            input: input.id,
            kind: 'objectOnly',
            message: `${source} has a value on input ${input.id} only when a payload carries ${field} inside its "${has.objectPath}" object; for a field elsewhere in the payload add fields.attributeFields: { ${field}: <path> } to the input`,
          });
        }
      }
    }
  }
  return out;
}
