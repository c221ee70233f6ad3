/**
 * High availability (src/ha/): whether this node may take reads now, checked by intake in the same
 * synchronous turn as each commit, and the leader epoch reads are stored with. Absent without `ha`.
 * The election (src/ha/leadership.ts) answers it; intake does not import it.
 */
export interface IntakeFence {
  /** Why reads may not be taken now (not the leader, or past the lease's renewal deadline), or undefined. */
  mayTake(): string | undefined;
  /** The leader epoch reads are taken under now. */
  epoch(): number | undefined;
  /** A commit failed: a leader that cannot write its buffer gives way to the other node. */
  commitFailed(err: unknown): void;
}
