import type { FastifyInstance } from 'fastify';
import type { ListenerTls } from '../listener/listener-tls.js';
import { routeTable, type RouteEntry } from '../listener/route-guard.js';
import type { Component } from './parts.js';
import { listening, splitListen } from './part-helpers.js';

/**
 * The local HTTP server (src/listener, src/health): built and listening at start, the last part.
 * With `http.tls` its files are read first (a bad pair stops the start), and watched once it listens.
 */
export class HttpPart implements Component {
  readonly name = 'http';
  private server: FastifyInstance | undefined;
  private address: string | undefined;

  /** `build` makes the server (src/app/http.ts); it is called at start, once the inputs run. */
  constructor(
    private readonly listen: string,
    private readonly build: () => Promise<FastifyInstance>,
    private readonly tls?: ListenerTls,
  ) {}

  /** The address it listens on, once started. */
  get url(): string | undefined {
    return this.address;
  }

  /** The routes the server serves, with their guards, once started (src/listener/route-guard.ts). */
  get routes(): readonly RouteEntry[] {
    return this.server ? routeTable(this.server) : [];
  }

  async start(): Promise<void> {
    const { host, port } = splitListen(this.listen);
    this.tls?.load();
    const server = await this.build();
    this.address = await listening('http.listen', this.listen, () => server.listen({ host, port }));
    this.server = server;
    this.tls?.watch();
  }

  stop = async (): Promise<void> => {
    this.tls?.stop();
    await this.server?.close();
  };
}
