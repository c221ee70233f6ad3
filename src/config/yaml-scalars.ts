import { isMap, isScalar, isSeq } from 'yaml';

/**
 * Keys whose values are text even when YAML reads them as numbers: keys and names (`4711`), GS1
 * AIs (`ai: 01` is "01", not 1), fixed values. YAML would turn `01` into 1 and `09521234543213`
 * into 9521234543213, losing the leading zeros that GS1 numbers carry.
 */
const TEXT_KEYS = new Set([
  'ai',
  'key',
  'id',
  'dcp',
  'name',
  'productModelKey',
  'supplierKey',
  'clientKey',
  'clientId',
  'value',
  'default',
]);
/** Lists whose items are text: AIs, scope lists, parents, no-read texts. */
const TEXT_LISTS = new Set(['ais', 'inputs', 'dcps', 'parents', 'noReadStrings']);

/**
 * Rewrites plain scalars that YAML read as numbers or booleans back to the text as written, where
 * the schema wants text: see {@link TEXT_KEYS}, {@link TEXT_LISTS}, every key and value of
 * `lookups` tables, and fixed `attributes` values.
 */
export function keepTextAsWritten(node: unknown, path: (string | number)[]): void {
  const asText = (scalar: unknown) => {
    if (
      isScalar(scalar) &&
      (typeof scalar.value === 'number' || typeof scalar.value === 'boolean') &&
      typeof scalar.source === 'string'
    ) {
      scalar.value = scalar.source;
    }
  };
  if (isMap(node)) {
    const inTable = path.length === 2 && path[0] === 'lookups';
    for (const pair of node.items) {
      if (inTable) asText(pair.key);
      const k = isScalar(pair.key) ? String(pair.key.value) : '';
      keepTextAsWritten(pair.value, [...path, k]);
    }
    return;
  }
  if (isSeq(node)) {
    node.items.forEach((item, i) => keepTextAsWritten(item, [...path, i]));
    return;
  }
  const last = path[path.length - 1];
  const parent = path[path.length - 2];
  if (
    (typeof last === 'string' && TEXT_KEYS.has(last)) ||
    (typeof last === 'number' &&
      typeof parent === 'string' &&
      TEXT_LISTS.has(parent) &&
      path.length >= 3) ||
    (path.length === 3 && path[0] === 'lookups') ||
    (typeof parent === 'string' && parent === 'attributes')
  ) {
    asText(node);
  }
}
