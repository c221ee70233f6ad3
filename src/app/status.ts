import { availableActions } from '../health/admin.js';
import { batchView } from '../queries/reports.js';
import { bufferFileBytes } from '../buffer/disk-usage.js';
import { composeStatus } from '../health/compose-status.js';
import { HEALTH_THRESHOLDS } from '../health/derive.js';
import type { GatewayStatus } from '../health/server.js';
import { VERSION } from '../paths.js';
import type { AppApi, AppDeps, Gateway, LiveState } from './gateway.js';
import { tokensInClear } from './tokens-in-clear.js';
import type { HaStatus, Leadership } from '../ha/leadership.js';
import { unmovableInputs, unmovableWhy } from '../config/ha-schema.js';
import type { HaStatusView } from '../health/page-ha.js';
import type { Clock } from '../clock.js';
import type { GatewayConfig } from '../config/schema.js';
import type { BufferStore } from '../buffer/store.js';
import type { BufferQueries } from '../queries/queries.js';
import type { InputAdapter } from '../inputs/types.js';
import type { Intake } from '../intake/intake.js';
import type { BackPressure } from '../buffer/back-pressure.js';
import type { Retention } from '../buffer/retention.js';
import type { DiskGuard } from '../buffer/disk-guard.js';
import type { Deliverer } from '../delivery/deliverer.js';
import type { StatusEventFeed } from '../delivery/status-events.js';
import type { AdminActions } from '../health/admin.js';
import type { ListenerTls } from '../listener/listener-tls.js';
import type { ProductCheckPart } from './product-check-part.js';

/**
 * What the status is gathered from: each part's snapshot and nothing else of it. Optional parts
 * are undefined exactly when the configuration leaves them out, as in the gateway's record.
 */
export interface StatusParts {
  readonly now: Clock;
  readonly startedAt: Date;
  readonly live: Readonly<LiveState>;
  readonly config: Pick<GatewayConfig, 'buffer' | 'delivery' | 'http' | 'inputs'>;
  readonly deps: Pick<AppDeps, 'adminToken' | 'readToken'>;
  readonly serverTokens: Gateway['serverTokens'];
  readonly store: Pick<BufferStore, 'containers'>;
  readonly queries: Pick<BufferQueries, 'reports'>;
  readonly inputs: { readonly adapters: readonly Pick<InputAdapter, 'id' | 'status'>[] };
  readonly intake: Pick<Intake, 'countersFor' | 'lastCommitError'>;
  readonly backPressure: Pick<BackPressure, 'snapshot'>;
  readonly retention: Pick<Retention, 'lastRun'>;
  readonly diskGuard: Pick<DiskGuard, 'snapshot'>;
  readonly deliverer: Pick<Deliverer, 'snapshot'>;
  readonly api: Pick<AppApi, 'tokenInfo'>;
  readonly statusEvents: { readonly feed: Pick<StatusEventFeed, 'snapshot'> } | undefined;
  readonly productCheck: Pick<ProductCheckPart, 'snapshot'>;
  readonly adminActions: AdminActions;
  readonly listenerTls: Pick<ListenerTls, 'status'> | undefined;
  readonly ha: { readonly leadership: Pick<Leadership, 'snapshot'> } | undefined;
}

/**
 * The parts' snapshots at this instant, composed into the status by {@link composeStatus}.
 * @throws when the buffer is not open (before the start, after the stop).
 */
export function gatherStatus(g: StatusParts): GatewayStatus {
  const s = g.store;
  const reports = g.queries.reports;
  const nowMs = g.now();
  const { live, config } = g;
  const { current } = live;
  const listenerTls = g.listenerTls?.status(nowMs);
  const status = composeStatus({
    nowMs,
    phase: live.phase,
    version: VERSION,
    site: current.config.site,
    startedAtMs: g.startedAt.getTime(),
    config: {
      file: current.file,
      loadedAt: live.configLoadedAt.toISOString(),
      lastReload: live.lastReload,
      lastReloadError: live.lastReloadError,
    },
    inputs: g.inputs.adapters.map((i) => {
      const name = current.config.inputs.find((c) => c.id === i.id)?.name;
      return { ...i.status(), ...(name ? { name } : {}), counters: g.intake.countersFor(i.id) };
    }),
    buffer: {
      path: config.buffer.path,
      totals: reports.totals(),
      scans: reports.scanCounts(),
      pruned: reports.pruned(),
      oldestUndeliveredCreatedAt: reports.oldestUndeliveredCreatedAt(),
      lastUploadAt: reports.lastUploadAt(),
      fileBytes: bufferFileBytes(config.buffer.path),
      commitError: g.intake.lastCommitError,
      quota: g.backPressure.snapshot(),
      lastPrune: g.retention.lastRun,
      disk: g.diskGuard.snapshot(),
      batches: reports.recentBatches(20).map(batchView),
      problems: reports.recentProblems(20),
    },
    recent: reports.recentActivity(nowMs - HEALTH_THRESHOLDS.windowMs),
    containersIncomplete: s.containers
      .endedSince('incomplete', new Date(nowMs - HEALTH_THRESHOLDS.windowMs).toISOString(), 20)
      .filter((c) => c.by === undefined),
    stuckBatches: reports.stuckBatches(nowMs - HEALTH_THRESHOLDS.stuckBatchMs),
    batchesPastGrace: {
      graceMs: config.delivery.notFoundGraceMs,
      batches: reports.batchesPastGrace(nowMs - config.delivery.notFoundGraceMs),
    },
    delivery: {
      mode: config.delivery.mode,
      snapshot: g.deliverer.snapshot(),
      token: g.api.tokenInfo?.(),
    },
    statusEvents: g.statusEvents?.feed.snapshot(),
    products: g.productCheck.snapshot(),
    sessions: live.mapper.openContainers(nowMs),
    admin: {
      enabled: g.serverTokens.admin.configured(),
      actions: availableActions({ token: g.serverTokens.admin, actions: g.adminActions }),
    },
    listener: { ...(listenerTls ? { tls: listenerTls } : {}), tokensInClear: tokensInClear(g) },
  });
  return g.ha ? { ...status, ha: haStatus(g, g.ha.leadership.snapshot()) } : status;
}

/**
 * The facts a probe must show at once, as text: the phase, each input's state, a failed commit,
 * and the election's role, leader and epoch. In-memory reads only (no SQL, no file): the probes
 * read it on every request and gather the status anew when it changed (health/probe-snapshot.ts).
 */
export function probeChangeKey(g: Pick<StatusParts, 'live' | 'inputs' | 'intake' | 'ha'>): string {
  const election = g.ha?.leadership.snapshot();
  return [
    g.live.phase,
    g.inputs.adapters.map((i) => `${i.id}=${i.status().state}`).join(','),
    g.intake.lastCommitError ? 'commit-failed' : 'commits',
    election ? `${election.role}:${election.leader ?? ''}:${election.epoch ?? ''}` : '',
  ].join('|');
}

/** The `ha` field of the status (docs/high-availability.md, "What is shown"). */
function haStatus(g: Pick<StatusParts, 'queries' | 'live'>, election: HaStatus): HaStatusView {
  return {
    ...election,
    possibleDuplicates: g.queries.reports.haPossibleDuplicates(20),
    unmovableInputs: unmovableInputs(g.live.current.config.inputs).map((i) => ({
      id: i.id,
      why: unmovableWhy(i),
    })),
  };
}
