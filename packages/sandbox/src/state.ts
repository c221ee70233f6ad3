import { randomBytes } from 'node:crypto';
import { scanSchema, type ScanFailure, type ScanStatusWire } from '@scan-gateway/contract';
import type { SandboxClient } from './types.js';

/**
 * The sandbox's memory: products per client, batches and their processing, pre-signed addresses,
 * and the inspection logs. It lives in memory: a new sandbox starts empty, like a fresh test
 * environment; `RunningSandbox.restart()` keeps it, as a real service keeps its database.
 */

/**
 * Reasons a scan fails processing. The first two are the texts the contract reports as observed
 * (§2.8); the others are the sandbox's wording for rules the contract implies: a scan belongs to a
 * product of the customer (§1, §2.5 `productModelKey`), and its kind follows from which one of the
 * optional keys it carries, Goods In `supplierKey` or Goods Out `clientKey` (§1, §2.5), so not both.
 */
export const FAILURE_REASONS = {
  invalidDcp: 'Invalid DCP',
  attributes: 'Attributes could not be read',
  unreadable: 'Scan could not be read',
  unknownProduct: 'Unknown product model',
  bothKeys: 'A scan cannot carry both supplierKey and clientKey',
} as const;

/** An accepted scan as `GET /_sandbox/scans` lists it. */
export interface LoggedScan {
  requestId: string;
  via: 'direct' | 'presigned' | 'sftp';
  receivedAt: string;
  scan: unknown;
}

/** One line of `GET /_sandbox/requests`. Never holds a header value. */
export interface LoggedRequest {
  method: string;
  path: string;
  status: number;
  time: string;
  ms: number;
}

interface Batch {
  requestId: string;
  clientId: string;
  receivedAtMs: number;
  delayMs: number;
  count: number;
  failures: ScanFailure[];
  /** Set when the content itself could not be read (pre-signed uploads and file transfers). */
  unreadable?: string;
  /**
   * The name of the transferred file (SFTP only), which every status of the batch names first in
   * its `description` ("<file name>: …"): the sandbox's side of the convention in docs/delivery.md
   * "SFTP" (contract §4.7 shows no SFTP details; an assumption to confirm with the service operator).
   */
  fileName?: string;
  /** The state last announced to the status listeners. */
  announced?: ScanStatusWire['state'];
}

/**
 * Told of every state change of every batch, once per change, with the status object exactly
 * as `GET …/status` answers it at that moment (§2.8). The sandbox's Kafka endpoint publishes it.
 */
export type StatusListener = (clientId: string, status: ScanStatusWire) => void;

interface PresignedAddress {
  requestId: string;
  clientId: string;
  expiresAtMs: number;
  used: boolean;
}

/** Default of the most scans kept for inspection; older ones are dropped (counted in `dropped`). */
export const MAX_LOGGED_SCANS = 100_000;
/** Most requests kept in the request log. */
export const MAX_LOGGED_REQUESTS = 10_000;

export class SandboxState {
  readonly clients = new Map<string, SandboxClient>();
  private readonly products = new Map<string, Map<string, { key: string; name: string }>>();
  private readonly batches = new Map<string, Batch>();
  private readonly presigned = new Map<string, PresignedAddress>();
  private scans: LoggedScan[] = [];
  private scanCount = 0;
  private requests: LoggedRequest[] = [];
  private lastId = 0;
  private readonly maxLoggedScans: number;
  private readonly listeners = new Set<StatusListener>();
  /** Batches not yet in a terminal state: the ones {@link moveBatches} looks at. */
  private readonly moving = new Set<Batch>();
  private moveTimer: NodeJS.Timeout | undefined;

  constructor(clients: SandboxClient[], options: { maxLoggedScans?: number } = {}) {
    this.maxLoggedScans = options.maxLoggedScans ?? MAX_LOGGED_SCANS;
    for (const client of clients) {
      this.clients.set(client.clientId, client);
      this.products.set(
        client.clientId,
        new Map((client.products ?? []).map((p) => [p.key, { key: p.key, name: p.name }])),
      );
    }
  }

  /**
   * A new numeric batch id. Ids follow the clock (ms) so that a restarted sandbox does not hand
   * out an id a gateway still tracks from the previous run.
   */
  nextRequestId(): string {
    this.lastId = Math.max(this.lastId + 1, Date.now());
    return String(this.lastId);
  }

  listProducts(clientId: string): Array<{ key: string; name: string }> {
    return [...(this.products.get(clientId)?.values() ?? [])];
  }

  /** Adds a product; false when the client has one with that key already. */
  addProduct(clientId: string, key: string, name: string): boolean {
    let own = this.products.get(clientId);
    if (!own) this.products.set(clientId, (own = new Map()));
    if (own.has(key)) return false;
    own.set(key, { key, name });
    return true;
  }

  /**
   * Records an accepted batch and decides each scan's outcome now (the outcome shows once the
   * processing delay passed). `items` are the array elements as received; `fileName` names a
   * transferred file (SFTP), put first in every status's `description` (see {@link Batch}).
   */
  acceptBatch(
    requestId: string,
    clientId: string,
    via: LoggedScan['via'],
    items: unknown[],
    delayMs: number,
    nowMs: number,
    fileName?: string,
  ): void {
    const dcps = new Set(this.clients.get(clientId)?.dcps ?? []);
    // The client's products when the batch is processed (decided here, shown after the delay).
    const products = this.products.get(clientId) ?? new Map<string, unknown>();
    const failures: ScanFailure[] = [];
    const receivedAt = new Date(nowMs).toISOString();
    for (const item of items) {
      const reason = failureOf(item, dcps, products);
      if (reason !== undefined) failures.push({ reference: referenceOf(item), reason });
      this.logScan({ requestId, via, receivedAt, scan: item });
    }
    this.track({
      requestId,
      clientId,
      receivedAtMs: nowMs,
      delayMs,
      count: items.length,
      failures,
      ...(fileName !== undefined ? { fileName } : {}),
    });
  }

  /** A pre-signed upload or transferred file (`fileName`) whose content is not a JSON array of scans: it fails as a whole. */
  acceptUnreadable(
    requestId: string,
    clientId: string,
    reason: string,
    delayMs: number,
    nowMs: number,
    fileName?: string,
  ): void {
    this.track({
      requestId,
      clientId,
      receivedAtMs: nowMs,
      delayMs,
      count: 0,
      failures: [],
      unreadable: reason,
      ...(fileName !== undefined ? { fileName } : {}),
    });
  }

  /**
   * Calls `listener` on every state change of every batch from now on (see {@link StatusListener});
   * the returned function removes it. A listener that throws does not stop the others.
   */
  onStatusChange(listener: StatusListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Every batch enters here, whatever the route (direct, pre-signed, a later file transfer). */
  private track(batch: Batch): void {
    this.batches.set(batch.requestId, batch);
    this.moving.add(batch);
    this.moveBatches(batch.receivedAtMs);
  }

  /**
   * The one place a batch's state moves (the state itself follows from the clock, see
   * {@link status}): announces each batch whose state differs from the one last announced, and
   * sets one timer for the next change due. Batches in a terminal state leave the moving set.
   */
  private moveBatches(nowMs: number = Date.now()): void {
    clearTimeout(this.moveTimer);
    this.moveTimer = undefined;
    let next = Infinity;
    for (const batch of this.moving) {
      const status = this.status(batch.requestId, batch.clientId, nowMs);
      if (status.state !== batch.announced) {
        // A timer that fired late (a busy process) can find the batch past InProgress: that
        // state is still announced, as it was at the middle of the delay, so a listener sees
        // every state a batch passes, in order, however late the timer.
        const passed =
          batch.announced === 'Received' && status.state !== 'InProgress'
            ? [this.status(batch.requestId, batch.clientId, batch.receivedAtMs + batch.delayMs / 2)]
            : [];
        batch.announced = status.state;
        for (const announced of [...passed, status]) this.announce(batch.clientId, announced);
      }
      if (status.state !== 'Received' && status.state !== 'InProgress') {
        this.moving.delete(batch);
        continue;
      }
      const half = batch.receivedAtMs + batch.delayMs / 2;
      next = Math.min(
        next,
        status.state === 'Received' ? half : batch.receivedAtMs + batch.delayMs,
      );
    }
    if (next !== Infinity) {
      this.moveTimer = setTimeout(() => this.moveBatches(), Math.max(0, next - Date.now()));
      // The sandbox's own servers keep the process alive; this timer alone does not.
      this.moveTimer.unref();
    }
  }

  private announce(clientId: string, status: ScanStatusWire): void {
    for (const listener of this.listeners) {
      try {
        listener(clientId, status);
      } catch {
        // A listener's failure is its own (the Kafka endpoint logs its own); the state moves on.
      }
    }
  }

  /**
   * Status of a batch as the client `clientId` sees it (§2.8, §3); another client's batch is
   * NotFound. A transferred file's batch names its file first in `description` ("<file name>: …").
   */
  status(requestId: string, clientId: string, nowMs: number): ScanStatusWire {
    const batch = this.batches.get(requestId);
    if (!batch || batch.clientId !== clientId) {
      return {
        state: 'NotFound',
        requestId: Number(requestId),
        description: `No batch with request id ${requestId}`,
        processed: 0,
      };
    }
    const status = this.statusOf(batch, nowMs);
    return batch.fileName === undefined
      ? status
      : { ...status, description: `${batch.fileName}: ${status.description}` };
  }

  private statusOf(batch: Batch, nowMs: number): ScanStatusWire {
    const id = Number(batch.requestId);
    const elapsed = nowMs - batch.receivedAtMs;
    const half = batch.delayMs / 2;
    if (elapsed < half) {
      return {
        state: 'Received',
        requestId: id,
        description: 'Upload received, waiting to be processed',
        processed: 0,
      };
    }
    if (elapsed < batch.delayMs) {
      const processed = Math.min(batch.count, Math.floor((batch.count * (elapsed - half)) / half));
      return {
        state: 'InProgress',
        requestId: id,
        description: 'Batch is being processed',
        processed,
      };
    }
    if (batch.unreadable !== undefined) {
      return {
        state: 'Failed',
        requestId: id,
        description: batch.unreadable,
        processed: 0,
        failed: 0,
        failures: [],
      };
    }
    const failed = batch.failures.length;
    if (failed === 0) {
      return {
        state: 'Success',
        requestId: id,
        description: `All ${batch.count} scans processed successfully`,
        processed: batch.count,
      };
    }
    const state = failed === batch.count ? 'Failed' : 'HasFailures';
    const description =
      state === 'Failed'
        ? 'All scans failed to process'
        : `${failed} of ${batch.count} scans failed to process`;
    return {
      state,
      requestId: id,
      description,
      processed: batch.count,
      failed,
      failures: batch.failures,
    };
  }

  /** A new single-use pre-signed address token for a batch id known from now on. */
  createPresigned(requestId: string, clientId: string, expiresAtMs: number): string {
    const token = randomBytes(24).toString('base64url');
    this.presigned.set(token, { requestId, clientId, expiresAtMs, used: false });
    return token;
  }

  /** Why a PUT to this pre-signed address would be refused now, without using it up; undefined when it would be taken. */
  presignedRefusal(token: string, nowMs: number): string | undefined {
    const address = this.presigned.get(token);
    if (!address) return 'Invalid pre-signed address';
    if (address.used) return 'Pre-signed address has been used already';
    if (nowMs >= address.expiresAtMs) return 'Request has expired';
    return undefined;
  }

  /**
   * Claims a pre-signed address for one PUT. Gives the reason for refusal (S3 answers 403 to all
   * of them), or the batch id and client on success. The address counts as used from here on.
   */
  claimPresigned(
    token: string,
    nowMs: number,
  ): { requestId: string; clientId: string } | { refused: string } {
    const refused = this.presignedRefusal(token, nowMs);
    const address = this.presigned.get(token);
    if (refused !== undefined || !address)
      return { refused: refused ?? 'Invalid pre-signed address' };
    address.used = true;
    return { requestId: address.requestId, clientId: address.clientId };
  }

  logScan(entry: LoggedScan): void {
    this.scanCount += 1;
    this.scans.push(entry);
    // Trimmed in steps (at twice the bound) so a push stays cheap; scanLog() shows the newest maxLoggedScans.
    if (this.scans.length >= 2 * this.maxLoggedScans)
      this.scans = this.scans.slice(-this.maxLoggedScans);
  }

  scanLog(): { count: number; dropped: number; scans: LoggedScan[] } {
    const scans =
      this.scans.length > this.maxLoggedScans ? this.scans.slice(-this.maxLoggedScans) : this.scans;
    return { count: this.scanCount, dropped: this.scanCount - scans.length, scans };
  }

  clearScans(): void {
    this.scans = [];
    this.scanCount = 0;
  }

  logRequest(entry: LoggedRequest): void {
    this.requests.push(entry);
    if (this.requests.length > MAX_LOGGED_REQUESTS)
      this.requests = this.requests.slice(-MAX_LOGGED_REQUESTS / 2);
  }

  requestLog(): LoggedRequest[] {
    return this.requests;
  }

  clearRequests(): void {
    this.requests = [];
  }
}

/** Why one scan fails processing, checked in this order, or undefined when it is processed. */
function failureOf(
  item: unknown,
  dcps: Set<string>,
  products: ReadonlyMap<string, unknown>,
): string | undefined {
  const parsed = scanSchema.safeParse(item);
  if (!parsed.success) return FAILURE_REASONS.unreadable;
  if (!dcps.has(parsed.data.dcpKey)) return FAILURE_REASONS.invalidDcp;
  if (!products.has(parsed.data.productModelKey)) return FAILURE_REASONS.unknownProduct;
  if (parsed.data.supplierKey !== undefined && parsed.data.clientKey !== undefined)
    return FAILURE_REASONS.bothKeys;
  if (parsed.data.attributes.some((a) => a.key.trim() === '')) return FAILURE_REASONS.attributes;
  return undefined;
}

function referenceOf(item: unknown): string {
  const ref =
    typeof item === 'object' && item !== null
      ? (item as { reference?: unknown }).reference
      : undefined;
  return typeof ref === 'string' ? ref : '';
}
