import {
  createConnection,
  createServer,
  type AddressInfo,
  type Server,
  type Socket,
} from 'node:net';
import type { TcpInputConfig } from './schema.js';
import type { Logger } from '../../log.js';
import { InputStateTracker } from '../input-state.js';
import { FramedStream } from '../stream/framed-stream.js';
import type { InputAdapter, InputStatus, IntakeSink } from '../types.js';
import { ErrorCodes, GatewayError } from '../../errors.js';
import type { Clock } from '../../clock.js';

/** What a {@link TcpInput} needs. */
export interface TcpInputOptions {
  config: TcpInputConfig;
  sink: IntakeSink;
  logger: Logger;
  now?: Clock;
  /** First delay before retrying a refused submit, in ms; default 500. */
  submitRetryBaseMs?: number;
}

interface Connection {
  socket: Socket;
  stream: FramedStream;
  /** Resolves once the socket closed (its reads may still be settling). */
  closed: Promise<void>;
  /** `host:port` of the reader. */
  peer: string;
  /** When it connected (ISO 8601). */
  since: string;
  lastError?: Error;
}

/**
 * Input adapter for network scanners (fixed-mount camera readers) speaking raw TCP, framed like a
 * serial scanner ({@link FramedStream}: terminator, STX…ETX or silence; ack/nak bytes written back
 * on the same connection).
 *
 * `mode: client` connects to the reader at `host:port` and reconnects with backoff (`reconnectMs`
 * doubling to `reconnectMaxMs`) whenever the connection fails or drops. `mode: server` listens on
 * `host:port` and takes up to `maxConnections` readers at once, each with its own framing state;
 * the listening socket is retried with backoff when it cannot be bound.
 *
 * In server mode the input is `up` only while a reader is connected: listening with none, it is
 * `waiting for reader`, and its status lists the readers connected (address, since when); with
 * `expectReaders`, fewer connected is a problem on the page (src/health/derive.ts).
 *
 * TCP keepalive (`keepAliveMs`) finds a dead peer eventually; `idleTimeoutMs` drops (and, as a
 * client, reconnects) a connection silent for that long, for readers that send heartbeats.
 *
 * `setPaused(true)` stops reading the sockets: TCP flow control then holds the reader's data in
 * its send buffer (nothing lost on our side; a reader whose buffer fills may drop reads itself).
 */
export class TcpInput implements InputAdapter {
  readonly id: string;
  readonly type = 'tcp';
  private readonly config: TcpInputConfig;
  private readonly log: Logger;
  private readonly state: InputStateTracker;
  private readonly connections = new Set<Connection>();
  /** Client mode: one stream for the input's life, so reads the buffer refused survive a reconnect. */
  private readonly clientStream: FramedStream | undefined;
  /** Server mode: streams of closed connections whose reads are still being committed. */
  private readonly settling = new Set<FramedStream>();
  private server: Server | undefined;
  private timer: NodeJS.Timeout | undefined;
  private attempt = 0;
  private stopping = false;
  private paused = false;

  constructor(private readonly options: TcpInputOptions) {
    this.config = options.config;
    this.id = options.config.id;
    this.log = options.logger.child({ component: 'input.tcp', inputId: options.config.id });
    const where = `${this.config.host}:${this.config.port}`;
    this.state = new InputStateTracker(
      this.id,
      this.type,
      this.config.mode === 'client' ? `tcp://${where}` : `tcp-listen://${where}`,
      options.now,
    );
    // Built now in both modes, so bad byte keys fail at construction (config time).
    const stream = this.newStream({ peer: where });
    this.clientStream = this.config.mode === 'client' ? stream : undefined;
  }

  /** Client: tries to connect once; server: tries to listen once. Failure is `down` and retried, not a start error. */
  async start(): Promise<void> {
    this.stopping = false;
    if (this.config.mode === 'client') await this.connect();
    else await this.listen();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    const server = this.server;
    this.server = undefined;
    const closing = server
      ? new Promise<void>((resolve) => server.close(() => resolve()))
      : Promise.resolve();
    const connections = [...this.connections];
    for (const c of connections) c.socket.destroy();
    await Promise.all(connections.map((c) => c.closed));
    await closing;
    const reason = 'input stopped before the read was complete';
    await Promise.all(
      [...this.settling, ...(this.clientStream ? [this.clientStream] : [])].map((stream) =>
        stream.close(reason),
      ),
    );
    this.state.set('stopped');
  }

  status(): InputStatus {
    if (this.config.mode === 'client') return this.state.status();
    const connected = [...this.connections].map((c) => ({ address: c.peer, since: c.since }));
    return this.state.status({
      count: connected.length,
      expected: this.config.expectReaders,
      connected,
    });
  }

  /** Server mode, listening and not paused: `up` with a reader connected, else `waiting for reader`. */
  private listeningState(): void {
    if (!this.server || this.paused || this.stopping) return;
    this.state.set(this.connections.size > 0 ? 'up' : 'waiting for reader');
  }

  /** Server mode: the address actually bound (port 0 picks a free one), once listening. */
  address(): { host: string; port: number } | undefined {
    const a = this.server?.address() as AddressInfo | null | undefined;
    return a ? { host: a.address, port: a.port } : undefined;
  }

  /** Number of open reader connections. */
  get connectionCount(): number {
    return this.connections.size;
  }

  setPaused(paused: boolean): void {
    if (this.paused === paused || this.stopping) return;
    this.paused = paused;
    for (const c of this.connections) {
      if (paused) c.socket.pause();
      else c.socket.resume();
    }
    if (paused) this.state.set('paused');
    else if (this.state.state === 'paused') {
      if (this.server) this.listeningState();
      else this.state.set(this.connections.size > 0 ? 'up' : 'connecting');
    }
    this.log.info({ paused }, paused ? 'reading paused (back-pressure)' : 'reading resumed');
  }

  // ---- client -------------------------------------------------------------------------------

  private async connect(): Promise<void> {
    if (this.stopping) return;
    this.timer = undefined;
    if (!this.paused) this.state.set('connecting');
    const { host, port, connectTimeoutMs } = this.config;
    const socket = createConnection({ host, port });
    const outcome = await new Promise<Error | undefined>((resolve) => {
      const timer = setTimeout(
        () =>
          resolve(
            new GatewayError(ErrorCodes.INPUT, `no connection within ${connectTimeoutMs} ms`),
          ),
        connectTimeoutMs,
      );
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve(undefined);
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        resolve(err);
      });
    });
    if (outcome || this.stopping) {
      socket.on('error', () => undefined);
      socket.destroy();
      if (outcome) this.retry(outcome);
      return;
    }
    this.attempt = 0;
    if (!this.paused) this.state.set('up');
    this.log.info({ host, port }, 'connected to reader');
    const connection = this.adopt(
      socket,
      `${host}:${port}`,
      this.clientStream ?? this.newStream({ peer: `${host}:${port}` }),
    );
    void connection.closed.then(() => {
      if (!this.stopping)
        this.retry(
          connection.lastError ??
            new GatewayError(ErrorCodes.INPUT, 'reader closed the connection'),
        );
    });
  }

  private retry(err: Error): void {
    if (this.stopping) return;
    const delayMs = Math.min(
      this.config.reconnectMaxMs,
      this.config.reconnectMs * 2 ** Math.min(this.attempt, 20),
    );
    const news = this.state.down(`${this.config.host}:${this.config.port}: ${err.message}`);
    this.log[news || this.attempt === 0 ? 'warn' : 'debug'](
      { err, retryInMs: delayMs },
      'reader connection unavailable; retrying',
    );
    this.attempt += 1;
    this.timer = setTimeout(() => void this.connect(), delayMs);
  }

  // ---- server -------------------------------------------------------------------------------

  private async listen(): Promise<void> {
    if (this.stopping) return;
    this.timer = undefined;
    this.state.set('connecting');
    const server = createServer((socket) => this.accept(socket));
    server.maxConnections = this.config.maxConnections;
    const err = await new Promise<Error | undefined>((resolve) => {
      server.once('error', resolve);
      server.listen({ host: this.config.host, port: this.config.port }, () => {
        server.off('error', resolve);
        resolve(undefined);
      });
    });
    if (err || this.stopping) {
      server.close();
      if (err) {
        const delayMs = Math.min(
          this.config.reconnectMaxMs,
          this.config.reconnectMs * 2 ** Math.min(this.attempt++, 20),
        );
        if (this.state.down(`listen ${this.config.host}:${this.config.port}: ${err.message}`))
          this.log.warn({ err, retryInMs: delayMs }, 'cannot listen; retrying');
        this.timer = setTimeout(() => void this.listen(), delayMs);
      }
      return;
    }
    server.on('error', (e) => this.log.warn({ err: e }, 'listening socket error'));
    this.server = server;
    this.attempt = 0;
    if (this.paused) this.state.set('paused');
    else this.listeningState();
    this.log.info({ address: this.address() }, 'listening for readers');
  }

  private accept(socket: Socket): void {
    if (this.stopping) {
      socket.destroy();
      return;
    }
    const peer = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
    this.log.info({ peer }, 'reader connected');
    this.adopt(socket, peer, this.newStream({ peer }));
    this.listeningState();
  }

  // ---- both ---------------------------------------------------------------------------------

  private newStream(origin: Record<string, string>): FramedStream {
    return new FramedStream({
      inputId: this.id,
      config: this.config,
      sink: this.options.sink,
      logger: this.log,
      origin,
      ...(this.options.now ? { now: this.options.now } : {}),
      ...(this.options.submitRetryBaseMs !== undefined
        ? { submitRetryBaseMs: this.options.submitRetryBaseMs }
        : {}),
    });
  }

  private adopt(socket: Socket, peer: string, stream: FramedStream): Connection {
    if (this.config.keepAliveMs > 0) socket.setKeepAlive(true, this.config.keepAliveMs);
    socket.setNoDelay(true);
    if (this.config.idleTimeoutMs > 0) {
      socket.setTimeout(this.config.idleTimeoutMs, () =>
        socket.destroy(
          new GatewayError(
            ErrorCodes.INPUT,
            `nothing received for ${this.config.idleTimeoutMs} ms`,
          ),
        ),
      );
    }
    stream.setWriter((bytes) => {
      if (!socket.destroyed) socket.write(bytes);
    });
    let resolveClosed!: () => void;
    const connection: Connection = {
      socket,
      stream,
      closed: new Promise((resolve) => (resolveClosed = resolve)),
      peer,
      since: new Date((this.options.now ?? Date.now)()).toISOString(),
    };
    this.connections.add(connection);
    socket.on('data', (chunk: Buffer) => stream.push(chunk));
    socket.on('error', (err) => {
      connection.lastError = err;
      this.log.debug({ err, peer }, 'reader connection error');
    });
    socket.once('close', () => {
      stream.setWriter(undefined);
      this.connections.delete(connection);
      stream.end(
        this.stopping
          ? 'input stopped before the read was complete'
          : 'connection closed before the read was complete',
      );
      if (this.config.mode === 'server') {
        this.log.info({ peer }, 'reader disconnected');
        this.listeningState();
        // Its reads keep being retried while the buffer refuses them; stop() gives up on them.
        this.settling.add(stream);
        void stream.settled().then(() => this.settling.delete(stream));
      }
      resolveClosed();
    });
    if (this.paused) socket.pause();
    return connection;
  }
}
