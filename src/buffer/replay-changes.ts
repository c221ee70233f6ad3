/**
 * One field of a Scan (contract §2.5) that a replay changes: its text in the dead letter (`from`,
 * null when it had none or for a rejected read, which never was a scan) and in the new scan (`to`,
 * null when the new scan drops it; an empty list counts as none). Lists are one text: parents
 * comma-separated, attributes as `key=value` pairs.
 */
export interface ScanFieldChange {
  field: string;
  from: string | null;
  to: string | null;
}

/** The Scan's fields in the contract's order (§2.5). */
const SCAN_FIELDS = [
  'reference',
  'timeStamp',
  'dcpKey',
  'productModelKey',
  'supplierKey',
  'clientKey',
  'parents',
  'attributes',
] as const;

/** A Scan's fields as text, from its JSON (a body that is not JSON gives none). */
function scanFields(body: string | null): Record<string, string | null> {
  let o: Record<string, unknown> = {};
  try {
    const v: unknown = body === null ? null : JSON.parse(body);
    if (v && typeof v === 'object' && !Array.isArray(v)) o = v as Record<string, unknown>;
  } catch {
    // a stored body that is not JSON: every field of the new scan counts as a change
  }
  const text = (v: unknown): string | null => {
    if (v === undefined || v === null) return null;
    // An empty list is no value, as a missing one: no change between the two.
    if (Array.isArray(v))
      return v.length === 0
        ? null
        : v
            .map((x) =>
              x && typeof x === 'object' && 'key' in x
                ? `${String((x as { key: unknown }).key)}=${String((x as { value?: unknown }).value)}`
                : String(x),
            )
            .join(', ');
    return typeof v === 'string' ? v : JSON.stringify(v);
  };
  return Object.fromEntries(SCAN_FIELDS.map((f) => [f, text(o[f])]));
}

/** The fields of the Scan `newBody` that differ from the dead letter's `oldBody`, in the contract's order. */
export function scanChanges(oldBody: string | null, newBody: string): ScanFieldChange[] {
  const before = scanFields(oldBody);
  const after = scanFields(newBody);
  return SCAN_FIELDS.filter((f) => before[f] !== after[f]).map((f) => ({
    field: f,
    from: before[f] ?? null,
    to: after[f] ?? null,
  }));
}
