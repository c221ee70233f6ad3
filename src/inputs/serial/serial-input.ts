import { stat } from 'node:fs/promises';
import { SerialPort } from 'serialport';
import type { SerialInputConfig } from './schema.js';
import type { Logger } from '../../log.js';
import { InputStateTracker } from '../input-state.js';
import { FramedStream } from '../stream/framed-stream.js';
import type { InputAdapter, InputStatus, IntakeSink } from '../types.js';
import { ErrorCodes, GatewayError } from '../../errors.js';
import type { Clock } from '../../clock.js';

export { MAX_PENDING_ITEMS } from '../stream/framed-stream.js';

/** Line settings handed to {@link SerialInputOptions.openPort}; the values of the input's config. */
export interface SerialOpenOptions {
  path: string;
  baudRate: number;
  dataBits: SerialInputConfig['dataBits'];
  stopBits: SerialInputConfig['stopBits'];
  parity: SerialInputConfig['parity'];
  flowControl: SerialInputConfig['flowControl'];
}

/**
 * The part of serialport's `SerialPort` the adapter uses, returned not yet open. Small on purpose
 * so a test can hand in a fake device that emits bytes.
 */
export interface SerialPortLike {
  /** Opens the device; the callback gets the error when it cannot be opened. */
  open(callback: (err: Error | null) => void): void;
  close(callback?: (err: Error | null) => void): void;
  /** Writes acknowledgement bytes to the scanner. */
  write(data: Buffer, callback?: (err: Error | null | undefined) => void): unknown;
  readonly isOpen: boolean;
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  /** `err` is set (serialport: a `DisconnectedError`) when the device went away. */
  on(event: 'close', listener: (err?: Error | null) => void): unknown;
  removeAllListeners(event?: string): unknown;
}

export interface SerialInputOptions {
  config: SerialInputConfig;
  sink: IntakeSink;
  logger: Logger;
  /** Clock for `receivedAt`; defaults to the system clock. */
  now?: Clock;
  /** Creates the port object; defaults to {@link openSerialPort}. */
  openPort?: (options: SerialOpenOptions) => SerialPortLike;
  /** First delay before retrying a failed `sink.submit`, in ms (doubles up to 30 s); default 500. */
  submitRetryBaseMs?: number;
  /**
   * While the port is up, how often its path is looked at, in ms; default
   * {@link PRESENCE_CHECK_MS}. See {@link SerialInput}.
   */
  presenceCheckMs?: number;
}

/**
 * How often an open port's device path is looked at, in ms: a device that vanished without the
 * driver telling the port is seen as gone after two looks in a row, within twice this.
 */
export const PRESENCE_CHECK_MS = 1000;

/**
 * The default `openPort`: serialport's `SerialPort`, not auto-opened. `hupcl: false` so nothing
 * depends on modem lines, which a pty (and many USB adapters) lack; RTS/CTS or XON/XOFF only when
 * `flowControl` asks for it.
 */
export function openSerialPort(options: SerialOpenOptions): SerialPortLike {
  const { flowControl, ...line } = options;
  return new SerialPort({
    ...line,
    autoOpen: false,
    hupcl: false,
    rtscts: flowControl === 'rtscts',
    xon: flowControl === 'xonxoff',
    xoff: flowControl === 'xonxoff',
  });
}

/**
 * Input adapter for a serial scanner (RS-232 or USB CDC): frames the byte stream (terminator,
 * STX…ETX or silence; see {@link FramedStream}) and submits each read, bytes exactly as received
 * after optional prefix/suffix stripping, to the sink; writes `ackBytes`/`nakBytes` back.
 *
 * The device may be missing or unplugged at any time: the adapter then reports `down` with the
 * reason and reopens it after `reconnectMs`, doubling up to `reconnectMaxMs` (`connecting` → `up`)
 * without a restart. A read cut off by the device going away, and a read longer than
 * `maxReadLength`, become rejections so nothing vanishes silently.
 *
 * The port's `close` or `error` is how a device going away is usually seen. Not always: a
 * USB-serial adapter pulled out, or a pty whose other end died, can leave the open descriptor
 * silent, and the input would stay `up` on a device that is gone. So while up, the device path is
 * looked at every `presenceCheckMs`: when two looks in a row find that it no longer exists, or that
 * it names another device than the one opened (its `rdev` changed: the adapter came back as a new
 * node), the port is given up as lost.
 *
 * A serial scanner cannot wait, so this adapter has no `setPaused`: it keeps committing.
 */
export class SerialInput implements InputAdapter {
  readonly id: string;
  readonly type = 'serial';

  private readonly config: SerialInputConfig;
  private readonly log: Logger;
  private readonly openPort: (options: SerialOpenOptions) => SerialPortLike;
  private readonly stream: FramedStream;
  private readonly state: InputStateTracker;

  private port: SerialPortLike | undefined;
  /** Bumped whenever a port is given up, so late events of an old port are ignored. */
  private generation = 0;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private failuresSinceUp = 0;
  private stopping = false;
  private readonly presenceCheckMs: number;
  private presenceTimer: NodeJS.Timeout | undefined;

  /** @throws GatewayError `SCANGW_E_CONFIG` when a byte key (terminator, ackBytes…) holds a character above U+00FF. */
  constructor(options: SerialInputOptions) {
    this.config = options.config;
    this.id = options.config.id;
    this.log = options.logger.child({ component: 'input.serial', inputId: options.config.id });
    this.openPort = options.openPort ?? openSerialPort;
    this.presenceCheckMs = options.presenceCheckMs ?? PRESENCE_CHECK_MS;
    this.state = new InputStateTracker(this.id, this.type, this.config.path, options.now);
    this.stream = new FramedStream({
      inputId: this.id,
      config: this.config,
      sink: options.sink,
      logger: this.log,
      origin: { port: this.config.path },
      ...(options.now ? { now: options.now } : {}),
      ...(options.submitRetryBaseMs !== undefined
        ? { submitRetryBaseMs: options.submitRetryBaseMs }
        : {}),
    });
  }

  /** Tries to open the device once; a missing device is not an error here: it is retried. */
  async start(): Promise<void> {
    this.stopping = false;
    await this.connect();
  }

  /** Closes the port, stops reconnecting; resolves after every read so far is committed (or given up). */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    const port = this.port;
    this.detach();
    if (port?.isOpen)
      await closePort(port).catch((err: unknown) =>
        this.log.warn({ err }, 'closing the serial port failed'),
      );
    await this.stream.close('input stopped before the read was complete');
    this.state.set('stopped');
  }

  status(): InputStatus {
    return this.state.status();
  }

  private async connect(): Promise<void> {
    if (this.stopping) return;
    this.reconnectTimer = undefined;
    this.state.set('connecting');
    const generation = ++this.generation;
    let port: SerialPortLike;
    try {
      port = this.openPort({
        path: this.config.path,
        baudRate: this.config.baudRate,
        dataBits: this.config.dataBits,
        stopBits: this.config.stopBits,
        parity: this.config.parity,
        flowControl: this.config.flowControl,
      });
    } catch (err) {
      this.lost(generation, err);
      return;
    }
    this.port = port;
    port.on('data', (chunk: Buffer) => {
      if (generation === this.generation) this.stream.push(chunk);
    });
    port.on('error', (err: Error) => this.lost(generation, err));
    port.on('close', (err?: Error | null) =>
      this.lost(generation, err ?? new GatewayError(ErrorCodes.INPUT, 'serial port closed')),
    );
    const err = await new Promise<Error | null>((resolve) => port.open(resolve));
    if (generation !== this.generation) {
      // stop() or an error came first; do not keep a port nobody listens to.
      if (port.isOpen) void closePort(port).catch(() => undefined);
      return;
    }
    if (err) {
      this.lost(generation, err);
      return;
    }
    this.stream.setWriter((bytes) => {
      if (port.isOpen)
        port.write(
          bytes,
          (e) => e && this.log.debug({ err: e }, 'writing acknowledgement bytes failed'),
        );
    });
    this.state.set('up');
    this.failuresSinceUp = 0;
    await this.watchPresence(generation);
    this.log.info(
      { path: this.config.path, baudRate: this.config.baudRate, framing: this.config.framing },
      'serial port open',
    );
  }

  /** The port failed to open, errored or closed: report `down`, drop it and schedule a reopen with backoff. */
  private lost(generation: number, err: unknown): void {
    if (generation !== this.generation || this.stopping) return;
    const message = err instanceof Error ? err.message : String(err);
    const wasUp = this.state.state === 'up';
    this.state.down(`${this.config.path}: ${message}`);
    const delayMs = Math.min(
      this.config.reconnectMaxMs,
      this.config.reconnectMs * 2 ** Math.min(this.failuresSinceUp, 20),
    );
    // The first failure is news; the same failure every few seconds is noise.
    const level = wasUp || this.failuresSinceUp === 0 ? 'warn' : 'debug';
    this.failuresSinceUp += 1;
    this.log[level](
      { path: this.config.path, err, retryInMs: delayMs },
      'serial port unavailable; retrying',
    );

    const port = this.port;
    this.detach();
    if (port?.isOpen) void closePort(port).catch(() => undefined);
    this.stream.end('device closed before the read was complete');
    this.reconnectTimer = setTimeout(() => void this.connect(), delayMs);
    this.reconnectTimer.unref();
  }

  /**
   * Notes which device the open port's path names and, every `presenceCheckMs` while this port
   * is the current one, whether the path still names it (see the class comment). A look that
   * cannot tell (a permission refused) says nothing either way.
   */
  private async watchPresence(generation: number): Promise<void> {
    const opened = await deviceOf(this.config.path);
    if (generation !== this.generation) return;
    // The device the port was opened on, once a look has named one.
    let known = opened === 'gone' ? undefined : opened;
    // Two looks in a row must agree before the port is given up: bytes a scanner sends while no
    // one holds the port open are gone, so a glimpse of a path being replaced costs more than a
    // second's delay in seeing a device that is really gone.
    let doubts = opened === 'gone' ? 1 : 0;
    const check = async (): Promise<void> => {
      const now = await deviceOf(this.config.path);
      if (generation !== this.generation || now === undefined) return;
      if (now !== 'gone' && (known === undefined || now === known)) {
        known = now;
        doubts = 0;
        return;
      }
      doubts += 1;
      if (doubts < 2) return;
      this.lost(
        generation,
        new GatewayError(
          ErrorCodes.INPUT,
          now === 'gone'
            ? 'the device is gone (its path no longer exists)'
            : 'the device was replaced (its path names another device now)',
        ),
      );
    };
    this.presenceTimer = setInterval(() => void check(), this.presenceCheckMs);
    this.presenceTimer.unref();
  }

  private detach(): void {
    this.generation += 1;
    clearInterval(this.presenceTimer);
    this.presenceTimer = undefined;
    this.stream.setWriter(undefined);
    const port = this.port;
    this.port = undefined;
    if (!port) return;
    port.removeAllListeners('data');
    port.removeAllListeners('close');
    port.removeAllListeners('error');
    // A late error from a port we gave up must not become an uncaught 'error' event.
    port.on('error', () => undefined);
  }
}

/**
 * What `path` names: the device number (`rdev`, with the inode, as a string), `'gone'` when it
 * does not exist (ENOENT, ENODEV, ENOTDIR), or undefined when it cannot be looked at.
 */
async function deviceOf(path: string): Promise<string | 'gone' | undefined> {
  try {
    const s = await stat(path, { bigint: true });
    return `${s.rdev}:${s.ino}`;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENODEV' || code === 'ENOTDIR' ? 'gone' : undefined;
  }
}

function closePort(port: SerialPortLike): Promise<void> {
  return new Promise((resolve, reject) => port.close((err) => (err ? reject(err) : resolve())));
}
