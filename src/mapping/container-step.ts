import type { DcpConfig, InputConfig } from '../config/schema.js';
import type { Read } from '../inputs/types.js';
import type { BarcodeParse } from '../gs1/index.js';
import type { ContainerSessions } from './container-sessions.js';
import { fillWords, type SessionView } from './container-sessions.js';
import type { MapOutcome } from './outcome.js';
import type { CompiledContainer } from './rules.js';
import type { ReadView } from './value-source.js';

/**
 * The containers' part of mapping one read, on the open container sessions: before the rules, a
 * closing code closes and an opening code opens (the read then ends as a no-read, or goes on as a
 * scan); after the rules, a member read takes the open containers as parents, or is refused when
 * its rule requires a container and none is open. The mapper holds the sessions; these functions
 * say what a read does to them.
 */

/** What the container step sees of the mapper: the sessions, the DCPs, and the stations rules translate. */
export interface ContainerRoom {
  sessions: ContainerSessions;
  dcps: ReadonlyMap<string, DcpConfig>;
  /** Station names a rule's DCP lookup knows that are no DCP key (sessions are kept for these too). */
  stations: ReadonlySet<string>;
}

/** A container the read may be a member of, at its station. */
export interface MemberOf {
  container: CompiledContainer;
  station: string;
}

/** A container the read opened and goes on as its parent's scan (`sendParent`). */
export interface Opened {
  name: string;
  parent: string;
}

/**
 * The containers in scope of the read's input, before the rules: either the outcome that ends the
 * read here (closing code, a label opening with `sendParent: false`, a refusal), or the containers
 * it may be a member of and the one it opened.
 */
export function passContainers(
  room: ContainerRoom,
  containers: readonly CompiledContainer[],
  input: InputConfig,
  read: Read,
  view: ReadView,
  barcode: BarcodeParse,
): { done: MapOutcome } | { members: MemberOf[]; opened: Opened | undefined } {
  const { sessions } = room;
  const atMs = read.receivedAt.getTime();
  const members: MemberOf[] = [];
  let opened: Opened | undefined;
  for (const c of containers) {
    const station = c.per === 'input' ? input.id : read.dcpKey?.trim() || input.dcp;
    // A session is kept per station: only a configured DCP (or a station a rule's DCP lookup
    // knows) may be one, or reads naming ever new DCPs would open sessions without end.
    // Such a read takes no part in containers; the rules then refuse its DCP with the reason.
    if (c.per === 'dcp' && !room.dcps.has(station) && !room.stations.has(station)) continue;
    if (c.close?.test(view)) {
      const open = sessions.get(c.name, station, atMs);
      if (open && refusesShort(c, open))
        return { done: refuseShort(c, station, open, 'closing code', barcode) };
      const closed = sessions.close(c.name, station, atMs, 'closing code');
      const parent = closed?.parent;
      return {
        done: {
          outcome: 'noRead',
          reason:
            closed !== undefined
              ? `closing code of container ${c.name} at ${station}: closes ${closed.parent}${closed.expected !== undefined ? ` (${fillWords(closed.members, closed.expected)}${closed.state === 'incomplete' ? ', incomplete' : ''})` : ''}`
              : `closing code of container ${c.name} at ${station}: none was open`,
          barcode,
          container: {
            name: c.name,
            action: 'closed',
            ...(parent !== undefined ? { parent } : {}),
          },
        },
      };
    }
    const groups = c.open.test(view);
    const parent = groups ? c.reference.evaluate(view, groups) : undefined;
    if (parent?.ok) {
      const open = sessions.get(c.name, station, atMs);
      // The open container's own label again: the same container, its count unchanged.
      if (open?.parent === parent.value) {
        return {
          done: {
            outcome: 'noRead',
            reason: `container ${c.name} at ${station}: ${parent.value} is open already (${fillWords(open.reads, open.expected)}); scanned again, nothing changes`,
            barcode,
            container: { name: c.name, action: 'rescanned', parent: parent.value },
          },
        };
      }
      if (open && refusesShort(c, open))
        return { done: refuseShort(c, station, open, `the label ${parent.value}`, barcode) };
      const opening = sessions.open(
        c.name,
        c.per,
        station,
        parent.value,
        atMs,
        c.idleTimeoutMs,
        c.members,
      );
      if (!opening.opened)
        return {
          done: {
            outcome: 'rejected',
            code: 'containerCap',
            reason: `opens container ${c.name} at ${station}, refused: ${opening.reason}`,
            barcode,
          },
        };
      if (!c.sendParent) {
        return {
          done: {
            outcome: 'noRead',
            reason: `opens container ${c.name} at ${station} with parent ${parent.value}${c.members !== undefined ? ` (0 of ${c.members})` : ''} (sendParent: false)`,
            barcode,
            container: { name: c.name, action: 'opened', parent: parent.value },
          },
        };
      }
      opened = { name: c.name, parent: parent.value };
    } else {
      members.push({ container: c, station });
    }
  }
  return { members, opened };
}

/** A container the read may join, with its open parent at the read's time (undefined: none open). */
export interface OpenMemberOf extends MemberOf {
  parent: string | undefined;
}

/** The open parent of each container the read may join, at `atMs`. */
export function openParents(
  sessions: ContainerSessions,
  members: readonly MemberOf[],
  atMs: number,
): OpenMemberOf[] {
  return members.map(({ container, station }) => ({
    container,
    station,
    parent: sessions.parentAt(container.name, station, atMs),
  }));
}

/**
 * When the rule requires a container (`requireContainer`: any, or one by name) and none other than
 * the read itself is open: the refusal's reason tail, code and the operator's words. `station` is
 * where the read was taken, for the reason when no container applies to the input.
 */
export function missingContainer(
  sessions: ContainerSessions,
  required: true | string,
  open: readonly OpenMemberOf[],
  reference: string,
  station: string,
): { which: string; station: string; full: boolean; message: string } | undefined {
  const wanted = open.filter((m) => required === true || m.container.name === required);
  if (wanted.some((m) => m.parent !== undefined && m.parent !== reference)) return undefined;
  const which =
    required === true
      ? wanted.map((m) => m.container.name).join(' or ') || 'none applies to this input'
      : required;
  // Right after a container filled up, say so: the item is one too many for it.
  const full = wanted
    .map((m) => sessions.closedLast(m.container.name, m.station))
    .find((c) => c?.state === 'complete');
  const message = full
    ? `${full.parent} is complete (${fillWords(full.members, full.expected)}): scan the next ${full.container}'s label first`
    : `no ${which} open: scan the ${which}'s label first`;
  return { which, station: wanted[0]?.station ?? station, full: full !== undefined, message };
}

/**
 * The read joins every open container it may (not its own label's): each parent is added through
 * `addParent`, each session counts the member, and the one that reaches its `members` (or
 * `closeAfter`) closes. Answers the first container joined, for the outcome.
 */
export function joinContainers(
  sessions: ContainerSessions,
  open: readonly OpenMemberOf[],
  reference: string,
  atMs: number,
  addParent: (parent: string) => void,
): { name: string; parent: string; closed?: string } | undefined {
  let member: { name: string; parent: string; closed?: string } | undefined;
  for (const { container, station, parent } of open) {
    if (parent === undefined || parent === reference) continue;
    addParent(parent);
    const reads = sessions.touch(container.name, station, atMs, reference);
    const limit = container.members ?? container.closeAfter;
    const full = limit !== undefined && reads >= limit;
    // The Nth member closes it: the next member read needs a new container.
    const why =
      container.members !== undefined
        ? `${reads} of ${container.members}: complete`
        : `closeAfter ${container.closeAfter} reached`;
    if (full) sessions.close(container.name, station, atMs, why);
    member ??= {
      name: container.name,
      parent,
      ...(full ? { closed: why } : {}),
    };
  }
  return member;
}

/** Whether a container short of its `members` refuses what would close it (`onIncomplete: refuse`). */
function refusesShort(c: CompiledContainer, open: SessionView): boolean {
  return c.members !== undefined && c.onIncomplete === 'refuse' && open.reads < c.members;
}

/**
 * The refusal of a label (or closing code) while the open container is short: the open one
 * stays. The reason starts with the words for the operator ("MOD-1 has 3 of 12: finish it
 * first"), which the station screen shows.
 */
function refuseShort(
  c: CompiledContainer,
  station: string,
  open: SessionView,
  what: string,
  barcode: BarcodeParse,
): MapOutcome {
  const message = shortMessage(open);
  return {
    outcome: 'rejected',
    code: 'containerShort',
    message,
    reason: `${message} (container ${c.name} at ${station}, onIncomplete: refuse): ${what} is not taken; the open container stays, a supervisor may close it short`,
    barcode,
  };
}

/** What the operator reads when a short container refuses a new label: `MOD-1 has 3 of 12: finish it first`. */
export function shortMessage(open: {
  parent: string;
  reads: number;
  expected?: number | undefined;
}): string {
  return `${open.parent} has ${fillWords(open.reads, open.expected)}: finish it first`;
}
