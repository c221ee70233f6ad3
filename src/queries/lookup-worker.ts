/**
 * The body of an item-lookup thread (started by lookup-workers.ts, never imported): its own
 * read-only connection to the buffer file (WAL lets it read beside the daemon's writer, and a read
 * of SQLite here holds no lock the writer waits for), one question at a time, the answer posted
 * as JSON text so the main thread does not walk or stringify it.
 *
 * In: `workerData` `{ path }`; messages {@link LookupRequest}. Out: {@link LookupReply}.
 */
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { ErrorCodes, GatewayError } from '../errors.js';
import { answerItemQuestion } from './item-questions.js';
import { LOOKUP_NICENESS, type LookupReply, type LookupRequest } from './lookup-workers.js';
import { BufferReader } from './reader.js';

const port = parentPort;
if (!port)
  throw new GatewayError(
    ErrorCodes.INTERNAL,
    'lookup-worker.js runs as a worker thread (src/queries/lookup-workers.ts)',
  );
const { path } = workerData as { path: string };

// A lookup is a person's question; probes, ingest and delivery are the line's. On a busy two-core
// gateway this thread would take a core's share from the event loop it was made to spare, so it
// runs at a lower priority (niceness is per thread on Linux, and `0` names the calling thread):
// it gets the CPU the loop leaves. Where that is refused it runs at the process's: the shipped
// systemd unit's SystemCallFilter drops @resources, setpriority with it (EPERM).
try {
  setPriority(0, LOOKUP_NICENESS);
} catch {
  // Best effort: the lookups still leave the loop free, only not the CPU.
}

// Opened at the first question, not at load: a buffer that cannot be read is told with that
// question (500 with SQLite's reason) rather than as a thread that died at birth.
let reader: BufferReader | undefined;

// Each statement of a lookup reads its own snapshot, not one transaction for the whole lookup: a
// read transaction pins the write-ahead log where it began, so the daemon's checkpoints could not
// pass it for as long as a lookup runs (up to its deadline), and the disk guard counts on them
// keeping the log small. A trace may so straddle a commit made while it ran (a scan's state one
// step newer in one part than in another), as a health page refreshed a moment later would.
port.on('message', (request: LookupRequest) => {
  let reply: LookupReply;
  try {
    reader ??= new BufferReader(path);
    const answer = answerItemQuestion(reader.reports, request.question, new Map(request.dcpKinds));
    reply = { id: request.id, ...answer };
  } catch (err) {
    reply = { id: request.id, error: err instanceof Error ? err.message : String(err) };
  }
  port.postMessage(reply);
});

port.once('close', () => reader?.close());
