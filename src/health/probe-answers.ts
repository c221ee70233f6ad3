import type { HaStatusView } from './page-ha.js';
import type { ProbeAnswers } from './probe-snapshot.js';
import type { GatewayStatus } from './status.js';

/**
 * Whether the gateway can take reads now: every part started, not stopping, and the buffer
 * accepting commits. Upstream trouble does not make it unready: reads are still buffered.
 */
export function readiness(s: GatewayStatus): { ready: boolean; reason?: string } {
  if (s.phase === 'starting') return { ready: false, reason: 'starting' };
  if (s.phase === 'stopping') return { ready: false, reason: 'stopping' };
  if (s.state === 'down') return { ready: false, reason: s.reasons.join('; ') || 'down' };
  return { ready: true };
}

/**
 * The probes' answers from one status: `/healthz` (the state alone, or the summary with read
 * access; 503 when `down`), `/readyz` ({@link readiness}) and `/api/v1/ha/leader` (200 on the
 * leader, 503 otherwise or without `ha`; the role, the leader and the epoch, nothing more: it is
 * open to anyone who reaches the port).
 */
export function renderProbes(s: GatewayStatus): ProbeAnswers {
  const code = s.state === 'down' ? 503 : 200;
  const rejectedReads = s.inputs.reduce((a, i) => a + (i.counters?.rejections ?? 0), 0);
  const heldScans = s.buffer.heldScans ?? s.buffer.scans.held ?? 0;
  const detail = {
    status: s.state,
    reasons: s.reasons,
    problems: (s.healthProblems ?? []).map((p) => ({
      code: p.code,
      severity: p.severity,
      sentence: p.sentence,
    })),
    // `pendingScans` keeps its v1 meaning: waiting for delivery (not in a batch yet, or in one the service has not finished).
    pendingScans: s.buffer.undeliveredScans,
    waitingScans: s.buffer.undeliveredScans,
    heldScans,
    oldestPendingAgeMs: s.buffer.oldestPendingAgeMs,
    deliveredScans: s.buffer.scans.delivered ?? 0,
    failedScans: (s.buffer.scans.failed ?? 0) + heldScans,
    rejectedReads,
    rejectedReadsLastHour: s.recent?.rejections ?? 0,
    filesRefusedLastHour: s.recent?.filesRefused ?? 0,
    lastSuccessfulUploadAt: s.delivery.lastSuccessAt ?? null,
    inputs: s.inputs.map((i) => ({
      id: i.id,
      type: i.type,
      state: i.state,
      ...(i.lastError ? { lastError: i.lastError } : {}),
      ...(i.readers ? { readers: i.readers.count } : {}),
    })),
    ...(s.ha ? { ha: haSummary(s.ha as HaStatusView) } : {}),
  };
  const ready = readiness(s);
  const ha = s.ha as HaStatusView | undefined;
  const leads = ha?.role === 'leader';
  return {
    healthzState: { code, body: JSON.stringify({ status: s.state }) },
    healthzDetail: { code, body: JSON.stringify(detail) },
    readyz: { code: ready.ready ? 200 : 503, body: JSON.stringify(ready) },
    leader: {
      code: leads ? 200 : 503,
      body: JSON.stringify(
        ha
          ? { leader: leads, role: ha.role, leaderNode: ha.leader ?? null, epoch: ha.epoch ?? null }
          : { leader: false, ha: false },
      ),
    },
  };
}

/** The election in a few fields (healthz with read access). */
function haSummary(ha: HaStatusView): Record<string, unknown> {
  return {
    nodeId: ha.nodeId,
    role: ha.role,
    leaderNode: ha.leader ?? null,
    epoch: ha.epoch ?? null,
    etcdReachable: ha.etcd.reachable,
    lastTakeover: ha.lastTakeover ?? null,
    possibleDuplicates: ha.possibleDuplicates.reads,
  };
}
