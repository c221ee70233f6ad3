import type Database from 'better-sqlite3';
import {
  canonicalOf,
  namesInstance,
  readQuery,
  referencesWithKeys,
  searchByValue,
} from './key-search.js';
import type { Gs1Key } from '../buffer/item-keys.js';
import { isKnown, traceItem, type ItemTrace, type TraceOptions } from './items.js';

/**
 * "What happened to this item?" for whatever a person has of it: the reference exactly, or any
 * form of its GS1 identifier, or one AI's value. In this order:
 *
 * 1. the reference exactly as given (the gateway's references are found as they always were);
 * 2. a GS1 form (bracketed `(01)…(21)…`, a raw element string with or without `]d2`/`]C1`/`]Q3`,
 *    the GS typed as `<GS>`, `\x1d` or `^]`, a Digital Link URI on any domain): its canonical
 *    reference, then the scans carrying its identifying keys (scan_keys, item-keys.ts), so that an
 *    item whose reference is an older raw read is found too. A GTIN alone, or GTIN + lot, names a
 *    class of items: the items of that model or lot are listed (`byValue`);
 * 3. anything else: a value of an identifying AI (a serial, an SSCC, a lot, a GTIN); one item is
 *    traced, several are listed by AI with counts, one page each.
 *
 * When nothing matches, the references starting with the query are listed, as before.
 */
export function lookupItem(
  db: Database.Database,
  query: string,
  options: TraceOptions = {},
): ItemTrace {
  const reading = readQuery(query);
  const canonical = reading.canonical;
  const about = canonical ? { canonical: canonical.uri, canonicalWhy: canonical.why } : {};
  // Whole traces only of what is found: a miss is told by a seek (isKnown), not by a trace.
  const found = (reference: string, sameItem: readonly string[]): ItemTrace => {
    const trace = traceItem(db, reference, options);
    const others = sameItem.filter((r) => r !== reference);
    return {
      ...trace,
      ...(reference !== query ? { asked: query } : {}),
      ...about,
      ...(others.length > 0 ? { sameItem: others } : {}),
    };
  };
  const queryKnown = isKnown(db, query);

  if (canonical) {
    const keys: Gs1Key[] = canonical.identifying.map((e) => [e.ai, e.value] as const);
    const carrying = referencesWithKeys(db, keys);
    const instance = namesInstance(canonical);
    // Every scan carrying a serialised GTIN's or an SSCC's keys is that item; for a GTIN alone or a
    // lot, only the references whose own canonical form is the query's are the item itself.
    const same = carrying.filter((r) => instance || canonicalOf(r) === canonical.uri);
    if (queryKnown) return found(query, same);
    if (same.includes(canonical.uri) || isKnown(db, canonical.uri))
      return found(canonical.uri, same);
    if (same.length > 0) return found(same[0]!, same);
    // A class of items (a model, a lot): the items carrying its most specific key.
    const last = canonical.identifying[canonical.identifying.length - 1]!;
    const byValue = searchByValue(db, last.value, { ai: last.ai, limit: options.limit });
    return {
      ...traceItem(db, query, options),
      ...about,
      ...(byValue.length > 0 ? { byValue } : {}),
    };
  }
  if (queryKnown) return traceItem(db, query, options);

  const values = reading.elements
    ? reading.elements.map((e) => ({ value: e.value, ai: e.ai }))
    : reading.values.map((value) => ({ value, ai: undefined }));
  const byValue = values.flatMap(({ value, ai }) =>
    searchByValue(db, value, { ...(ai !== undefined ? { ai } : {}), limit: options.limit }),
  );
  const items = [...new Set(byValue.flatMap((m) => m.items.map((i) => i.reference)))];
  const complete = byValue.every((m) => m.next === null);
  // One item, perhaps under several references (raw reads of two carriers): traced.
  if (items.length > 0 && complete && new Set(items.map(canonicalOf)).size === 1)
    return { ...found(items[0]!, items), byValue };
  const exact = traceItem(db, query, options);
  return byValue.length === 0 ? exact : { ...exact, byValue };
}
