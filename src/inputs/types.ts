import type { VerdictReason } from '../config/verdict-reasons.js';
import type { Read } from '../shapes/read.js';

/**
 * The single shape every input adapter produces and the single interface every adapter implements.
 * Adapters are thin: they frame bytes into reads and report their own connection state. Deciding
 * what a read means (no-read, duplicate, rejection, Scan) is the mapping's job, and counting it is
 * the intake pipeline's.
 */

/** One barcode read, exactly as a source delivered it: src/shapes/read.ts. */
export type { Read };

/**
 * Something an input could not turn into a read at all (a CSV row without the barcode column, a
 * JSON payload that does not parse). Stored as a rejection with its raw bytes and reason.
 */
export interface InputRejection {
  inputId: string;
  raw: Buffer;
  receivedAt: Date;
  reason: string;
  origin?: Record<string, string | number>;
  /** Why, as a code for the scanner's NAK (`nakBytesByReason`); the intake's `refused` when absent. */
  code?: VerdictReason;
}

export type IntakeItem =
  { kind: 'read'; read: Read } | { kind: 'rejection'; rejection: InputRejection };

/** Options of a submit beyond the items: what every input kind may ask of any sink. */
export interface SubmitOptions {
  /**
   * The source can take its items committed in parts (HTTP ingest: a request of up to 10,000
   * reads). Intake then maps and commits them in slices, one per turn of the event loop, with the
   * other inputs' submits and the probes served between two slices, and resolves once the last is
   * committed. A refusal after some slices were committed rejects with `details.committedItems`:
   * the leading items committed (0 when none).
   */
  inSlices?: boolean;
}

/**
 * What intake made of one item, and the verdict the source may tell the scanner: `ack` for a read
 * that became a scan (or a container's opening or closing code that did its work), `nak` with the
 * reason's code for everything else (src/intake/verdict.ts).
 */
export interface ItemOutcome {
  outcome: 'scan' | 'noRead' | 'duplicate' | 'rejected';
  reason?: string;
  /** Absent from sinks that do not judge (tests): then a `scan` is `ack`, the rest `nak`. */
  verdict?: 'ack' | 'nak';
  /** With `nak`: why, as a code. */
  code?: VerdictReason;
  /** The scan's reference (with `scan`, and a container code: the container's). */
  reference?: string;
}

/** What intake made of each item of a submit, in the items' order (when the sink reports it). */
export interface SubmitResult {
  outcomes: ItemOutcome[];
}

/**
 * Where adapters hand their items. `submit` resolves only after the items are committed to the
 * SQLite buffer; only then may the adapter acknowledge them to its source (move the file, PUBACK,
 * answer 202). It rejects when the commit failed; the adapter must then not acknowledge.
 *
 * A kind whose source needs a record of its own committed in the same transaction as the items
 * (the files input's content hash, the MQTT input's message identity) declares an extension of
 * this interface in its folder (`files/file-sink.ts`, `mqtt/message-sink.ts`), which the intake
 * implements; every other kind needs only `submit`.
 */
export interface IntakeSink {
  /** Resolves once the items are committed (with their outcomes, from the real intake). */
  submit(items: IntakeItem[], options?: SubmitOptions): Promise<SubmitResult | void>;
}

/**
 * `waiting for reader`: listening with no reader connected (a TCP input in server mode); `up`
 * there means at least one reader is connected.
 */
export type InputState =
  'starting' | 'connecting' | 'up' | 'waiting for reader' | 'down' | 'paused' | 'stopped';

export interface InputStatus {
  id: string;
  type: string;
  state: InputState;
  /** Human-readable description of the last error, when state is `down`. */
  lastError?: string;
  lastErrorAt?: string;
  /** Where this input reads from (device path, folder, URL), for the health page. */
  source: string;
  /** A file being read and committed in chunks (files input), while it is. */
  progress?: InputProgress;
  /** An input readers connect to (TCP server): who is connected now. */
  readers?: InputReaders;
  /** The input's name for people (`name` in its configuration). */
  name?: string;
}

/** The readers connected to an input that listens for them (TCP in server mode). */
export interface InputReaders {
  count: number;
  /** Readers that should be connected (`expectReaders`); fewer is a problem. 0 = none expected. */
  expected: number;
  /** Each connected reader: its address (`host:port`) and since when (ISO 8601). */
  connected: { address: string; since: string }[];
}

/** A file in progress: its name, items committed so far, its size, since when. */
export interface InputProgress {
  file: string;
  /** Items (reads and rejected rows) committed so far. */
  rows: number;
  /** The file's size, in bytes. */
  bytes: number;
  /** When its reading started (ISO 8601). */
  startedAt: string;
}

/** Every adapter: started in order by the app, stopped in reverse. */
export interface InputAdapter {
  readonly id: string;
  readonly type: string;
  start(): Promise<void>;
  /** Stops taking new data; resolves after anything already handed to the sink settled. */
  stop(): Promise<void>;
  status(): InputStatus;
  /**
   * Back-pressure: when the buffer nears its quota, inputs that can wait (MQTT stops taking
   * messages, files stay in the folder) are paused; inputs that cannot wait (serial) leave this
   * out and keep committing. Optional.
   */
  setPaused?(paused: boolean): void;
  /**
   * Reads the input's secrets again, on a configuration reload that left its settings as they
   * were (the HTTP ingest token). Answers whether one changed; throws `SCANGW_E_SECRET` when one
   * cannot be read, and then keeps the one in force. Optional.
   */
  reloadSecrets?(): Promise<boolean>;
}
