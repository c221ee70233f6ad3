import type { GatewayConfig } from '../config/schema.js';

/** A product model key the configuration can give a scan, and where it is written. */
export interface ProductKeyUse {
  key: string;
  /** Places in the configuration, e.g. `dcps GI-01`, `rule gs1-cells`, `lookups.gtinToProduct`. */
  where: string[];
}

/**
 * Product keys a configuration can give a scan, sorted by key: the DCPs', the rules' fixed values
 * and defaults, and every value of a lookup table a rule takes the product from. The product check
 * compares them with the upstream product list.
 */
export function productKeyUses(config: GatewayConfig): ProductKeyUse[] {
  const uses = new Map<string, Set<string>>();
  const add = (key: string, where: string) => {
    let w = uses.get(key);
    if (!w) uses.set(key, (w = new Set()));
    w.add(where);
  };
  for (const d of config.dcps)
    if (d.productModelKey !== undefined) add(d.productModelKey, `dcps ${d.key}`);
  for (const r of config.rules) {
    const p = r.productModelKey;
    if (p === undefined) continue;
    if (typeof p === 'string') add(p, `rule ${r.name}`);
    else {
      if (p.value !== undefined) add(p.value, `rule ${r.name}`);
      if (p.default !== undefined) add(p.default, `rule ${r.name} (default)`);
      if (p.lookup !== undefined)
        for (const v of Object.values(config.lookups[p.lookup] ?? {}))
          add(v, `lookups.${p.lookup}`);
    }
  }
  return [...uses]
    .map(([key, where]) => ({ key, where: [...where] }))
    .sort((a, b) => a.key.localeCompare(b.key));
}
