import type { EarlyPruneRecord } from '../buffer/early-prunes.js';
import type { ContainerRow } from '../buffer/rows.js';
import type { ValueMatches } from './key-search.js';
import type { ItemRefusal } from './item-refusals.js';

/*
 * What an item lookup answers (items.ts): the shapes of a trace, its scans with their reads, its
 * genealogy trees, and a prefix search's matches. Plain data: no database access here.
 */

/** The read a scan came from, as received. */
export interface ItemRead {
  id: number;
  inputId: string;
  /** When the gateway received it (ISO 8601). */
  receivedAt: string;
  /** The read as received, control bytes as `<GS>` (src/format/printable.ts). */
  raw: string;
  sourceTime: string | null;
  /** Where it came from (file and line, port, topic), as stored. */
  origin: string | null;
  outcome: string;
  /** The note of a read mapped again by replay, or a time warning. */
  note: string | null;
  /** High availability: the leader epoch it was taken under (null without `ha`). */
  leaderEpoch: number | null;
  /** High availability: it came in a message sent again after a takeover (1), a possible duplicate. */
  possibleDuplicate: number;
}

/** One scan of the item: what was sent (or is waiting), and what became of it. */
export interface ItemScan {
  id: number;
  dcpKey: string;
  /** The DCP's kind in the configuration; without it `goodsIn` (a supplier key) or `goodsOut` (a client key), else null. */
  kind: string | null;
  /** Local time stamp of the scan as sent (contract §2.5), and its UTC instant. */
  timeStamp: string | null;
  timeUtc: string;
  productModelKey: string | null;
  supplierKey: string | null;
  clientKey: string | null;
  parents: string[];
  attributes: { key: string; value: string }[];
  /** pending (waiting for a batch), batched (in a batch not finished), delivered, failed, held. */
  state: string;
  /** Why the service refused it, or why it is held. */
  failureReason: string | null;
  /** The scan that replaced this one after a replay, when it was replayed. */
  replayedBy: number | null;
  /** The dead letter this scan replaced, when it is a replay. */
  replaces: number | null;
  batch: {
    id: number;
    /** How it went up: `direct` or `presigned` (contract §4). */
    route: string;
    state: string;
    requestId: string | null;
    /** The service's state of the batch (Success, HasFailures, Failed…). */
    upstreamState: string | null;
    uploadedAt: string | null;
    finishedAt: string | null;
    /**
     * How often the batch was sent again after an upload's answer was lost (0: never): a possible
     * duplicate at the service until its status is known (`finishedAt`).
     */
    sentAgain: number;
  } | null;
  read: ItemRead | null;
}

/** A node of a genealogy tree: a reference, what the buffer knows of it, and its own relatives. */
export interface GenealogyNode {
  reference: string;
  /** Scans of this reference in the buffer (0: only named as a parent, never scanned here). */
  scans: number;
  /** The latest scan's DCP, state and time (all of the scan stored last), when it was scanned here. */
  lastDcp: string | null;
  lastState: string | null;
  lastAt: string | null;
  /** Parents (in the parents tree) or children (in the children tree), one level further. */
  nodes: GenealogyNode[];
  /** Relatives not listed: past the fan-out, the node cap, or the depth. */
  more: number;
  /** Already shown higher up on this branch (a cycle in the data): not expanded again. */
  cycle?: true;
}

export interface ItemTrace {
  reference: string;
  /** Whether any scan of this exact reference is in the buffer, or any scan names it as parent. */
  found: boolean;
  /** Latest first, at most {@link MAX_ITEM_SCANS}. */
  scans: ItemScan[];
  moreScans: number;
  /** The item's ancestors: its parents, their parents… */
  parents: GenealogyNode[];
  parentsMore: number;
  /** The item's descendants: the scans naming it as parent, theirs… */
  children: GenealogyNode[];
  childrenMore: number;
  depth: number;
  /** References starting with the one asked for, when no exact match was found. */
  matches: ItemMatch[];
  /** True when the buffer lacks the lookup indexes (written by an older gateway): children by a full scan. */
  slow?: true;
  /** The query as given, when the item was found under another reference (item-lookup.ts). */
  asked?: string;
  /** The canonical GS1 reference of the query (`{ gs1: canonical }`), when it is GS1 data with a primary key. */
  canonical?: string;
  /** Which AIs of the query identify the item and which were left out (src/gs1/canonical.ts). */
  canonicalWhy?: string;
  /** Other references in the buffer of the same item (raw reads an older configuration sent as reference). */
  sameItem?: string[];
  /** The items carrying the query as an AI's value (a serial, an SSCC, a lot, a GTIN), by AI. */
  byValue?: ValueMatches[];
  /**
   * Early prunes (the buffer's disk ran low) that deleted scans of this reference before the end
   * of the audit period: when, why, how many scans each took and the span of their read times.
   */
  prunedEarly?: EarlyPruneRecord[];
  /** Reads of the item that were refused (no scan of them), latest first (item-refusals.ts). */
  refusals?: ItemRefusal[];
  /** The containers this reference was the label of, and how each ended (table `containers`). */
  containers?: ContainerRow[];
}

/** A reference found by prefix. */
export interface ItemMatch {
  reference: string;
  scans: number;
  lastAt: string;
}
