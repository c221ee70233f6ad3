import { availableActions } from '../health/admin.js';
import { batchView } from '../buffer/reports.js';
import { bufferFileBytes } from '../buffer/disk-usage.js';
import { composeStatus } from '../health/compose-status.js';
import { HEALTH_THRESHOLDS } from '../health/derive.js';
import type { GatewayStatus } from '../health/server.js';
import { VERSION } from '../paths.js';
import type { Gateway } from './gateway.js';
import { tokensInClear } from './http.js';
import type { HaStatus } from '../ha/leadership.js';
import { unmovableWhy } from '../config/ha-schema.js';
import type { HaStatusView } from '../health/page-ha.js';

/**
 * The parts' snapshots at this instant, composed into the status by {@link composeStatus}.
 * @throws when the buffer is not open (before the start, after the stop).
 */
export function gatherStatus(g: Gateway): GatewayStatus {
  const s = g.store;
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
    inputs: g.inputs.adapters.map((i) => ({ ...i.status(), counters: g.intake.countersFor(i.id) })),
    buffer: {
      path: config.buffer.path,
      totals: s.reports.totals(),
      scans: s.reports.scanCounts(),
      oldestUndeliveredCreatedAt: s.reports.oldestUndeliveredCreatedAt(),
      lastUploadAt: s.reports.lastUploadAt(),
      fileBytes: bufferFileBytes(config.buffer.path),
      commitError: g.intake.lastCommitError,
      quota: g.backPressure.snapshot(),
      lastPrune: g.retention.lastRun,
      disk: g.diskGuard.snapshot(),
      batches: s.reports.recentBatches(20).map(batchView),
      problems: s.reports.recentProblems(20),
    },
    recent: s.reports.recentActivity(nowMs - HEALTH_THRESHOLDS.windowMs),
    stuckBatches: s.reports.stuckBatches(nowMs - HEALTH_THRESHOLDS.stuckBatchMs),
    batchesPastGrace: {
      graceMs: config.delivery.notFoundGraceMs,
      batches: s.reports.batchesPastGrace(nowMs - config.delivery.notFoundGraceMs),
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
export function probeChangeKey(g: Gateway): string {
  const election = g.ha?.leadership.snapshot();
  return [
    g.live.phase,
    g.inputs.adapters.map((i) => `${i.id}=${i.status().state}`).join(','),
    g.intake.lastCommitError ? 'commit-failed' : 'commits',
    election ? `${election.role}:${election.leader ?? ''}:${election.epoch ?? ''}` : '',
  ].join('|');
}

/** The `ha` field of the status (docs/high-availability.md, "What is shown"). */
function haStatus(g: Gateway, election: HaStatus): HaStatusView {
  return {
    ...election,
    possibleDuplicates: g.store.reports.haPossibleDuplicates(20),
    unmovableInputs: g.live.current.config.inputs
      .filter((i) => i.type === 'serial')
      .map((i) => ({ id: i.id, why: unmovableWhy(i.id) })),
  };
}
