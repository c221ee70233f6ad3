import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

// Two owners for SQL (src/buffer/ writes the outbox, src/queries/ only reads it) and one for
// reading secrets (src/config/secrets.ts). These tests read the sources, so a new side door fails CI.

const ROOT = join(import.meta.dirname, '..', '..');
const SRC = join(ROOT, 'src');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sources(join(dir, e.name))
      : e.name.endsWith('.ts')
        ? [join(dir, e.name)]
        : [],
  );
}

/** Files of src/ (relative, with /) whose text matches `pattern`. */
function matching(pattern: RegExp): string[] {
  return sources(SRC)
    .filter((f) => pattern.test(readFileSync(f, 'utf8')))
    .map((f) => relative(ROOT, f).split('\\').join('/'))
    .sort();
}

// SQLite driver imported, a statement prepared or run, a pragma, or the buffer's connection reached.
const SQL =
  /from 'better-sqlite3'|\.prepare\(|\.pragma\(|\bdb\.exec\(|buffer\/connection\.js'|\.db\.(?:open|transaction)\b/;

describe('owners', () => {
  it('runs SQL only in src/buffer/ and src/queries/', () => {
    const all = matching(SQL);
    // The pattern finds what it is meant to find (the store prepares statements).
    expect(all).toContain('src/buffer/store.ts');
    expect(all).toContain('src/queries/reports.ts');
    expect(all.filter((f) => !/^src\/(buffer|queries)\//.test(f))).toEqual([]);
  });

  it('opens the buffer only read-only in src/queries/, and writes nothing there', () => {
    const queries = sources(join(SRC, 'queries')).map((f) => readFileSync(f, 'utf8'));
    const opens = queries.flatMap((text) => [...text.matchAll(/new Database\(([^)]*)\)/g)]);
    expect(opens.length).toBeGreaterThan(0);
    for (const open of opens) expect(open[1]).toMatch(/readonly: true/);
    // A statement that changes the file; TEMP views live in the connection, not in the file.
    const writes = queries.flatMap((text) => [
      ...text.matchAll(/\b(?:INSERT|UPDATE|DELETE|REPLACE|DROP|ALTER|CREATE(?! TEMP VIEW))\b/g),
    ]);
    expect(writes.map((m) => m[0])).toEqual([]);
  });

  it('reads systemd credentials and secret environment variables only in src/config/secrets.ts', () => {
    // Where a secret is looked up: the credentials folder, or an env lookup by a secret's name.
    const lookups = matching(
      /CREDENTIALS_DIRECTORY|env\.SCAN_GATEWAY_(?:CLIENT_SECRET|PROXY_CREDENTIALS|ADMIN_TOKEN|READ_TOKEN|SFTP_PASSWORD)\b|readServerToken|readSecret\s*\(/,
    );
    expect(lookups).toContain('src/config/secrets.ts');
    // The inputs call readSecret (from config/secrets.ts) when they start, so that a reload that
    // restarts one reads its file again; they do not read on their own.
    const callers = lookups.filter((f) => f !== 'src/config/secrets.ts');
    for (const f of callers)
      expect(readFileSync(join(ROOT, f), 'utf8'), f).toMatch(
        /import \{[^}]*\breadSecret\b[^}]*\} from '(?:\.\.\/)+config\/secrets\.js'/,
      );
    expect(matching(/CREDENTIALS_DIRECTORY/).filter((f) => f !== 'src/config/secrets.ts')).toEqual(
      [],
    );
  });
});
