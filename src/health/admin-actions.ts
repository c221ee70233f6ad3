import { replayDeadLetters, type ReplaySelection } from '../buffer/replay.js';
import type { BufferStore } from '../buffer/store.js';
import type { GatewayConfig } from '../config/schema.js';
import type { Deliverer } from '../delivery/deliverer.js';
import { ErrorCodes, GatewayError } from '../errors.js';
import { mappingContext, mapRead } from '../mapping/map-read.js';
import type { AdminActions } from './admin.js';
import type { Clock } from '../clock.js';

export interface AdminActionsOptions {
  /** The running parts; undefined before start (the actions then fail). */
  store: () => BufferStore | undefined;
  deliverer: () => Deliverer | undefined;
  /** The configuration whose mapping a replay uses. */
  config: () => GatewayConfig;
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
 *   without a body every dead letter is replayed.
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
