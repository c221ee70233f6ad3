import { SerialPort } from 'serialport';
import type { SerialInputConfig } from '../../config/schema.js';
import type { Logger } from '../../log.js';
import type { InputAdapter, InputRejection, InputState, InputStatus, IntakeItem, IntakeSink } from '../types.js';
import { Framer, terminatorBytes, type FramerEvent } from './framer.js';

/** Line settings handed to {@link SerialInputOptions.openPort}; the values of the input's config. */
export interface SerialOpenOptions {
  path: string;
  baudRate: number;
  dataBits: SerialInputConfig['dataBits'];
  stopBits: SerialInputConfig['stopBits'];
  parity: SerialInputConfig['parity'];
}

/**
 * The part of serialport's `SerialPort` the adapter uses, returned not yet open. Small on purpose
 * so a test can hand in a fake device that emits bytes.
 */
export interface SerialPortLike {
  /** Opens the device; the callback gets the error when it cannot be opened. */
  open(callback: (err: Error | null) => void): void;
  close(callback?: (err: Error | null) => void): void;
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
  now?: () => Date;
  /** Creates the port object; defaults to {@link openSerialPort}. */
  openPort?: (options: SerialOpenOptions) => SerialPortLike;
  /** First delay before retrying a failed `sink.submit`, in ms (doubles up to 30 s); default 500. */
  submitRetryBaseMs?: number;
}

/** Reads held in memory while the buffer refuses them; beyond this the oldest are dropped (logged). */
export const MAX_PENDING_ITEMS = 10_000;
const SUBMIT_RETRY_MAX_MS = 30_000;

/**
 * The default `openPort`: serialport's `SerialPort`, not auto-opened. `hupcl: false` and
 * `rtscts: false` so nothing depends on modem lines, which a pty (and many USB adapters) lack.
 */
export function openSerialPort(options: SerialOpenOptions): SerialPortLike {
  return new SerialPort({ ...options, autoOpen: false, hupcl: false, rtscts: false });
}

/**
 * Input adapter for a serial scanner (RS-232 or USB CDC): frames the byte stream at the configured
 * terminator ({@link Framer}) and submits each read, bytes exactly as received, to the sink.
 *
 * The device may be missing or unplugged at any time: the adapter then reports `down` with the
 * reason and reopens it every `reconnectMs` (`connecting` → `up`) without a restart. A read cut
 * off by the device going away, and a read longer than `maxReadLength`, become
 * {@link InputRejection}s so nothing vanishes silently.
 *
 * A serial scanner cannot resend, so items the sink refuses (buffer failure) are kept in memory and
 * retried with backoff, up to {@link MAX_PENDING_ITEMS}.
 */
export class SerialInput implements InputAdapter {
  readonly id: string;
  readonly type = 'serial';

  private readonly config: SerialInputConfig;
  private readonly sink: IntakeSink;
  private readonly log: Logger;
  private readonly now: () => Date;
  private readonly openPort: (options: SerialOpenOptions) => SerialPortLike;
  private readonly submitRetryBaseMs: number;
  private readonly framer: Framer;

  private state: InputState = 'starting';
  private lastError: string | undefined;
  private lastErrorAt: string | undefined;
  private port: SerialPortLike | undefined;
  /** Bumped whenever a port is given up, so late events of an old port are ignored. */
  private generation = 0;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private failuresSinceUp = 0;
  private stopping = false;

  private readonly pending: IntakeItem[] = [];
  private draining: Promise<void> | undefined;
  private retryTimer: { timer: NodeJS.Timeout; resolve: () => void } | undefined;

  /** @throws GatewayError `SCANGW_E_CONFIG` when `terminator` holds a character above U+00FF. */
  constructor(options: SerialInputOptions) {
    this.config = options.config;
    this.id = options.config.id;
    this.sink = options.sink;
    this.log = options.logger.child({ component: 'input.serial', inputId: options.config.id });
    this.now = options.now ?? (() => new Date());
    this.openPort = options.openPort ?? openSerialPort;
    this.submitRetryBaseMs = options.submitRetryBaseMs ?? 500;
    this.framer = new Framer({ terminator: terminatorBytes(options.config.terminator), maxLength: options.config.maxReadLength });
  }

  /** Tries to open the device once; a missing device is not an error here: it is retried. */
  async start(): Promise<void> {
    this.stopping = false;
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    const port = this.port;
    this.detach();
    if (port?.isOpen) await closePort(port).catch((err: unknown) => this.log.warn({ err }, 'closing the serial port failed'));
    this.enqueuePartial('input stopped before the terminator arrived');
    this.kickDrain();
    // A pending submit retry would wait for a buffer that may never come back: try once more now.
    this.retryTimer?.resolve();
    await this.draining;
    if (this.pending.length > 0) {
      this.log.error({ dropped: this.pending.length }, 'serial reads not stored because the buffer refused them until stop');
      this.pending.length = 0;
    }
    this.state = 'stopped';
  }

  status(): InputStatus {
    return {
      id: this.id,
      type: this.type,
      state: this.state,
      ...(this.state === 'down' && this.lastError !== undefined ? { lastError: this.lastError, lastErrorAt: this.lastErrorAt } : {}),
      source: this.config.path,
    };
  }

  private async connect(): Promise<void> {
    if (this.stopping) return;
    this.reconnectTimer = undefined;
    this.state = 'connecting';
    const generation = ++this.generation;
    let port: SerialPortLike;
    try {
      port = this.openPort({
        path: this.config.path,
        baudRate: this.config.baudRate,
        dataBits: this.config.dataBits,
        stopBits: this.config.stopBits,
        parity: this.config.parity,
      });
    } catch (err) {
      this.lost(generation, err);
      return;
    }
    this.port = port;
    port.on('data', (chunk: Buffer) => {
      if (generation === this.generation) this.onData(chunk);
    });
    port.on('error', (err: Error) => this.lost(generation, err));
    port.on('close', (err?: Error | null) => this.lost(generation, err ?? new Error('serial port closed')));
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
    this.state = 'up';
    this.failuresSinceUp = 0;
    this.log.info({ path: this.config.path, baudRate: this.config.baudRate }, 'serial port open');
  }

  /** The port failed to open, errored or closed: report `down`, drop it and schedule a reopen. */
  private lost(generation: number, err: unknown): void {
    if (generation !== this.generation || this.stopping) return;
    const message = err instanceof Error ? err.message : String(err);
    const wasUp = this.state === 'up';
    this.state = 'down';
    this.lastError = `${this.config.path}: ${message}`;
    this.lastErrorAt = this.now().toISOString();
    // The first failure is news; the same failure every reconnectMs is noise.
    const level = wasUp || this.failuresSinceUp === 0 ? 'warn' : 'debug';
    this.failuresSinceUp += 1;
    this.log[level]({ path: this.config.path, err, retryInMs: this.config.reconnectMs }, 'serial port unavailable; retrying');

    const port = this.port;
    this.detach();
    if (port?.isOpen) void closePort(port).catch(() => undefined);
    this.enqueuePartial('device closed before the terminator arrived');
    this.kickDrain();
    this.reconnectTimer = setTimeout(() => void this.connect(), this.config.reconnectMs);
    this.reconnectTimer.unref();
  }

  private detach(): void {
    this.generation += 1;
    const port = this.port;
    this.port = undefined;
    if (!port) return;
    port.removeAllListeners('data');
    port.removeAllListeners('close');
    port.removeAllListeners('error');
    // A late error from a port we gave up must not become an uncaught 'error' event.
    port.on('error', () => undefined);
  }

  private onData(chunk: Buffer): void {
    const receivedAt = this.now();
    const items = this.framer.push(chunk).map((event) => this.toItem(event, receivedAt));
    if (items.length === 0) return;
    this.enqueue(items);
  }

  private toItem(event: FramerEvent, receivedAt: Date): IntakeItem {
    const origin = { port: this.config.path };
    if (event.kind === 'frame') {
      return { kind: 'read', read: { inputId: this.id, raw: event.bytes, receivedAt, origin } };
    }
    return this.rejection(event.head, `read longer than ${this.config.maxReadLength} bytes`, receivedAt);
  }

  private rejection(raw: Buffer, reason: string, receivedAt: Date): IntakeItem {
    const rejection: InputRejection = { inputId: this.id, raw, receivedAt, reason, origin: { port: this.config.path } };
    return { kind: 'rejection', rejection };
  }

  private enqueuePartial(reason: string): void {
    const partial = this.framer.flush();
    if (partial) this.enqueue([this.rejection(partial, reason, this.now())]);
  }

  private enqueue(items: IntakeItem[]): void {
    this.pending.push(...items);
    const excess = this.pending.length - MAX_PENDING_ITEMS;
    if (excess > 0) {
      this.pending.splice(0, excess);
      this.log.error({ dropped: excess }, 'buffer has refused serial reads for too long; oldest reads dropped');
    }
    this.kickDrain();
  }

  private kickDrain(): void {
    if (this.draining || this.pending.length === 0) return;
    this.draining = this.drain().finally(() => {
      this.draining = undefined;
      if (!this.stopping) this.kickDrain();
    });
  }

  /** Submits pending items in arrival order, one call per batch; retries a refused batch with backoff. */
  private async drain(): Promise<void> {
    let attempt = 0;
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, this.pending.length);
      try {
        await this.sink.submit(batch);
        attempt = 0;
      } catch (err) {
        this.pending.unshift(...batch);
        if (this.stopping) return;
        const delayMs = Math.min(SUBMIT_RETRY_MAX_MS, this.submitRetryBaseMs * 2 ** attempt);
        attempt += 1;
        this.log.error({ err, items: batch.length, retryInMs: delayMs }, 'buffer refused serial reads; retrying');
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delayMs);
          this.retryTimer = { timer, resolve };
        });
        if (this.retryTimer) clearTimeout(this.retryTimer.timer);
        this.retryTimer = undefined;
      }
    }
  }
}

function closePort(port: SerialPortLike): Promise<void> {
  return new Promise((resolve, reject) => port.close((err) => (err ? reject(err) : resolve())));
}
