import type { IntakeRecord } from '../buffer/store.js';
import type { IntakeItem } from '../inputs/types.js';
import type { MappingContext } from '../mapping/map-read.js';
import type { Pending } from './records.js';
import { refusalAfter, SLICE_MAP_BUDGET_MS, SLICE_READS, type SliceState } from './slices.js';

/** Maps one item of a submit into its record (intake's `toRecord`, with intake's parts). */
export type MapItem = (item: IntakeItem, pending: Pending, mapping: MappingContext) => IntakeRecord;

/**
 * The next group, in the order submitted, and what stays queued: every submit taken whole,
 * mapped now; of the submits taken in slices ({@link SLICE_READS} reads and
 * {@link SLICE_MAP_BUDGET_MS} of mapping per turn between them) the next slice. A submit waits
 * while an earlier one of its input is not taken to its end, so one source's reads are mapped,
 * checked against the duplicate window and committed in the order it sent them; another input's
 * submit goes into the next commit, between two slices.
 */
export function takeGroup(
  queue: readonly Pending[],
  map: MapItem,
): { group: Pending[]; rest: Pending[] } {
  const group: Pending[] = [];
  const rest: Pending[] = [];
  /** Inputs with a sliced submit not yet taken to its end: their later submits wait. */
  const behind = new Set<string | undefined>();
  let budget = SLICE_READS;
  const deadline = performance.now() + SLICE_MAP_BUDGET_MS;
  for (const p of queue) {
    if (behind.has(p.inputId)) {
      rest.push(p);
      continue;
    }
    const s = p.slices;
    if (!s) {
      for (const item of p.items) p.records.push(map(item, p, p.mapping));
      p.items = [];
      group.push(p);
      continue;
    }
    if (budget > 0 && !s.settled) {
      const part = slice(p, s, budget, deadline, map);
      budget -= part.records.length;
      group.push(part);
    }
    if (s.next < p.items.length) {
      rest.push(p);
      behind.add(p.inputId);
    }
  }
  return { group, rest };
}

/**
 * Maps the next slice of a submit taken in slices (at most `budget` reads, at least one, until
 * `deadline` on the monotonic clock) into a submit of its own: committed or refused with the
 * group like any other, its outcomes added to the whole submit's, which resolves with its last
 * slice; a refusal rejects the whole submit, with the items committed before ({@link refusalAfter}).
 */
function slice(
  whole: Pending,
  s: SliceState,
  budget: number,
  deadline: number,
  map: MapItem,
): Pending {
  const part: Pending = {
    items: [],
    mapping: whole.mapping,
    inputId: whole.inputId,
    records: [],
    scans: 0,
    scanBytes: 0,
    taken: [],
    resolve: (result) => {
      s.committed += part.records.length;
      for (const o of result.outcomes) s.outcomes.push(o);
      if (s.committed < whole.items.length) return;
      s.settled = true;
      whole.resolve({ outcomes: s.outcomes });
    },
    reject: (err) => {
      s.settled = true;
      whole.reject(refusalAfter(err, s.committed));
    },
  };
  const end = Math.min(whole.items.length, s.next + budget);
  while (s.next < end) {
    const item = whole.items[s.next++] as IntakeItem;
    part.records.push(map(item, part, whole.mapping));
    if (performance.now() >= deadline) break;
  }
  return part;
}
