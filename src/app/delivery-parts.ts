import { ErrorCodes, GatewayError } from '../errors.js';
import type { LoadedConfig } from '../config/load.js';
import type { Deliverer } from '../delivery/deliverer.js';
import type { Logger } from '../log.js';
import type { SftpConnector, SftpSession } from '../upstream/sftp-client.js';
import { readSftpCredentials } from '../config/secrets.js';
import type { Component } from './parts.js';
import { within } from './part-helpers.js';

/** Longest a stop waits for the upstream connections to close, in ms. */
const UPSTREAM_CLOSE_GRACE_MS = 2_000;

/** The upstream client: nothing to start; its connections are closed at stop, bounded. */
export function upstreamPart(api: { close?: () => Promise<void> }): Component {
  return {
    name: 'upstream',
    start: async () => undefined,
    // Bounded: undici's close waits for requests in flight, and an abandoned upload may still hang.
    stop: async () => void (await within(UPSTREAM_CLOSE_GRACE_MS, api.close?.())),
  };
}

/**
 * The SFTP route of delivery when `upstream.sftp` is configured. The login is read at
 * {@link SftpRoute.open} (config/secrets.ts), so a missing key or password stops the start with
 * `SCANGW_E_SECRET`; the SFTP client's module is loaded then too.
 */
export class SftpRoute implements SftpConnector {
  readonly remoteDir: string;
  readonly siteId: string;
  readonly fileNameTemplate: string;
  private connector: SftpConnector | undefined;

  constructor(
    private readonly config: LoadedConfig['config'],
    private readonly sftp: NonNullable<LoadedConfig['config']['upstream']['sftp']>,
    private readonly env: Record<string, string | undefined>,
  ) {
    this.remoteDir = sftp.remoteDir;
    this.siteId = config.site.id;
    this.fileNameTemplate = sftp.fileName;
  }

  /** @throws GatewayError `SCANGW_E_SECRET` when the key or password cannot be read. */
  async open(): Promise<void> {
    const login = readSftpCredentials(this.config, this.env);
    const { sftpConnector } = await import('../upstream/sftp-client.js');
    const { upstream } = this.config;
    this.connector = sftpConnector({
      sftp: this.sftp,
      clientId: upstream.clientId,
      privateKey: login.privateKey,
      password: login.password,
      minBytesPerSec: upstream.minUploadBytesPerSec,
    });
  }

  connect(): Promise<SftpSession> {
    if (!this.connector)
      throw new GatewayError(ErrorCodes.NOT_RUNNING, 'the SFTP route is not open yet');
    return this.connector.connect();
  }

  deadlineMs(bytes: number): number {
    if (!this.connector)
      throw new GatewayError(ErrorCodes.NOT_RUNNING, 'the SFTP route is not open yet');
    return this.connector.deadlineMs(bytes);
  }

  /** What delivery's `sftp` option takes (src/delivery/uploader.ts). */
  route(): { connector: SftpConnector; siteId: string; fileNameTemplate: string } {
    return { connector: this, siteId: this.siteId, fileNameTemplate: this.fileNameTemplate };
  }
}

/** Delivery: the SFTP login read first (when configured), then uploads and status polls. */
export function deliveryPart(
  deliverer: Deliverer,
  sftp: SftpRoute | undefined,
  graceMs: number,
  logger: Logger,
): Component {
  return {
    name: 'delivery',
    async start() {
      await sftp?.open();
      deliverer.start();
    },
    async stop() {
      if (await within(graceMs, deliverer.stop())) return;
      // The batch stays `uploading`/`presigned` in the buffer: the next start sends it again as a
      // possible duplicate (direct) or asks the service about its requestId first (pre-signed).
      logger.warn(
        { component: 'delivery', graceMs },
        'an upload was still in flight at the stop; abandoned, recovered at the next start',
      );
    },
  };
}
