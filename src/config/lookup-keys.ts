import { parseBarcode } from '../gs1/index.js';
import type { GatewayConfig, ValueConfig } from './schema.js';

/** A lookup key no read can match, and where the lookup is used. */
export interface LookupKeyNote {
  /** `lookups.gtinToProduct["09521234543214"]`. */
  where: string;
  message: string;
}

/** Most keys named per lookup table: a table of wrong keys is named by its first ones and a count. */
const NAMED_PER_TABLE = 5;

/**
 * Keys of lookup tables fed by a GS1 AI (`{ ai: '01', lookup: gtinToProduct }`) that are no valid
 * value of that AI: a wrong check digit, the wrong length, characters the AI does not allow. The
 * mapping looks up the value as carried, which the GS1 parser accepted, so such a key is never
 * matched and a read that should have used it takes the `default` or is refused. For
 * `config check`: a note for each such key. Only values taken as text (`as` omitted or `text`).
 */
export function lookupKeyNotes(config: GatewayConfig): LookupKeyNote[] {
  const uses = new Map<string, { ais: Set<string>; where: Set<string> }>();
  const add = (v: ValueConfig | undefined, where: string) => {
    if (typeof v !== 'object' || v.ai === undefined || v.lookup === undefined) return;
    if (v.as !== undefined && v.as !== 'text') return;
    let u = uses.get(v.lookup);
    if (!u) uses.set(v.lookup, (u = { ais: new Set(), where: new Set() }));
    u.ais.add(v.ai);
    u.where.add(where);
  };
  for (const r of config.rules) {
    add(r.reference, `rules[${r.name}].reference`);
    add(r.dcp, `rules[${r.name}].dcp`);
    add(r.productModelKey, `rules[${r.name}].productModelKey`);
    add(r.supplierKey, `rules[${r.name}].supplierKey`);
    add(r.clientKey, `rules[${r.name}].clientKey`);
    for (const [k, v] of Object.entries(r.attributes)) add(v, `rules[${r.name}].attributes.${k}`);
    r.parents.forEach((p, i) => add(p, `rules[${r.name}].parents[${i}]`));
  }
  for (const c of config.containers) add(c.reference, `containers[${c.name}].reference`);

  const out: LookupKeyNote[] = [];
  for (const [table, use] of uses) {
    const keys = Object.keys(config.lookups[table] ?? {});
    const bad: { key: string; why: string }[] = [];
    for (const key of keys) {
      // Valid for one of the AIs that feed the table is enough: that read can match it.
      const reasons: string[] = [];
      for (const ai of use.ais) {
        const parse = parseBarcode(`(${ai})${key}`, { checkPairings: false });
        if (parse.kind === 'gs1') {
          reasons.length = 0;
          break;
        }
        reasons.push(parse.kind === 'invalid' ? parse.reason : `not a value of AI ${ai}`);
      }
      if (reasons.length > 0) bad.push({ key, why: reasons.join('; ') });
    }
    const fedBy = [...use.ais].map((a) => `AI ${a}`).join(' or ');
    const usedAt = [...use.where].join(', ');
    for (const b of bad.slice(0, NAMED_PER_TABLE))
      out.push({
        where: `lookups.${table}[${JSON.stringify(b.key)}]`,
        message: `no read can match this key: the table is fed by ${fedBy} (${usedAt}), and ${JSON.stringify(b.key)} is no valid value of it (${b.why})`,
      });
    if (bad.length > NAMED_PER_TABLE)
      out.push({
        where: `lookups.${table}`,
        message: `${bad.length - NAMED_PER_TABLE} more keys no read can match (fed by ${fedBy})`,
      });
  }
  return out;
}
