/**
 * Container sessions: at a station, a read of a container (a pallet's SSCC, a
 * tray's GIAI) opens it, and the reads after it get it as their parent until a closing code,
 * another container, or an idle timeout. Time is the reads' own receive time, never a wall clock,
 * so mapping the same reads in the same order always gives the same parents.
 */

/** An open container at one station, as the health page shows it. */
export interface OpenContainer {
  /** `name` of the container in the configuration. */
  container: string;
  /** What one session is kept per: an input or a DCP. */
  per: 'input' | 'dcp';
  /** The input id or DCP key (the station). */
  station: string;
  /** The parent reference the following reads get. */
  parent: string;
  /** ISO 8601 instant the container was opened (the opening read's receive time). */
  openedAt: string;
  /** ISO 8601 instant of the last read that got this parent (or of the opening read). */
  lastReadAt: string;
  /** Reads that got this parent so far. */
  reads: number;
  /** The session closes after this long without a read, in ms; 0 = never. */
  idleTimeoutMs: number;
}

interface Session {
  container: string;
  per: 'input' | 'dcp';
  station: string;
  parent: string;
  openedAtMs: number;
  lastReadAtMs: number;
  reads: number;
  idleTimeoutMs: number;
}

const keyOf = (container: string, station: string) => `${container}\u0000${station}`;

/**
 * Most containers open at once in one mapper, by default. Stations are configured inputs, DCPs and
 * the stations of the rules' DCP lookups (the mapper opens no session for any other), so a sane
 * configuration stays far below it; the cap is the last guard of memory.
 */
export const MAX_OPEN_CONTAINERS = 10_000;

/** What {@link ContainerSessions.open} answers: the parent it replaced, or a refusal at the cap. */
export type OpenResult = { opened: true; replaced?: string } | { opened: false; reason: string };

/**
 * The open containers of a mapper; one session per container name and station.
 *
 * Bounded (docs/operations.md "Bounds"): at most `max` sessions; an open past it is
 * refused. Expired sessions are swept on access: every time as many operations as there are
 * sessions (at least 64) have passed, one pass drops the expired ones, so the sweep costs O(1)
 * amortized per read; a pass also runs before an open is refused at the cap.
 */
export class ContainerSessions {
  private readonly sessions = new Map<string, Session>();
  private opsSinceSweep = 0;
  /** Opens refused because `max` sessions were open. */
  refusedAtCap = 0;

  constructor(readonly max: number = MAX_OPEN_CONTAINERS) {}

  /** Sessions held now (expired ones not yet swept included). */
  get size(): number {
    return this.sessions.size;
  }

  /**
   * Opens `parent` at the station, replacing (closing) an open one, and answers the parent it
   * replaced. A new session past `max` open ones is refused (`opened: false`, with the reason).
   */
  open(
    container: string,
    per: 'input' | 'dcp',
    station: string,
    parent: string,
    atMs: number,
    idleTimeoutMs: number,
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
    this.sessions.set(keyOf(container, station), {
      container,
      per,
      station,
      parent,
      openedAtMs: atMs,
      lastReadAtMs: atMs,
      reads: 0,
      idleTimeoutMs,
    });
    return previous ? { opened: true, replaced: previous.parent } : { opened: true };
  }

  /** Drops every session expired at `atMs` (a read's receive time). */
  sweep(atMs: number): void {
    this.opsSinceSweep = 0;
    for (const [k, s] of this.sessions) if (expired(s, atMs)) this.sessions.delete(k);
  }

  private maybeSweep(atMs: number): void {
    if (++this.opsSinceSweep >= Math.max(64, this.sessions.size)) this.sweep(atMs);
  }

  /** Closes the station's container; answers the parent that was open, if any. */
  close(container: string, station: string, atMs: number): string | undefined {
    this.maybeSweep(atMs);
    const open = this.current(container, station, atMs);
    this.sessions.delete(keyOf(container, station));
    return open?.parent;
  }

  /** The parent open at the station at `atMs` (a session idle for too long is closed first). */
  parentAt(container: string, station: string, atMs: number): string | undefined {
    this.maybeSweep(atMs);
    return this.current(container, station, atMs)?.parent;
  }

  /** Records that a read at `atMs` got the station's parent, which keeps the session alive; answers the reads it has now. */
  touch(container: string, station: string, atMs: number): number {
    const s = this.sessions.get(keyOf(container, station));
    if (!s) return 0;
    s.reads++;
    s.lastReadAtMs = Math.max(s.lastReadAtMs, atMs);
    return s.reads;
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
   * parent. `settings` gives the new idle timeout of a container, or undefined when it is gone.
   */
  adopt(
    previous: ContainerSessions,
    settings: (container: string) => { per: 'input' | 'dcp'; idleTimeoutMs: number } | undefined,
  ): void {
    for (const [k, s] of previous.sessions) {
      if (this.sessions.size >= this.max) break;
      const now = settings(s.container);
      if (!now || now.per !== s.per) continue;
      this.sessions.set(k, { ...s, idleTimeoutMs: now.idleTimeoutMs });
    }
  }

  private current(container: string, station: string, atMs: number): Session | undefined {
    const k = keyOf(container, station);
    const s = this.sessions.get(k);
    if (s && expired(s, atMs)) {
      this.sessions.delete(k);
      return undefined;
    }
    return s;
  }
}

function expired(s: Session, atMs: number): boolean {
  return s.idleTimeoutMs > 0 && atMs - s.lastReadAtMs > s.idleTimeoutMs;
}
