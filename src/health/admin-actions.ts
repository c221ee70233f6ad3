import { replayDeadLetters, type ReplaySelection } from '../buffer/replay.js';
import type { BufferStore } from '../buffer/store.js';
import type { GatewayConfig } from '../config/schema.js';
import type { Deliverer } from '../delivery/deliverer.js';
import { ErrorCodes, GatewayError } from '../errors.js';
import { mappingContext, mapRead } from '../mapping/map-read.js';
import type { AdminActions } from './admin.js';
import type { Clock } from '../clock.js';
import type { Mapper } from '../mapping/mapper.js';
import { fillWords } from '../mapping/container-sessions.js';

export interface AdminActionsOptions {
  /** The running parts; undefined before start (the actions then fail). */
  store: () => BufferStore | undefined;
  deliverer: () => Deliverer | undefined;
  /** The configuration whose mapping a replay uses. */
  config: () => GatewayConfig;
  /** The mapping in force: its open containers (`close-container`). */
  mapper: () => Mapper;
  now: Clock;
}

/**
 * What the admin buttons do in a running gateway:
 * - `retry`: every batch waiting for an upload or a status poll is due now (the backoff is cut
 *   short), and delivery wakes up;
 * - `pause` / `resume`: delivery stops and starts uploading (intake goes on; kept in memory only,
 *   so a restart resumes);
 * - `replay`: dead letters are mapped again with the current configuration and queued, as
 *   `scan-gateway replay` does (src/buffer/replay.ts). The JSON body may narrow it:
 *   `{ "batchId": 42 }`, `{ "dcpKey": "GI-01" }`, `{ "reason": "Invalid DCP" }`, `"rejected": true`;
 *   without a body every dead letter is replayed;
 * - `close-container`: a supervisor closes the open container of a station short (recorded as
 *   incomplete) or abandons it, with who and why: `{ "container": "module", "station": "st20",
 *   "by": "Anna (line lead)", "why": "cell scrapped", "abandon": false }`; written to the buffer at
 *   once, as `scan-gateway containers close` does.
 */
export function buildAdminActions(options: AdminActionsOptions): AdminActions {
  const store = () => {
    const s = options.store();
    if (!s) throw new GatewayError(ErrorCodes.NOT_RUNNING, 'the gateway is not running');
    return s;
  };
  return {
    retry() {
      const s = store();
      const waiting = s.batches.batchesInState('ready', 'presigned', 'uploaded');
      for (const b of waiting) s.batches.updateBatch(b.id, { nextAttemptAt: 0 });
      options.deliverer()?.wake();
      return {
        message: `retrying now: ${waiting.length} waiting batch${waiting.length === 1 ? '' : 'es'} due at once`,
        batches: waiting.length,
      };
    },
    pause() {
      options.deliverer()?.pause(true);
      return {
        message:
          'delivery paused until resumed (or until the gateway restarts); reads are still buffered',
      };
    },
    resume() {
      options.deliverer()?.pause(false);
      return { message: 'delivery resumed' };
    },
    replay(body: unknown) {
      const selection = replaySelection(body);
      const mapping = mappingContext(options.config());
      const r = replayDeadLetters(
        store().deadLetters,
        (read) => mapRead(read, mapping),
        selection,
        options.now(),
      );
      options.deliverer()?.wake();
      return {
        message: `replay: ${r.selected} selected, ${r.queued} queued${r.notQueued > 0 ? `, ${r.notQueued} still do not map (see failures)` : ''}`,
        selected: r.selected,
        queued: r.queued,
        notQueued: r.notQueued,
      };
    },
    'close-container'(body: unknown, remote: string) {
      const b = closeRequest(body);
      const s = store();
      const change = options.mapper().closeContainer(b.container, b.station, options.now(), {
        by: `${b.by} (admin token, ${remote})`,
        why: b.why,
        ...(b.abandon ? { abandon: true } : {}),
      });
      if (!change)
        throw new GatewayError(
          ErrorCodes.USAGE,
          `close-container: no container ${b.container} is open at ${b.station}`,
        );
      s.containers.writeNow([change]);
      return {
        message: `${change.parent} ${change.state === 'abandoned' ? 'abandoned' : 'closed'} with ${fillWords(change.members, change.expected)} by ${b.by}: ${b.why}`,
        container: change,
      };
    },
  };
}

/** The fields of a `close-container` request body; each a non-empty text, `abandon` true or false. */
export function closeRequest(body: unknown): {
  container: string;
  station: string;
  by: string;
  why: string;
  abandon: boolean;
} {
  const fail = (m: string) => new GatewayError(ErrorCodes.USAGE, `close-container: ${m}`);
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw fail('the body must be a JSON object with container, station, by and why');
  const b = body as Record<string, unknown>;
  const text = (k: string): string => {
    const v = b[k];
    if (typeof v !== 'string' || v.trim() === '')
      throw fail(`${k} must be a non-empty text (who closes it and why are recorded)`);
    return v.trim().slice(0, 200);
  };
  if (b.abandon !== undefined && typeof b.abandon !== 'boolean')
    throw fail('abandon must be true or false');
  return {
    container: text('container'),
    station: text('station'),
    by: text('by'),
    why: text('why'),
    abandon: b.abandon === true,
  };
}

/** The replay filters of an admin request body; `{ all: true }` without any. */
export function replaySelection(body: unknown): ReplaySelection {
  if (body === undefined || body === null || body === '') return { all: true };
  if (typeof body !== 'object' || Array.isArray(body))
    throw usage('the body must be a JSON object');
  const b = body as Record<string, unknown>;
  const known = ['batchId', 'dcpKey', 'reason', 'rejected', 'all'];
  const unknown = Object.keys(b).filter((k) => !known.includes(k));
  if (unknown.length > 0)
    throw usage(`unknown field ${unknown.join(', ')}; known: ${known.join(', ')}`);
  const selection: ReplaySelection = {};
  if (b.batchId !== undefined) {
    if (!Number.isInteger(b.batchId)) throw usage('batchId must be a whole number');
    selection.batchId = b.batchId as number;
  }
  for (const k of ['dcpKey', 'reason'] as const) {
    if (b[k] === undefined) continue;
    if (typeof b[k] !== 'string' || b[k] === '') throw usage(`${k} must be a non-empty string`);
    selection[k] = b[k];
  }
  for (const k of ['rejected', 'all'] as const) {
    if (b[k] === undefined) continue;
    if (typeof b[k] !== 'boolean') throw usage(`${k} must be true or false`);
    selection[k] = b[k];
  }
  if (
    selection.batchId === undefined &&
    selection.dcpKey === undefined &&
    selection.reason === undefined
  )
    selection.all = true;
  return selection;
}

function usage(message: string): GatewayError {
  return new GatewayError(ErrorCodes.USAGE, `replay: ${message}`);
}
