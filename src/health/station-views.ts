import type { StationRead } from '../queries/station.js';
import { formatWireTime, zonedWallTimeToInstant } from '../format/time.js';
import { plainWords } from './station-words.js';
import type { StationDelivery, StationReadView } from './station-page.js';
import type { GatewayStatus } from './status.js';

/**
 * What the station screen shows, worked out from what the hub (station.ts) reads: the shift
 * running now, whether delivery is stalled, and each read in the screen's words. Pure functions:
 * no buffer, no stream, no clock but the instant they are given.
 */

/** A shift of the site (`site.shifts`): its name and when it starts. */
export interface Shift {
  name: string;
  /** `HH:MM` in the site time zone. */
  start: string;
}

/** The shift running at `nowMs` in `timeZone`: the one with the latest start at or before now (yesterday's last one before today's first). */
export function currentShift(
  shifts: readonly Shift[],
  nowMs: number,
  timeZone: string,
): { name: string; startsAt: string; endsAt: string } {
  const wall = formatWireTime(new Date(nowMs), timeZone); // yyyy-MM-ddTHH:mm:ss
  const [year, month, day] = wall.slice(0, 10).split('-').map(Number) as [number, number, number];
  const starts: { name: string; at: number }[] = [];
  for (const offset of [-1, 0, 1]) {
    const d = new Date(Date.UTC(year, month - 1, day + offset));
    for (const s of shifts) {
      const [hour, minute] = s.start.split(':').map(Number) as [number, number];
      const at = zonedWallTimeToInstant(
        {
          year: d.getUTCFullYear(),
          month: d.getUTCMonth() + 1,
          day: d.getUTCDate(),
          hour,
          minute,
          second: 0,
        },
        timeZone,
      ).getTime();
      starts.push({ name: s.name, at });
    }
  }
  starts.sort((a, b) => a.at - b.at);
  let i = starts.length - 1;
  while (i > 0 && starts[i]!.at > nowMs) i--;
  const cur = starts[i]!;
  const next = starts.find((s) => s.at > cur.at) ?? { at: cur.at + 86_400_000 };
  return {
    name: cur.name,
    startsAt: new Date(cur.at).toISOString(),
    endsAt: new Date(next.at).toISOString(),
  };
}

/** Whether delivery is stalled, from the status: uploads failing (circuit not closed, or failures since the last success) while scans wait. */
export function stationDelivery(s: GatewayStatus): StationDelivery {
  const d = s.delivery;
  const waiting = s.buffer.undeliveredScans;
  const failing =
    (d.circuit !== undefined && d.circuit !== 'closed') || (d.consecutiveFailures ?? 0) > 0;
  return {
    stalled: failing && waiting > 0,
    paused: d.paused === true,
    waiting,
    // When the outage began (the first failure in a row), not the latest failed retry.
    ...(failing && (d.failingSince ?? d.lastError?.at)
      ? { since: (d.failingSince ?? d.lastError?.at) as string }
      : {}),
  };
}

/** A read as the screen shows it, with plain words for one not taken; `names`: inputs' names by id. */
export function readView(r: StationRead, names?: Record<string, string>): StationReadView {
  const verdict =
    r.outcome === 'scan'
      ? 'taken'
      : r.outcome === 'rejected'
        ? 'refused'
        : r.outcome === 'duplicate'
          ? 'duplicate'
          : 'noRead';
  const base = {
    id: r.id,
    at: r.receivedAt,
    verdict,
    text: r.reference ?? r.raw,
    inputId: r.inputId,
  } as StationReadView;
  const name = names?.[r.inputId];
  if (name !== undefined) base.inputName = name;
  if (verdict === 'taken') return { ...base, scanState: r.scanState };
  const w = plainWords(r.outcome, r.reason);
  return { ...base, words: w.words, hint: w.hint, ...(r.reason ? { reason: r.reason } : {}) };
}
