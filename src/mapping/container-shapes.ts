/*
 * What a container session looks like outside container-sessions.ts: its changes as the buffer
 * keeps them, an open container as the page shows it, what the mapper asks and is answered, and
 * the words for how full one is.
 */

/** How a container ended, or `open`; what the buffer keeps of it (`containers` table) and `trace` shows. */
export type ContainerState = 'open' | 'complete' | 'incomplete' | 'closed' | 'abandoned';

/**
 * One container as it is now: written with the read that changed it (open, a member more,
 * closed), so the open ones are restored at start and the closed ones stay for `trace` and the page.
 * `state`: `complete` = closed at its `members`; `incomplete` = closed short of them (a new label,
 * a closing code, idle, or a supervisor); `closed` = closed with no fixed count (`closeAfter`, a
 * closing code, idle); `abandoned` = a supervisor gave it up.
 */
export interface ContainerChange {
  container: string;
  per: 'input' | 'dcp';
  station: string;
  parent: string;
  /** ISO 8601 instant of the opening read. */
  openedAt: string;
  /** ISO 8601 instant of the last read that got this parent (or of the opening read). */
  lastReadAt: string;
  /** Members so far (distinct references). */
  members: number;
  /** `members` of the configuration: how many it must hold. */
  expected?: number;
  state: ContainerState;
  /** ISO 8601 instant it closed (a read's receive time, or the clock for a supervisor). */
  closedAt?: string;
  /** Why it closed, in words: `12 of 12`, `new label MOD-2`, `closing code`, `idle 600 s`, a supervisor's reason. */
  why?: string;
  /** Who closed it, for a supervisor's close or abandon. */
  by?: string;
  /** The members' references (kept while open, so a member scanned again is counted once across restarts). */
  memberRefs?: string[];
}

/** An open container at one station, as the health page and the station screen show it. */
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
  /** Reads that got this parent so far (distinct references). */
  reads: number;
  /** `members` of the configuration: how many it must hold ("3 of 12"). */
  expected?: number;
  /** The session closes after this long without a read, in ms; 0 = never. */
  idleTimeoutMs: number;
}

/** What {@link ContainerSessions.open} answers: the parent it replaced, or a refusal at the cap. */
export type OpenResult = { opened: true; replaced?: string } | { opened: false; reason: string };

/** The open container of a station, as the mapper decides on it. */
export interface SessionView {
  parent: string;
  reads: number;
  expected: number | undefined;
}

/** "3 of 12" for a container with `members`, else "3 reads". */
export function fillWords(members: number, expected: number | undefined): string {
  return expected === undefined
    ? `${members} read${members === 1 ? '' : 's'}`
    : `${members} of ${expected}`;
}
