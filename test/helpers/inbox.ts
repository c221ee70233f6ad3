import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Drops `<name>.csv` with `rows` reads (`barcode,read_at`, references `<name>-00000`…) into
 * `inbox` atomically: written as `.csv.tmp`, then renamed, so the files input never sees it half
 * written. Answers the references in order.
 */
export function dropCsv(inbox: string, name: string, rows: number): string[] {
  const refs = Array.from({ length: rows }, (_, i) => `${name}-${String(i).padStart(5, '0')}`);
  const lines = [
    'barcode,read_at',
    ...refs.map(
      (r, i) =>
        `${r},2026-11-18T07:${String(Math.floor(i / 60) % 60).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}+01:00`,
    ),
  ];
  const tmp = join(inbox, `${name}.csv.tmp`);
  writeFileSync(tmp, `${lines.join('\n')}\n`);
  renameSync(tmp, join(inbox, `${name}.csv`));
  return refs;
}
