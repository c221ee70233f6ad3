/**
 * Container sessions: at a station, a read of a container (a pallet's SSCC, a
 * tray's GIAI) opens it, and the reads after it get it as their parent until a closing code,
 * another container, or an idle timeout. Time is the reads' own receive time, never a wall clock,
 * so mapping the same reads in the same order always gives the same parents.
 */

import type {
  ContainerChange,
  ContainerState,
  OpenContainer,
  OpenResult,
  SessionView,
} from './container-shapes.js';

export {
  fillWords,
  type ContainerChange,
  type ContainerState,
  type OpenContainer,
  type OpenResult,
  type SessionView,
} from './container-shapes.js';

interface Session {
  container: string;
  per: 'input' | 'dcp';
  station: string;
  parent: string;
  openedAtMs: number;
  lastReadAtMs: number;
  reads: number;
  expected: number | undefined;
  idleTimeoutMs: number;
  /** Members' references, so one scanned twice counts once; at most {@link MAX_MEMBER_REFS}. */
  refs: Set<string>;
}

const keyOf = (container: string, station: string) => `${container}\u0000${station}`;

/**
 * Most containers open at once in one mapper, by default. Stations are configured inputs, DCPs and
 * the stations of the rules' DCP lookups (the mapper opens no session for any other), so a sane
 * configuration stays far below it; the cap is the last guard of memory.
 */
export const MAX_OPEN_CONTAINERS = 10_000;

/** Member references kept per container to count a member scanned twice once; past it every read counts. */
export const MAX_MEMBER_REFS = 1000;

/** Changes kept for the next outcome; past it the oldest go (only a mapper nobody drains gets there). */
const MAX_PENDING_CHANGES = 10_000;

/**
 * The open containers of a mapper; one session per container name and station.
 *
 * Bounded (docs/operations.md "Bounds"): at most `max` sessions; an open past it is
 * refused. Expired sessions are swept on access: every time as many operations as there are
 * sessions (at least 64) have passed, one pass drops the expired ones, so the sweep costs O(1)
 * amortized per read; a pass also runs before an open is refused at the cap.
 *
 * Every change (opened, a member more, closed, expired) is queued as a {@link ContainerChange};
 * the mapper hands them out with the outcome of the read that caused them ({@link drain}), and
 * intake commits them with that read, so the buffer's copy is never ahead of the reads.
 */
export class ContainerSessions {
  private readonly sessions = new Map<string, Session>();
  private opsSinceSweep = 0;
  private changes: ContainerChange[] = [];
  /** The last container closed per container name and station (the words of a refusal after it). */
  private readonly lastClosed = new Map<string, ContainerChange>();
  /** Opens refused because `max` sessions were open. */
  refusedAtCap = 0;

  constructor(readonly max: number = MAX_OPEN_CONTAINERS) {}

  /** Sessions held now (expired ones not yet swept included). */
  get size(): number {
    return this.sessions.size;
  }

  /** The changes since the last call, oldest first, and forgets them. */
  drain(): ContainerChange[] {
    if (this.changes.length === 0) return [];
    const out = this.changes;
    this.changes = [];
    return out;
  }

  /** Puts changes back in front of the queue (ones taken out by {@link drain} to be handed out later). */
  requeue(changes: readonly ContainerChange[]): void {
    this.changes.unshift(...changes);
  }

  /** The open container of the station at `atMs` (a session idle for too long is closed first). */
  get(container: string, station: string, atMs: number): SessionView | undefined {
    this.maybeSweep(atMs);
    const s = this.current(container, station, atMs);
    return s ? { parent: s.parent, reads: s.reads, expected: s.expected } : undefined;
  }

  /** The last container closed at the station (kept for {@link MAX_OPEN_CONTAINERS} stations). */
  closedLast(container: string, station: string): ContainerChange | undefined {
    return this.lastClosed.get(keyOf(container, station));
  }

  /**
   * Opens `parent` at the station, closing an open one (`why`: `new label <parent>`), and answers
   * the parent it replaced. A new session past `max` open ones is refused (`opened: false`, with
   * the reason). `expected`: the container's `members`.
   */
  open(
    container: string,
    per: 'input' | 'dcp',
    station: string,
    parent: string,
    atMs: number,
    idleTimeoutMs: number,
    expected?: number,
  ): OpenResult {
    this.maybeSweep(atMs);
    const previous = this.current(container, station, atMs);
    if (!previous && this.sessions.size >= this.max) {
      this.sweep(atMs);
      if (this.sessions.size >= this.max) {
        this.refusedAtCap++;
        return {
          opened: false,
          reason: `${this.sessions.size} containers are open, the most the gateway keeps (${this.max}); close some (closing code or idleTimeoutMs) before opening more`,
        };
      }
    }
    if (previous) this.end(previous, atMs, `new label ${parent}`);
    const s: Session = {
      container,
      per,
      station,
      parent,
      openedAtMs: atMs,
      lastReadAtMs: atMs,
      reads: 0,
      expected,
      idleTimeoutMs,
      refs: new Set(),
    };
    this.sessions.set(keyOf(container, station), s);
    this.record(s, 'open');
    return previous ? { opened: true, replaced: previous.parent } : { opened: true };
  }

  /** Drops every session expired at `atMs` (a read's receive time). */
  sweep(atMs: number): void {
    this.opsSinceSweep = 0;
    for (const s of this.sessions.values()) if (expired(s, atMs)) this.expire(s);
  }

  private maybeSweep(atMs: number): void {
    if (++this.opsSinceSweep >= Math.max(64, this.sessions.size)) this.sweep(atMs);
  }

  /**
   * Closes the station's container; answers the change that closed it, if one was open. `why`
   * says how (`closing code`); a supervisor's close gives `by`, and `abandon` gives it up.
   */
  close(
    container: string,
    station: string,
    atMs: number,
    why: string,
    by?: { by: string; abandon?: boolean },
  ): ContainerChange | undefined {
    this.maybeSweep(atMs);
    const open = this.current(container, station, atMs);
    if (!open) return undefined;
    return this.end(open, atMs, why, by);
  }

  /** The parent open at the station at `atMs` (a session idle for too long is closed first). */
  parentAt(container: string, station: string, atMs: number): string | undefined {
    this.maybeSweep(atMs);
    return this.current(container, station, atMs)?.parent;
  }

  /**
   * Records that a read of `reference` at `atMs` got the station's parent, which keeps the session
   * alive; a reference already a member counts once. Answers the members it has now.
   */
  touch(container: string, station: string, atMs: number, reference?: string): number {
    const s = this.sessions.get(keyOf(container, station));
    if (!s) return 0;
    s.lastReadAtMs = Math.max(s.lastReadAtMs, atMs);
    if (reference !== undefined && s.refs.has(reference)) return s.reads;
    if (reference !== undefined && s.refs.size < MAX_MEMBER_REFS) s.refs.add(reference);
    s.reads++;
    this.record(s, 'open');
    return s.reads;
  }

  /** Whether `reference` is a member of the station's open container already. */
  isMember(container: string, station: string, reference: string): boolean {
    return this.sessions.get(keyOf(container, station))?.refs.has(reference) === true;
  }

  /** Every open container at `nowMs`, for the health page: per station the open parent and since when. */
  list(nowMs: number): OpenContainer[] {
    const out: OpenContainer[] = [];
    for (const s of this.sessions.values()) {
      if (expired(s, nowMs)) continue;
      out.push({
        container: s.container,
        per: s.per,
        station: s.station,
        parent: s.parent,
        openedAt: new Date(s.openedAtMs).toISOString(),
        lastReadAt: new Date(s.lastReadAtMs).toISOString(),
        reads: s.reads,
        ...(s.expected !== undefined ? { expected: s.expected } : {}),
        idleTimeoutMs: s.idleTimeoutMs,
      });
    }
    return out.sort(
      (a, b) => a.container.localeCompare(b.container) || a.station.localeCompare(b.station),
    );
  }

  /**
   * Takes over the sessions of `previous` (after a configuration reload) for containers that still
   * exist with the same `per`, so a reload does not cut the reads of an open pallet from their
   * parent. `settings` gives the new idle timeout and `members` of a container, or undefined when
   * it is gone. Changes `previous` had not handed out yet are taken over too.
   */
  adopt(
    previous: ContainerSessions,
    settings: (
      container: string,
    ) => { per: 'input' | 'dcp'; idleTimeoutMs: number; members?: number } | undefined,
  ): void {
    this.changes.push(...previous.drain());
    for (const [k, c] of previous.lastClosed) this.lastClosed.set(k, c);
    for (const [k, s] of previous.sessions) {
      const now = settings(s.container);
      // Gone from the configuration (or kept per something else now): closed, so the buffer's row
      // does not stay open for ever.
      if (!now || now.per !== s.per || this.sessions.size >= this.max) {
        this.record(s, s.expected !== undefined && s.reads < s.expected ? 'incomplete' : 'closed', {
          closedAt: new Date(s.lastReadAtMs).toISOString(),
          why: 'configuration reloaded without it',
        });
        continue;
      }
      this.sessions.set(k, { ...s, idleTimeoutMs: now.idleTimeoutMs, expected: now.members });
    }
  }

  /**
   * Restores the open containers the buffer kept (at start), for containers that still exist with
   * the same `per`; one that expired meanwhile is closed by the next sweep, as if it had run.
   * Answers how many were restored.
   */
  restore(
    rows: readonly ContainerChange[],
    settings: (
      container: string,
    ) => { per: 'input' | 'dcp'; idleTimeoutMs: number; members?: number } | undefined,
  ): number {
    let n = 0;
    for (const r of rows) {
      if (r.state !== 'open') continue;
      const now = settings(r.container);
      if (!now || now.per !== r.per || this.sessions.size >= this.max) {
        // Not in the configuration any more: closed with the next read, so it stays open nowhere.
        const short = r.expected !== undefined && r.members < r.expected;
        const { memberRefs: _refs, ...closed } = r;
        this.changes.push({
          ...closed,
          state: short ? 'incomplete' : 'closed',
          closedAt: r.lastReadAt,
          why: 'not in the configuration at start',
        });
        continue;
      }
      this.sessions.set(keyOf(r.container, r.station), {
        container: r.container,
        per: r.per,
        station: r.station,
        parent: r.parent,
        openedAtMs: Date.parse(r.openedAt),
        lastReadAtMs: Date.parse(r.lastReadAt),
        reads: r.members,
        expected: now.members,
        idleTimeoutMs: now.idleTimeoutMs,
        refs: new Set((r.memberRefs ?? []).slice(0, MAX_MEMBER_REFS)),
      });
      n++;
    }
    return n;
  }

  private current(container: string, station: string, atMs: number): Session | undefined {
    const s = this.sessions.get(keyOf(container, station));
    if (s && expired(s, atMs)) {
      this.expire(s);
      return undefined;
    }
    return s;
  }

  private expire(s: Session): void {
    this.end(s, s.lastReadAtMs + s.idleTimeoutMs, `idle ${Math.round(s.idleTimeoutMs / 1000)} s`);
  }

  /** Closes a session: removed, its last state recorded. */
  private end(
    s: Session,
    atMs: number,
    why: string,
    by?: { by: string; abandon?: boolean },
  ): ContainerChange {
    const key = keyOf(s.container, s.station);
    this.sessions.delete(key);
    const state: ContainerState = by?.abandon
      ? 'abandoned'
      : s.expected === undefined
        ? 'closed'
        : s.reads >= s.expected
          ? 'complete'
          : 'incomplete';
    const change = this.record(s, state, {
      closedAt: new Date(atMs).toISOString(),
      why,
      ...(by ? { by: by.by } : {}),
    });
    this.lastClosed.delete(key);
    if (this.lastClosed.size >= this.max) {
      const oldest = this.lastClosed.keys().next().value;
      if (oldest !== undefined) this.lastClosed.delete(oldest);
    }
    this.lastClosed.set(key, change);
    return change;
  }

  private record(
    s: Session,
    state: ContainerState,
    closed?: { closedAt: string; why: string; by?: string },
  ): ContainerChange {
    const change: ContainerChange = {
      container: s.container,
      per: s.per,
      station: s.station,
      parent: s.parent,
      openedAt: new Date(s.openedAtMs).toISOString(),
      lastReadAt: new Date(s.lastReadAtMs).toISOString(),
      members: s.reads,
      ...(s.expected !== undefined ? { expected: s.expected } : {}),
      state,
      ...closed,
      ...(state === 'open' && s.expected !== undefined ? { memberRefs: [...s.refs] } : {}),
    };
    if (this.changes.length >= MAX_PENDING_CHANGES) this.changes.shift();
    this.changes.push(change);
    return change;
  }
}

function expired(s: Session, atMs: number): boolean {
  return s.idleTimeoutMs > 0 && atMs - s.lastReadAtMs > s.idleTimeoutMs;
}
