import { fillWords } from '../mapping/container-sessions.js';
import type { BackPressureStatus } from '../buffer/back-pressure.js';
import type { DiskGuardStatus } from '../buffer/disk-guard.js';
import type { BufferTotals } from '../buffer/store.js';
import type { DeliveryStatus } from '../delivery/deliverer.js';
import type { StatusEventsStatus } from '../delivery/status-events.js';
import { printableRaw } from '../format/printable.js';
import type { PrunedWords } from '../format/scan-counts.js';
import type { ProductCheckSnapshot } from '../mapping/product-check.js';
import { deriveHealth, HEALTH_THRESHOLDS, type HealthFacts } from './derive.js';
import type {
  AdminActionName,
  BatchView,
  GatewayStatus,
  InputStatusView,
  ListenerStatusView,
} from './status.js';

/**
 * What the parts told at one instant, for {@link composeStatus}: snapshots only, gathered by the
 * app (src/app.ts `gatherStatus`). Instants in ms since the epoch unless the name says ISO.
 */
export interface StatusParts {
  /** The instant of the snapshot, ms. */
  nowMs: number;
  phase: 'starting' | 'running' | 'stopping';
  version: string;
  site: { id: string; timezone: string };
  startedAtMs: number;
  config: {
    file: string;
    /** ISO instant the running configuration was loaded. */
    loadedAt: string;
    lastReload?:
      | {
          at: string;
          needsRestart: string[];
          inputErrors: ReadonlyArray<{ id: string; message: string }>;
        }
      | undefined;
    lastReloadError?: { message: string; at: string } | undefined;
  };
  /** Every input's status, with its intake counters. */
  inputs: InputStatusView[];
  buffer: {
    path: string;
    totals: BufferTotals;
    /** Scans in the buffer by state (`OutboxCounts.scanCounts`). */
    scans: Record<string, number>;
    /** What pruning removed, lifetime (`OutboxCounts.pruned`). */
    pruned?: PrunedWords | undefined;
    /** Commit time of the oldest scan not yet delivered, ms; null when none. */
    oldestUndeliveredCreatedAt: number | null;
    /** ISO instant of the last successful upload, or null. */
    lastUploadAt: string | null;
    fileBytes: number;
    commitError?: { message: string; at: string } | undefined;
    quota?: BackPressureStatus | undefined;
    lastPrune?: { at: string; result: unknown } | undefined;
    /** Free space, the reserve and early pruning (src/buffer/disk-guard.ts). */
    disk?: DiskGuardStatus | undefined;
    /** The latest batches as the status shows them, newest first. */
    batches: BatchView[];
    /** The latest rejections and failed scans, newest first; `raw` as stored. */
    problems: ReadonlyArray<{
      kind: string;
      inputId: string;
      reference?: string | null;
      reason: string;
      raw: Buffer | Uint8Array | string;
      at: string;
      origin?: string | null;
    }>;
  };
  /** The last {@link HEALTH_THRESHOLDS.windowMs} of activity, and the batches stuck at `nowMs`. */
  recent: HealthFacts['recent'];
  stuckBatches: HealthFacts['stuckBatches'];
  batchesPastGrace?: HealthFacts['batchesPastGrace'];
  delivery: {
    mode: string;
    snapshot?: DeliveryStatus | undefined;
    token?: { expiresAt?: Date; refreshes: number } | undefined;
  };
  products?: ProductCheckSnapshot | undefined;
  /** Status events; absent when `upstream.statusEvents.enabled` is false. */
  statusEvents?: StatusEventsStatus | undefined;
  /** Open container sessions (src/mapping/mapper.ts `openContainers`). */
  sessions: ReadonlyArray<{ reads: number; expected?: number | undefined }>;
  /** Containers closed short in the health window, newest first (src/buffer/containers.ts). */
  containersIncomplete?: HealthFacts['containersIncomplete'];
  admin: { enabled: boolean; actions: AdminActionName[] };
  /** The local server's certificate and the tokens it would expose (src/listener/listener-tls.ts, src/app/http.ts). */
  listener?: ListenerStatusView | undefined;
}

/**
 * The status (`GET /api/v1/status`, the page, the metrics, `systemctl status`) from the parts'
 * snapshots: the health by {@link deriveHealth}, the rest as the parts told it. Pure: no clock, no
 * I/O; the same parts give the same status.
 */
export function composeStatus(p: StatusParts): GatewayStatus {
  const { buffer, delivery, nowMs } = p;
  const oldestPendingAgeMs =
    buffer.oldestUndeliveredCreatedAt === null
      ? null
      : Math.max(0, nowMs - buffer.oldestUndeliveredCreatedAt);
  const quota = buffer.quota;
  const health = deriveHealth({
    inputs: p.inputs,
    ...(delivery.snapshot ? { delivery: delivery.snapshot } : {}),
    buffer: {
      waitingScans: buffer.totals.undeliveredScans,
      oldestWaitingAgeMs: oldestPendingAgeMs,
      heldScans: buffer.scans.held ?? 0,
      failedScans: buffer.scans.failed ?? 0,
      commitError: buffer.commitError,
      quota,
      disk: buffer.disk,
    },
    recent: p.recent,
    ...(p.containersIncomplete ? { containersIncomplete: p.containersIncomplete } : {}),
    stuckBatches: p.stuckBatches,
    ...(p.batchesPastGrace ? { batchesPastGrace: p.batchesPastGrace } : {}),
    products: p.products,
    ...(p.statusEvents ? { statusEvents: p.statusEvents } : {}),
    config: {
      lastReloadError: p.config.lastReloadError,
      needsRestart: p.config.lastReload?.needsRestart,
    },
    ...(p.listener ? { listener: p.listener } : {}),
  });
  const { token } = delivery;
  return {
    state: health.state,
    reasons: health.problems.filter((x) => x.severity !== 'info').map((x) => x.sentence),
    healthProblems: health.problems,
    recent: {
      windowMs: HEALTH_THRESHOLDS.windowMs,
      reads: p.recent.reads,
      rejections: p.recent.rejections,
      filesRefused: p.recent.filesRefusedCount,
      failedScans: p.recent.failedScans,
    },
    phase: p.phase,
    generatedAt: new Date(nowMs).toISOString(),
    site: p.site,
    version: p.version,
    startedAt: new Date(p.startedAtMs).toISOString(),
    uptimeSec: Math.round((nowMs - p.startedAtMs) / 1000),
    config: {
      file: p.config.file,
      loadedAt: p.config.loadedAt,
      ...(p.config.lastReload ? { lastReload: p.config.lastReload } : {}),
      ...(p.config.lastReloadError ? { lastReloadError: p.config.lastReloadError } : {}),
    },
    // `fill` is what a person reads: "3 of 12" for a container with `members`.
    sessions: p.sessions.map((c) => ({ ...c, fill: fillWords(c.reads, c.expected) })),
    ...(p.products ? { products: p.products } : {}),
    ...(p.statusEvents ? { statusEvents: p.statusEvents } : {}),
    buffer: {
      path: buffer.path,
      pendingScans: buffer.totals.pendingScans,
      undeliveredScans: buffer.totals.undeliveredScans,
      heldScans: buffer.scans.held ?? 0,
      oldestPendingAgeMs,
      scans: buffer.scans,
      ...(buffer.pruned ? { pruned: buffer.pruned } : {}),
      fileBytes: buffer.fileBytes,
      ...(buffer.commitError ? { lastCommitError: buffer.commitError } : {}),
      ...(quota
        ? {
            quotaScans: quota.maxPendingScans,
            quotaBytes: quota.maxBytes,
            undeliveredBytes: quota.undeliveredBytes,
            intakePaused: quota.intakePaused,
            quota,
          }
        : {}),
      ...(buffer.lastPrune ? { lastPrune: buffer.lastPrune } : {}),
      ...(buffer.disk ? { disk: buffer.disk } : {}),
    },
    delivery: {
      mode: delivery.mode,
      ...delivery.snapshot,
      ...(buffer.lastUploadAt ? { lastSuccessAt: buffer.lastUploadAt } : {}),
      ...(token
        ? {
            token: {
              ...(token.expiresAt ? { expiresAt: new Date(token.expiresAt).toISOString() } : {}),
              refreshes: token.refreshes,
            },
          }
        : {}),
    },
    inputs: p.inputs,
    batches: buffer.batches,
    problems: buffer.problems.map((x) => ({ ...x, raw: printableRaw(x.raw) })),
    admin: p.admin,
    ...(p.listener ? { listener: p.listener } : {}),
  };
}
