import { BufferStore } from '../buffer/store.js';
import { ErrorCodes, GatewayError } from '../errors.js';
import type { LoadedConfig } from '../config/load.js';
import { Deliverer } from '../delivery/deliverer.js';
import type { Logger } from '../log.js';
import type { Clock } from '../clock.js';
import { UpstreamClient, clientOptionsFromConfig } from '../upstream/client.js';
import { DELIVERY_STOP_GRACE_MS, type AppApi } from './gateway.js';
import type { Component } from './parts.js';
import { bufferPart } from './buffer-parts.js';
import { deliveryPart, SftpRoute, upstreamPart } from './delivery-parts.js';

/** What is left in an adopted buffer: scans not yet in a batch, and batches not yet at their end. */
export interface AdoptionLeft {
  /** Scans waiting for a batch (`pending`). */
  pendingScans: number;
  /** Batches `ready`, `uploading` or `presigned` (to be sent) and `uploaded` (their status followed). */
  openBatches: number;
  /** Of {@link openBatches}, those `uploaded`: the service has them under their requestId. */
  followedBatches: number;
}

/** The outcome of an adoption, in scans (counts of the buffer's states before and after). */
export interface AdoptionSummary {
  /** Scans the service reported processed during the adoption. */
  delivered: number;
  /** Scans the service refused during the adoption (dead letters: `failures`, `replay`). */
  failed: number;
  /** Scans held in the buffer at the end (a batch the service refused for good; `failures`, `replay`). */
  held: number;
  /** What is still to deliver or follow (all zero when the adoption finished). */
  left: AdoptionLeft;
  /** Nothing is left to deliver or follow. */
  finished: boolean;
}

/** What {@link Adoption} takes besides the configuration: the process edge's pieces, and the seams tests use. */
export interface AdoptionDeps {
  logger: Logger;
  now?: Clock;
  /** The upstream API; the default is the undici client built from the configuration. */
  api?: AppApi;
  /** Environment for the SFTP login (`upstream.sftp`), read at start; from the process edge. */
  env?: Record<string, string | undefined>;
  /** Longest a stop waits for an upload in flight, in ms (default {@link DELIVERY_STOP_GRACE_MS}). */
  deliveryStopGraceMs?: number;
}

/** How often the adoption looks whether anything is left, in ms. */
const CHECK_EVERY_MS = 250;
/** How often progress is logged while it runs, in ms. */
const PROGRESS_EVERY_MS = 5_000;

/**
 * Delivers the backlog of another node's buffer file (`scan-gateway adopt`, docs/high-availability.md,
 * "Adopt a dead node's disk"):
 * the gateway's own buffer, upstream and delivery parts (src/app/buffer-parts.ts, delivery-parts.ts) run against `file`, with
 * the configuration's upstream and delivery settings, and nothing else: no input, no intake, no HTTP
 * server, no status events (status is polled, contract §4.6). So a restarted gateway and an
 * adoption resume a buffer the same way (src/delivery/uploader.ts): pending scans are batched and
 * sent; a batch whose upload may have reached the service is followed, or asked about, under its
 * own requestId, never sent again under a new one; an `uploaded` batch is followed to its end. (A
 * direct POST in flight at the other node's death is sent again and counted as a possible
 * duplicate, as after any crash: docs/delivery.md, "Guarantees".)
 *
 * The file is opened exclusively (`OpenOptions.exclusive`): refused when a process has it open, and
 * no gateway can open it while the adoption runs. An older schema is migrated forward, as `run`
 * does; a newer one is refused.
 */
export class Adoption {
  private readonly store: BufferStore;
  private readonly parts: Component[];
  private readonly running: Component[] = [];
  private readonly logger: Logger;
  private before: Record<string, number> = {};
  private stopping: Promise<void> | undefined;
  private stopRequested = false;

  /**
   * Constructs the parts; no I/O.
   * @throws GatewayError `CONFIG` for an upstream address the client refuses, as `buildApp` does.
   */
  constructor(
    readonly file: string,
    loaded: LoadedConfig,
    deps: AdoptionDeps,
  ) {
    const { config } = loaded;
    this.logger = deps.logger.child({ component: 'adopt' });
    this.store = new BufferStore(file, { fileMustExist: true, exclusive: true });
    const api: AppApi =
      deps.api ?? new UpstreamClient(clientOptionsFromConfig(config.upstream, loaded, deps.logger));
    const sftp = config.upstream.sftp
      ? new SftpRoute(config, config.upstream.sftp, deps.env ?? {})
      : undefined;
    const deliverer = new Deliverer({
      store: this.store,
      api,
      config: config.delivery,
      logger: deps.logger.child({ component: 'delivery', adopted: file }),
      ...(deps.now ? { now: deps.now } : {}),
      ...(sftp ? { sftp: sftp.route() } : {}),
      // The file is open exclusively: no second connection could form batches beside this one.
      batchThread: false,
    });
    this.parts = [
      bufferPart(this.store),
      upstreamPart(api),
      deliveryPart(
        deliverer,
        sftp,
        deps.deliveryStopGraceMs ?? DELIVERY_STOP_GRACE_MS,
        deps.logger,
      ),
    ];
  }

  /**
   * Opens the file and starts delivery. Rejects with the first part's error; the caller then stops.
   * @throws GatewayError `SCANGW_E_BUFFER_UNOPENABLE` when another process has the file open, or its
   *   schema is newer than this gateway's (see `BufferStore.open` for the others).
   */
  async start(): Promise<void> {
    for (const part of this.parts) {
      this.running.push(part);
      await part.start();
      if (part.name === 'buffer') this.before = this.store.reports.scanCounts();
    }
    this.logger.info(
      { file: this.file, ...this.left(), scans: this.before },
      'adopting the buffer: delivering what it holds',
    );
  }

  /** What is still to deliver or follow. @throws GatewayError `SCANGW_E_NOT_RUNNING` before start. */
  left(): AdoptionLeft {
    const open = this.store.batches.batchesInState('ready', 'uploading', 'presigned', 'uploaded');
    return {
      pendingScans: this.store.reports.totals().pendingScans,
      openBatches: open.length,
      followedBatches: open.filter((b) => b.state === 'uploaded').length,
    };
  }

  /**
   * Resolves when nothing is left to deliver or follow, or after `timeoutMs` (0: no limit), logging
   * progress every 5 s. Answers whether it finished; false also once {@link stop} was called.
   */
  async untilDone(timeoutMs: number): Promise<boolean> {
    const started = performance.now();
    let lastProgress = started;
    for (;;) {
      if (this.stopRequested) return false;
      const left = this.left();
      if (left.pendingScans === 0 && left.openBatches === 0) return true;
      const now = performance.now();
      if (timeoutMs > 0 && now - started >= timeoutMs) return false;
      if (now - lastProgress >= PROGRESS_EVERY_MS) {
        lastProgress = now;
        this.logger.info(
          { file: this.file, ...left, ...this.delta() },
          'adopting: still delivering',
        );
      }
      await new Promise((resolve) => setTimeout(resolve, CHECK_EVERY_MS));
    }
  }

  /** The counts so far (see {@link AdoptionSummary}); read before {@link stop}. */
  summary(): AdoptionSummary {
    const left = this.left();
    return {
      ...this.delta(),
      held: this.store.reports.scanCounts().held ?? 0,
      left,
      finished: left.pendingScans === 0 && left.openBatches === 0,
    };
  }

  private delta(): { delivered: number; failed: number } {
    const after = this.store.reports.scanCounts();
    const grown = (state: string) => Math.max(0, (after[state] ?? 0) - (this.before[state] ?? 0));
    return { delivered: grown('delivered'), failed: grown('failed') };
  }

  /** Stops in reverse order, every part even when one fails; runs once. Rejects naming those that failed. */
  stop(): Promise<void> {
    this.stopRequested = true;
    return (this.stopping ??= this.stopAll());
  }

  private async stopAll(): Promise<void> {
    const failures: string[] = [];
    for (const part of this.running.reverse()) {
      try {
        await part.stop();
      } catch (err) {
        failures.push(part.name);
        this.logger.error({ err, part: part.name }, 'stopping a part failed');
      }
    }
    this.running.length = 0;
    if (failures.length > 0)
      throw new GatewayError(ErrorCodes.STOP, `stopping failed: ${failures.join(', ')}`);
  }
}
