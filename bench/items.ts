import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sqlOf } from '../test/helpers/buffer-sql.js';
import { BufferReader } from '../src/queries/reader.js';
import { BufferStore } from '../src/buffer/store.js';
import { judge, type BenchResult } from './lib/report.js';
import { median, nowMs, percentile } from './lib/system.js';

export interface ItemsBenchOptions {
  /** Scans in the buffer (packs of 1 pack + 8 modules + 96 cells = 105 scans each). */
  scans: number;
  /** Lookups timed per kind. */
  lookups: number;
}

export const ITEMS_DEFAULTS: ItemsBenchOptions = { scans: 10_000_000, lookups: 200 };

/** Scans per pack: the pack, its 8 modules, 12 cells per module. */
const PER_PACK = 105;

/** The target: a lookup answers in less than this, in ms. */
export const LOOKUP_TARGET_MS = 50;

/**
 * Fills the buffer with `scans` delivered scans in a pack → module → cell genealogy, by a direct
 * bulk insert (a recursive CTE, one statement per table). The schema is the store's own (every
 * migration ran); to keep the build in minutes, the scans' triggers and secondary indexes are
 * dropped during the insert and the lookup indexes (`scans_reference`, `scan_parents`) built once
 * afterwards, as the migration builds them on an existing buffer. The counts the triggers keep are
 * therefore not right in this file: only lookups are measured on it.
 */
function fill(path: string, scans: number): void {
  const store = BufferStore.openAt(path);
  try {
    const db = sqlOf(store);
    db.pragma('synchronous = OFF');
    db.pragma('cache_size = -262144');
    const triggers = db
      .prepare(
        `SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN ('scan_rows', 'scan_bodies')`,
      )
      .pluck()
      .all() as string[];
    for (const t of triggers) db.exec(`DROP TRIGGER ${t}`);
    // Rebuilt afterwards from their own definitions (some are partial: the store's migrations).
    const indexes = db
      .prepare(
        `SELECT sql FROM sqlite_master WHERE type = 'index' AND name IN ('scans_reference', 'scans_state', 'scans_batch', 'scans_read')`,
      )
      .pluck()
      .all() as string[];
    for (const i of ['scans_reference', 'scans_state', 'scans_batch', 'scans_read'])
      db.exec(`DROP INDEX ${i}`);
    const batches = Math.ceil(scans / 1000);
    db.transaction(() => {
      db.prepare(
        `WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ?)
         INSERT INTO batches (id, mode, state, scan_count, bytes, created_at, uploaded_at, finished_at, upstream_state, request_id)
         SELECT x, 'direct', 'done', 1000, 0, '2026-11-01T00:00:00.000Z', '2026-11-01T00:00:01.000Z', '2026-11-01T00:00:02.000Z', 'Success', 'req-' || x FROM n`,
      ).run(batches);
      // x - 1 = pack * 105 + k: k = 0 the pack, 1..8 its modules, 9..104 its cells (12 per module).
      const ref = `CASE WHEN k = 0 THEN printf('PK-%07d', p) WHEN k <= 8 THEN printf('MOD-%07d-%d', p, k) ELSE printf('CELL-%07d-%d-%02d', p, (k - 9) / 12 + 1, (k - 9) % 12) END`;
      const parent = `CASE WHEN k = 0 THEN NULL WHEN k <= 8 THEN printf('PK-%07d', p) ELSE printf('MOD-%07d-%d', p, (k - 9) / 12 + 1) END`;
      db.prepare(
        `WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ?),
              g AS (SELECT x, (x - 1) / ${PER_PACK} AS p, (x - 1) % ${PER_PACK} AS k FROM n)
         INSERT INTO reads (id, input_id, received_at, raw, dcp_key, outcome)
         SELECT x, 'line-' || ((k > 8) + (k > 0)), strftime('%Y-%m-%dT%H:%M:%fZ', '2026-11-01', '+' || (x / 10) || ' seconds'), CAST(${ref} AS BLOB),
                CASE WHEN k = 0 THEN 'EOL-3' ELSE 'SOP-3' END, 'scan' FROM g`,
      ).run(scans);
      const kind = `CASE WHEN k = 0 THEN 'EOL-3' ELSE 'SOP-3' END`;
      db.prepare(
        `WITH g AS (SELECT id AS x, (id - 1) / ${PER_PACK} AS p, (id - 1) % ${PER_PACK} AS k, received_at AS t FROM reads)
         INSERT INTO scan_rows (id, read_id, dcp_key, reference, time_utc, bytes, state, batch_id, created_at)
         SELECT x, x, ${kind}, ${ref}, t, 150, 'delivered', (x - 1) / 1000 + 1, 0 FROM g`,
      ).run();
      db.prepare(
        `WITH g AS (SELECT id AS x, (id - 1) / ${PER_PACK} AS p, (id - 1) % ${PER_PACK} AS k, received_at AS t FROM reads)
         INSERT INTO scan_bodies (id, body)
         SELECT x, json_object('reference', ${ref}, 'timeStamp', substr(t, 1, 19), 'dcpKey', ${kind},
                               'productModelKey', CASE WHEN k = 0 THEN 'PACK-A' ELSE 'MOD-48V' END,
                               'parents', CASE WHEN k = 0 THEN json_array() ELSE json_array(${parent}) END,
                               'attributes', json_array(json_object('key', 'line', 'value', '3')))
           FROM g`,
      ).run();
    })();
    for (const sql of indexes) db.exec(sql);
    fillKeys(db);
    db.exec(
      `INSERT OR IGNORE INTO scan_parents (parent, scan_id) SELECT p.value, b.id FROM scan_bodies b, json_each(b.body, '$.parents') p WHERE p.type = 'text'`,
    );
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    store.close();
  }
}

/** The GTINs of the synthetic buffer: the pack model and the cell model (one product model each). */
const PACK_GTIN = '09521234543213';
const CELL_GTIN = '09521234543220';

/**
 * The GS1 keys (scan_keys, src/buffer/item-keys.ts) the scans would have had if read as GS1 codes:
 * a pack's label carries GTIN, lot (one per 1,000 packs) and serial (S + its number: not its
 * reference, so that finding it takes the keys); a module an
 * SSCC-shaped AI 00 (the key a logistic unit has: the same single-key seek as any); a cell GTIN
 * and lot (one per 10 packs: 960 cells). Written in key order with the scan index built after, as
 * the migration builds them on an existing buffer; 2 to 3 keys a scan, the cells' GTIN the widest
 * value (about 91% of the scans carry it).
 */
function fillKeys(db: ReturnType<typeof sqlOf>): void {
  db.exec(`DROP INDEX scan_keys_scan`);
  db.transaction(() => {
    db.prepare(
      `WITH g AS (SELECT id AS x, (id - 1) / ${PER_PACK} AS p, (id - 1) % ${PER_PACK} AS k FROM scan_rows)
       INSERT INTO scan_keys (value, ai, scan_id)
       SELECT value, ai, x FROM (
         SELECT x, '01' AS ai, CASE WHEN k = 0 THEN '${PACK_GTIN}' ELSE '${CELL_GTIN}' END AS value FROM g WHERE k = 0 OR k > 8
         UNION ALL SELECT x, '10', CASE WHEN k = 0 THEN printf('L%05d', p / 1000) ELSE printf('C%06d', p / 10) END FROM g WHERE k = 0 OR k > 8
         UNION ALL SELECT x, '21', printf('S%07d', p) FROM g WHERE k = 0
         UNION ALL SELECT x, '00', printf('1095212340%07d', p * 8 + k) FROM g WHERE k BETWEEN 1 AND 8
       ) ORDER BY value, ai, x`,
    ).run();
  })();
  db.exec(`CREATE INDEX scan_keys_scan ON scan_keys (scan_id)`);
}

/** Benchmark: "what happened to this item?" on a buffer of `scans` scans. */
export async function benchItems(
  opts: ItemsBenchOptions = ITEMS_DEFAULTS,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-items-'));
  const path = join(dir, 'buffer.db');
  try {
    const started = nowMs();
    fill(path, opts.scans);
    const fillSec = (nowMs() - started) / 1000;
    const bytes = statSync(path).size;
    const packs = Math.floor(opts.scans / PER_PACK);
    // The CLI's read-only open; the daemon's reports run the same queries on its own connection.
    const reader = new BufferReader(path);
    try {
      // A fixed pseudo-random walk over the whole buffer, so pages are not all warm from the last lookup.
      let seed = 12345;
      const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
      const pick = () => Math.floor(next() * packs);
      const time = (f: (i: number) => void) => {
        const ms: number[] = [];
        for (let i = 0; i < opts.lookups; i++) {
          const t = nowMs();
          f(i);
          ms.push(nowMs() - t);
        }
        const sorted = [...ms].sort((a, b) => a - b);
        return { median: median(ms), p95: percentile(sorted, 95), max: sorted[sorted.length - 1]! };
      };
      const pad = (n: number) => String(n).padStart(7, '0');
      let nodes = 0;
      const pack = time(() => {
        const t = reader.reports.trace(`PK-${pad(pick())}`);
        nodes = t.children.length + t.children.reduce((a, m) => a + m.nodes.length, 0);
      });
      const cell = time(() => void reader.reports.trace(`CELL-${pad(pick())}-3-07`));
      const prefix = time(() => void reader.reports.searchItems(`PK-${pad(pick()).slice(0, 6)}`));
      const missing = time(() => void reader.reports.trace(`PK-${pad(pick())}-X`));
      // Lookups by GS1 keys (item-keys.ts): the pack's label as printed, its serial alone, a
      // module's SSCC alone, a lot's items and a GTIN's items (first page of 50, count capped).
      const label = time(() => {
        const p = pick();
        const t = reader.reports.trace(
          `(01)${PACK_GTIN}(10)L${String(Math.floor(p / 1000)).padStart(5, '0')}(21)S${pad(p)}`,
        );
        if (!t.found) throw new Error(`the label of pack ${p} was not found`);
      });
      const serial = time(() => {
        const p = pick();
        const t = reader.reports.trace(`S${pad(p)}`);
        if (t.reference !== `PK-${pad(p)}`)
          throw new Error(`the serial of pack ${p} was not found`);
      });
      const sscc = time(() => {
        const p = pick();
        const t = reader.reports.trace(`1095212340${String(p * 8 + 3).padStart(7, '0')}`);
        if (!t.found) throw new Error(`the SSCC of a module of pack ${p} was not found`);
      });
      const lot = time(() => {
        const m = reader.reports.searchByValue(
          `L${String(Math.floor(pick() / 1000)).padStart(5, '0')}`,
        );
        if (m[0]?.items.length !== 50) throw new Error('a lot page is not full');
      });
      const gtin = time((i) => {
        const m = reader.reports.searchByValue(i % 2 === 0 ? CELL_GTIN : PACK_GTIN);
        if (m[0]?.items.length !== 50) throw new Error('a GTIN page is not full');
      });
      const figure = (
        name: string,
        r: { median: number; p95: number; max: number },
        note: string,
      ) =>
        judge({
          name,
          value: r.p95,
          unit: 'ms',
          targets: [{ kind: 'max', of: 'value', value: LOOKUP_TARGET_MS }],
          note: `p95 of ${opts.lookups} lookups (median ${r.median.toFixed(2)} ms, max ${r.max.toFixed(2)} ms); target < ${LOOKUP_TARGET_MS} ms; ${note}`,
        });
      return {
        id: 'items',
        title: `Item lookup in ${(opts.scans / 1e6).toLocaleString('en')} million scans`,
        figures: [
          figure('trace of a pack (8 modules, 96 cells)', pack, `${nodes} genealogy nodes each`),
          figure('trace of a cell (module, pack above)', cell, 'parents two levels up'),
          figure('prefix search (10 packs)', prefix, 'range over scans_reference'),
          figure(
            'trace of an unknown reference',
            missing,
            'not found: the prefix matches listed instead',
          ),
          figure(
            'trace by the label text (01)…(10)…(21)…',
            label,
            'canonical form, then the scans carrying its keys (scan_keys)',
          ),
          figure('serial alone', serial, 'no such reference: the key seek finds one item, traced'),
          figure('SSCC alone', sscc, 'one key seek, then the trace'),
          figure(
            'items of a lot (first page of 50)',
            lot,
            '1,000 packs a lot; count of scans stops at 10,000',
          ),
          figure(
            'items of a GTIN (first page of 50)',
            gtin,
            `alternately the cell GTIN (${Math.round((opts.scans * 96) / PER_PACK).toLocaleString('en')} scans) and the pack GTIN; count stops at 10,000`,
          ),
        ],
        notes: [
          `buffer: ${opts.scans.toLocaleString('en')} delivered scans (${packs.toLocaleString('en')} packs × 105), ${(bytes / 2 ** 30).toFixed(2)} GiB; built by a direct bulk insert in ${fillSec.toFixed(0)} s`,
          'opened read-only as `scan-gateway trace` opens it; references picked pseudo-randomly over the whole buffer',
        ],
      };
    } finally {
      reader.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
