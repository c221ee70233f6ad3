import { DRAIN_MIGRATIONS } from './migrations-drain.js';
import { SCHEMA_MIGRATIONS } from './migrations-schema.js';

/**
 * Schema migrations of the SQLite buffer, by `PRAGMA user_version`: step `i` takes a buffer from
 * version `i` to `i + 1` (open.ts runs them, each in its own transaction). Append only: a released
 * migration is never edited, so a gateway upgraded in place walks every step once. Kept in two
 * files by what the steps are for: the schema's features (migrations-schema.ts, 1 to 9) and the
 * drain's cost in SQLite (migrations-drain.ts, 10 on); a new step goes at the end of the second.
 */
export const MIGRATIONS: readonly string[] = [...SCHEMA_MIGRATIONS, ...DRAIN_MIGRATIONS];
