import { inputKindSpec, type InputFields } from './input-kind.js';
import type { GatewayConfig, ValueConfig } from './schema.js';

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
      // What the input's kind says its reads carry: the code only, some keys, or a JSON object.
      const has: InputFields = inputKindSpec(input.type)?.fieldSources(input) ?? {
        kind: 'none',
        why: `a ${input.type} input hands only the code`,
      };
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
