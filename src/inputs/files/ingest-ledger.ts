import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../../log.js';
import { type Clock, systemClock } from '../../clock.js';

/** Name of the ledger in the watched folder (a dotfile, so the watcher ignores it). */
export const LEDGER_FILE = '.ingested.json';

/** Most entries kept, newest first, whatever their age: bounds the file at a few MB. */
export const LEDGER_MAX_ENTRIES = 50_000;

interface LedgerEntry {
  /** When the content was committed (ISO 8601). */
  at: string;
  /** The file's name then. */
  name: string;
}

/**
 * Content hashes of the files this folder's input has committed, in `<dir>/.ingested.json`
 * (`{ "version": 1, "files": { "<sha256>": { "at": "…", "name": "…" } } }`), so a file dropped
 * again with the same content, or left behind by a crash between its commit and its move, is not
 * ingested twice.
 *
 * It is written after the commit and before the move: a crash between the commit and this write
 * still re-ingests the file once (the buffer recording the hash in the commit's own transaction
 * closes that gap). Entries older than `retentionDays` are dropped when the ledger is written.
 */
export class IngestLedger {
  private readonly path: string;
  private files = new Map<string, LedgerEntry>();

  constructor(
    dir: string,
    private readonly retentionDays: number,
    private readonly logger: Logger,
    private readonly now: Clock = systemClock,
  ) {
    this.path = join(dir, LEDGER_FILE);
  }

  /** Reads the ledger; a missing file is an empty ledger, a corrupt one is logged and started afresh. */
  async load(): Promise<void> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
        this.logger.warn(
          { err, path: this.path },
          'cannot read the ingested-files ledger; starting empty',
        );
      this.files = new Map();
      return;
    }
    try {
      const parsed = JSON.parse(text) as { files?: Record<string, LedgerEntry> };
      this.files = new Map(
        Object.entries(parsed.files ?? {}).filter(([, e]) => typeof e?.at === 'string'),
      );
    } catch (err) {
      this.logger.warn(
        { err, path: this.path },
        'ingested-files ledger is corrupt; starting empty',
      );
      this.files = new Map();
    }
  }

  /** The earlier ingestion of this content, if it is remembered and recent enough. */
  find(sha256: string): LedgerEntry | undefined {
    const entry = this.files.get(sha256);
    return entry && !this.expired(entry) ? entry : undefined;
  }

  /** Remembers content committed now and writes the ledger (temporary file, then rename). */
  async record(sha256: string, name: string): Promise<void> {
    this.files.delete(sha256);
    this.files.set(sha256, { at: new Date(this.now()).toISOString(), name });
    for (const [hash, entry] of this.files) if (this.expired(entry)) this.files.delete(hash);
    while (this.files.size > LEDGER_MAX_ENTRIES) {
      const oldest = this.files.keys().next().value;
      if (oldest === undefined) break;
      this.files.delete(oldest);
    }
    const tmp = `${this.path}.tmp`;
    await writeFile(
      tmp,
      JSON.stringify({ version: 1, files: Object.fromEntries(this.files) }),
      'utf8',
    );
    await rename(tmp, this.path);
  }

  private expired(entry: LedgerEntry): boolean {
    return this.now() - Date.parse(entry.at) > this.retentionDays * 24 * 3600_000;
  }
}
