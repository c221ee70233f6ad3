import type Database from 'better-sqlite3';
import { printableRaw } from '../format/printable.js';
import { scanStateSql } from '../buffer/scan-state.js';
import type { GenealogyNode, ItemMatch, ItemRead, ItemScan, ItemTrace } from './item-shapes.js';

export type { GenealogyNode, ItemMatch, ItemRead, ItemScan, ItemTrace } from './item-shapes.js';

/**
 * Item lookup: "what happened to this item?" from the buffer alone, read-only. For a
 * reference: every scan of it (DCP, product, supplier or client, attributes), the read each came
 * from (input, raw read, time), its batch (requestId, route, the service's state) or the reason it
 * failed, a replay that replaced it, and its genealogy: parents (from the scans' `parents`) and
 * children (scans naming it as a parent), recursively to a bounded depth, as two trees.
 *
 * Everything goes through indexes (`scans_reference`, `scan_parents`, made by the item-lookup
 * migration in migrations.ts), so a lookup costs a few index seeks per scan and per tree node,
 * whatever the size of the buffer (measured: bench/items.ts). On a buffer written before that
 * migration (opened read-only by the CLI) the exact lookup still works, children are then found by
 * a full scan and flagged `slow`.
 */

/** Most scans of one item listed (the latest ones); more are counted in {@link ItemTrace.moreScans}. */
export const MAX_ITEM_SCANS = 100;
/** Default and largest depth of the genealogy trees (levels below the item). */
export const DEFAULT_GENEALOGY_DEPTH = 4;
export const MAX_GENEALOGY_DEPTH = 10;
/** Most references listed under one node of a tree; the rest are counted in `more`. */
export const MAX_NODE_FANOUT = 200;
/** Most nodes of one tree in all: a pallet of packs of modules of cells stays readable and cheap. */
export const MAX_TREE_NODES = 2000;
/** Most matches of a prefix search. */
export const MAX_PREFIX_MATCHES = 50;

/** The smallest text greater than every text starting with `prefix` that SQLite's BINARY order knows (U+10FFFF sorts last in UTF-8). */
function prefixEnd(prefix: string): string {
  return `${prefix}\u{10FFFF}`;
}

/** Whether the buffer has the item-lookup indexes (a buffer opened read-only may predate them). */
function hasLookupIndexes(db: Database.Database): boolean {
  return (
    db
      .prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'scan_parents'`)
      .get() !== undefined
  );
}

/**
 * Whether the buffer knows `reference` (a scan of it, or a scan naming it as parent): what
 * {@link traceItem} calls `found`, for a few index seeks instead of a whole trace.
 */
export function isKnown(db: Database.Database, reference: string): boolean {
  if (
    db.prepare(`SELECT 1 FROM scan_rows WHERE reference = ? LIMIT 1`).get(reference) !== undefined
  )
    return true;
  if (!hasLookupIndexes(db)) return traceItem(db, reference).found;
  return (
    db.prepare(`SELECT 1 FROM scan_parents WHERE parent = ? LIMIT 1`).get(reference) !== undefined
  );
}

/**
 * References starting with `prefix`, in order, with their number of scans and latest scan time.
 * A range over `scans_reference` (`reference >= prefix AND reference < prefix || U+10FFFF`): LIKE
 * would not use the index (it is case-insensitive and `%`/`_` in a reference would be wildcards).
 */
export function searchItems(
  db: Database.Database,
  prefix: string,
  limit = MAX_PREFIX_MATCHES,
): ItemMatch[] {
  if (prefix === '') return [];
  const n = Math.max(1, Math.min(limit, MAX_PREFIX_MATCHES));
  return db
    .prepare(
      `SELECT reference, count(*) AS scans, max(time_utc) AS lastAt FROM scan_rows
        WHERE reference >= ? AND reference < ? GROUP BY reference ORDER BY reference LIMIT ?`,
    )
    .all(prefix, prefixEnd(prefix), n) as ItemMatch[];
}

/** How {@link traceItem} looks. */
export interface TraceOptions {
  /** Levels of each genealogy tree, 1..{@link MAX_GENEALOGY_DEPTH}; default {@link DEFAULT_GENEALOGY_DEPTH}. */
  depth?: number;
  /** The kind of each configured DCP (`goodsIn`, `production`, `goodsOut`…), from the configuration. */
  dcpKinds?: ReadonlyMap<string, string>;
  /** Items a page of a search by an AI's value lists (item-lookup.ts); default 50. */
  limit?: number | undefined;
}

interface ScanRow {
  id: number;
  dcpKey: string;
  timeUtc: string;
  body: string;
  state: string;
  failureReason: string | null;
  replayedBy: number | null;
  batchId: number | null;
  readId: number;
}

/**
 * The trace of `reference` (exact match). `depth` (1..{@link MAX_GENEALOGY_DEPTH}) bounds both
 * trees; every tree also stops at {@link MAX_TREE_NODES} nodes and {@link MAX_NODE_FANOUT}
 * relatives per node, counting what it leaves out in `more`. A reference seen higher up on the
 * same branch is listed once more with `cycle: true` and not expanded (parents data can loop).
 */
export function traceItem(
  db: Database.Database,
  reference: string,
  options: TraceOptions = {},
): ItemTrace {
  const depth = options.depth ?? DEFAULT_GENEALOGY_DEPTH;
  const levels = Math.max(
    1,
    Math.min(Math.trunc(depth) || DEFAULT_GENEALOGY_DEPTH, MAX_GENEALOGY_DEPTH),
  );
  const indexed = hasLookupIndexes(db);
  const total = db
    .prepare(`SELECT count(*) FROM scan_rows WHERE reference = ?`)
    .pluck()
    .get(reference) as number;
  const rows = db
    .prepare(
      `SELECT id, dcp_key AS dcpKey, time_utc AS timeUtc, (SELECT body FROM scan_bodies b WHERE b.id = scan_rows.id) AS body, ${scanStateSql()} AS state, failure_reason AS failureReason, replayed_by AS replayedBy,
              batch_id AS batchId, read_id AS readId
         FROM scan_rows WHERE reference = ? ORDER BY id DESC LIMIT ?`,
    )
    .all(reference, MAX_ITEM_SCANS) as ScanRow[];
  const batchOf = db.prepare(
    `SELECT id, mode AS route, state, request_id AS requestId, upstream_state AS upstreamState, uploaded_at AS uploadedAt, finished_at AS finishedAt,
            possible_duplicate AS sentAgain
       FROM batches WHERE id = ?`,
  );
  const readOf = db.prepare(
    `SELECT id, input_id AS inputId, received_at AS receivedAt, raw, source_time AS sourceTime, origin, outcome, reason AS note, ${haColumns(db)} FROM reads WHERE id = ?`,
  );
  const replacedOf = db.prepare(`SELECT id FROM scan_rows WHERE replayed_by = ?`).pluck();
  const scans: ItemScan[] = rows.map((r) => {
    const body = parseBody(r.body);
    const read =
      r.readId === null
        ? undefined
        : (readOf.get(r.readId) as (Omit<ItemRead, 'raw'> & { raw: Buffer }) | undefined);
    const batch =
      r.batchId === null ? undefined : (batchOf.get(r.batchId) as ItemScan['batch'] | undefined);
    return {
      id: r.id,
      dcpKey: r.dcpKey,
      // The buffer does not store the DCP's kind: the configuration's, else what the scan shows.
      kind:
        options.dcpKinds?.get(r.dcpKey) ??
        (body.supplierKey ? 'goodsIn' : body.clientKey ? 'goodsOut' : null),
      timeStamp: body.timeStamp,
      timeUtc: r.timeUtc,
      productModelKey: body.productModelKey,
      supplierKey: body.supplierKey,
      clientKey: body.clientKey,
      parents: body.parents,
      attributes: body.attributes,
      state: r.state,
      failureReason: r.failureReason,
      replayedBy: r.replayedBy,
      replaces: (replacedOf.get(r.id) as number | undefined) ?? null,
      batch: batch ?? null,
      read: read ? { ...read, raw: printableRaw(read.raw) } : null,
    };
  });

  // DCP, state and time all of one scan, the one stored last: a max(time_utc) beside them named the
  // time of another scan (a replay, or a read whose source time was older).
  const summary = db.prepare(
    `SELECT (SELECT count(*) FROM scan_rows WHERE reference = @ref) AS scans, l.dcp_key AS lastDcp, l.state AS lastState, l.time_utc AS lastAt
       FROM (SELECT 1) LEFT JOIN (SELECT dcp_key, ${scanStateSql()} AS state, time_utc FROM scan_rows WHERE reference = @ref ORDER BY id DESC LIMIT 1) l`,
  );
  // Parents of a reference: those its scans name (the latest scans first).
  const parentsBody = db
    .prepare(
      `SELECT b.body FROM scan_rows r JOIN scan_bodies b ON b.id = r.id WHERE r.reference = ? ORDER BY r.id DESC LIMIT ${MAX_ITEM_SCANS}`,
    )
    .pluck();
  const parentsOf = (ref: string, cap: number): { refs: string[]; more: number } => {
    const seen = new Set<string>();
    for (const b of parentsBody.all(ref) as string[])
      for (const p of parseBody(b).parents) seen.add(p);
    const all = [...seen];
    return { refs: all.slice(0, cap), more: Math.max(0, all.length - cap) };
  };
  // Children of a reference: the distinct references of the scans naming it as parent.
  const childrenIndexed = db.prepare(
    indexed
      ? `SELECT DISTINCT s.reference FROM scan_parents p JOIN scan_rows s ON s.id = p.scan_id WHERE p.parent = ? ORDER BY s.reference LIMIT ?`
      : `SELECT DISTINCT s.reference FROM scans s, json_each(s.body, '$.parents') p WHERE json_valid(s.body) AND p.value = ? ORDER BY s.reference LIMIT ?`,
  );
  const childrenCount = db.prepare(
    indexed
      ? `SELECT count(DISTINCT s.reference) FROM scan_parents p JOIN scan_rows s ON s.id = p.scan_id WHERE p.parent = ?`
      : `SELECT count(DISTINCT s.reference) FROM scans s, json_each(s.body, '$.parents') p WHERE json_valid(s.body) AND p.value = ?`,
  );
  const childrenOf = (ref: string, cap: number): { refs: string[]; more: number } => {
    const refs = (childrenIndexed.pluck().all(ref, cap + 1) as string[]).filter((c) => c !== ref);
    if (refs.length <= cap) return { refs, more: 0 };
    const count = childrenCount.pluck().get(ref) as number;
    return { refs: refs.slice(0, cap), more: Math.max(0, count - cap) };
  };

  const tree = (relatives: (ref: string, cap: number) => { refs: string[]; more: number }) => {
    let budget = MAX_TREE_NODES;
    const grow = (
      ref: string,
      level: number,
      path: Set<string>,
    ): { nodes: GenealogyNode[]; more: number } => {
      if (level > levels) {
        const probe = relatives(ref, 0);
        return { nodes: [], more: probe.more + probe.refs.length };
      }
      const cap = Math.min(MAX_NODE_FANOUT, budget);
      const { refs, more } = relatives(ref, cap);
      budget -= refs.length;
      const nodes = refs.map((r): GenealogyNode => {
        const s = summary.get({ ref: r }) as {
          scans: number;
          lastDcp: string | null;
          lastState: string | null;
          lastAt: string | null;
        };
        const node: GenealogyNode = {
          reference: r,
          scans: s.scans,
          lastDcp: s.lastDcp,
          lastState: s.lastState,
          lastAt: s.lastAt,
          nodes: [],
          more: 0,
        };
        if (path.has(r)) return { ...node, cycle: true };
        const below = grow(r, level + 1, new Set([...path, r]));
        node.nodes = below.nodes;
        node.more = below.more;
        return node;
      });
      return { nodes, more };
    };
    return grow(reference, 1, new Set([reference]));
  };

  const parents = tree(parentsOf);
  const children = tree(childrenOf);
  const found = total > 0 || children.nodes.length > 0;
  return {
    reference,
    found,
    scans,
    moreScans: Math.max(0, total - scans.length),
    parents: parents.nodes,
    parentsMore: parents.more,
    children: children.nodes,
    childrenMore: children.more,
    depth: levels,
    matches: found ? [] : searchItems(db, reference, 20),
    ...(indexed ? {} : { slow: true as const }),
  };
}

function parseBody(body: string): {
  timeStamp: string | null;
  productModelKey: string | null;
  supplierKey: string | null;
  clientKey: string | null;
  parents: string[];
  attributes: { key: string; value: string }[];
} {
  let o: Record<string, unknown> = {};
  try {
    const v: unknown = JSON.parse(body);
    if (v && typeof v === 'object' && !Array.isArray(v)) o = v as Record<string, unknown>;
  } catch {
    // a body that is not JSON: shown without its fields
  }
  const text = (k: string) => (typeof o[k] === 'string' ? (o[k] as string) : null);
  return {
    timeStamp: text('timeStamp'),
    productModelKey: text('productModelKey'),
    supplierKey: text('supplierKey'),
    clientKey: text('clientKey'),
    parents: Array.isArray(o.parents)
      ? o.parents.filter((p): p is string => typeof p === 'string')
      : [],
    attributes: Array.isArray(o.attributes)
      ? o.attributes
          .filter(
            (a): a is { key: string; value: string } =>
              !!a && typeof a === 'object' && typeof (a as { key?: unknown }).key === 'string',
          )
          .map((a) => ({ key: a.key, value: String(a.value) }))
      : [],
  };
}

/**
 * The high-availability columns of `reads` (leader epoch, possible duplicate), or nulls on an
 * older buffer read as it is (the operations commands beside an older gateway do not migrate).
 */
function haColumns(db: Database.Database): string {
  const has =
    db.prepare(`SELECT 1 FROM pragma_table_info('reads') WHERE name = 'leader_epoch'`).get() !==
    undefined;
  return has
    ? 'leader_epoch AS leaderEpoch, possible_duplicate AS possibleDuplicate'
    : 'NULL AS leaderEpoch, 0 AS possibleDuplicate';
}
