/**
 * The body of the batch thread (started by batch-thread.ts, never imported): its own connection
 * to the buffer file, on which it forms batches and reads their bodies, one request at a time,
 * so that the event loop that commits the line's reads does not wait for them while a backlog
 * drains (docs/performance.md, section 16).
 *
 * The connection is a writer beside the daemon's: every write transaction begins IMMEDIATE
 * (`BufferStore.atomically`) and is written in the thread's turn (write-turn.ts), so the event
 * loop's writers wait for it without sleeping in SQLite's busy handler; `busy_timeout` still makes
 * each side wait for the other's commit, as it does for `scan-gateway replay`.
 *
 * In: `workerData` `{ path, turn, turnYieldMs? }` (`turn`: the shared memory of write-turn.ts,
 * `turnYieldMs`: its `ThreadTurn`'s bound); messages
 * {@link BatchThreadRequest}. Out: {@link BatchThreadReply}.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ErrorCodes, GatewayError, isDiskFull, isGatewayError } from '../errors.js';
import { BufferStore } from '../buffer/store.js';
import { formFirst } from './batcher.js';
import { ThreadTurn } from './write-turn.js';
import type { BatchThreadReply, BatchThreadRequest } from './batch-thread.js';

const port = parentPort;
if (!port)
  throw new GatewayError(
    ErrorCodes.INTERNAL,
    'batch-worker.js runs as a worker thread (src/delivery/batch-thread.ts)',
  );
const {
  path,
  turn: turnBuffer,
  turnYieldMs,
} = workerData as { path: string; turn: SharedArrayBuffer; turnYieldMs?: number };
/** The turn to write, taken around each write transaction (write-turn.ts). */
const turn = new ThreadTurn(turnBuffer, turnYieldMs);

// Opened at the first request, not at load: a buffer that cannot be opened here is told with that
// request as the thread being unavailable (the caller forms the batch on its own connection
// instead) rather than as a thread that died at birth. `migrate: false`: the daemon migrated the
// file when it opened it.
let store: BufferStore | undefined;

function errorReply(id: number, err: unknown): BatchThreadReply {
  const message = err instanceof Error ? err.message : String(err);
  const code = isDiskFull(err)
    ? ErrorCodes.BUFFER_DISK_FULL
    : isGatewayError(err)
      ? err.code
      : ErrorCodes.BUFFER;
  return { id, error: { code, message } };
}

port.on('message', (request: BatchThreadRequest) => {
  let reply: BatchThreadReply;
  const transfer: ArrayBuffer[] = [];
  try {
    store ??= BufferStore.openAt(path, { fileMustExist: true, migrate: false });
  } catch (err) {
    // No second connection (a buffer opened exclusively, say): the caller works on its own.
    port.postMessage({
      id: request.id,
      unavailable: `it cannot open the buffer: ${err instanceof Error ? err.message : String(err)}`,
    } satisfies BatchThreadReply);
    return;
  }
  try {
    if (request.op === 'form') {
      const batch = formFirst(store, request.attempts, turn, request.stepScans);
      reply = { id: request.id, batch: batch ?? null };
    } else {
      const body = store.batches.batchBodyBytes(request.batchId);
      // The blob SQLite handed over owns its memory whole: it moves to the main thread instead
      // of being copied. A Buffer that shares a pool (not one of these) is copied.
      const whole = body.byteOffset === 0 && body.byteLength === body.buffer.byteLength;
      if (whole && body.buffer instanceof ArrayBuffer) transfer.push(body.buffer);
      reply = { id: request.id, body };
    }
  } catch (err) {
    reply = errorReply(request.id, err);
  }
  port.postMessage(reply, transfer);
});

port.once('close', () => store?.close());
