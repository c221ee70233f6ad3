import type { HaStatus } from '../ha/leadership.js';
import { cardHtml, esc, factsHtml, fmtCount, fmtDuration, pill, tableHtml } from './page-format.js';
import { statusClock } from './page-cards.js';
import type { GatewayStatus } from './status.js';

/**
 * The status's `ha` field (high availability, when `ha` is configured): the election's snapshot
 * (src/ha/leadership.ts), the reads stored as possible duplicates after a takeover, and the inputs
 * that cannot move to the other node.
 */
export type HaStatusView = HaStatus & {
  possibleDuplicates: {
    reads: number;
    recent: {
      reference: string | null;
      dcpKey: string | null;
      receivedAt: string;
      epoch: number | null;
    }[];
  };
  /** Inputs bound to this machine (a serial port): they do not fail over. */
  unmovableInputs: { id: string; why: string }[];
};

/** The high-availability card, first on the page when `ha` is configured: role, whose standby, epoch, lease, takeovers. */
export function haCard(s: GatewayStatus): string {
  const ha = s.ha as HaStatusView | undefined;
  if (!ha || typeof ha !== 'object') return '';
  const t = statusClock(s);
  const headline =
    ha.role === 'leader'
      ? `<p><strong>Leader</strong>: this node (${esc(ha.nodeId)}) takes reads, epoch ${esc(ha.epoch)}.</p>`
      : `<p><strong>Standby for ${esc(ha.leader ?? 'nobody (no leader seen)')}</strong>: this node (${esc(ha.nodeId)}) takes no reads; it takes over when the leader's lease lapses. It delivers its own buffer.</p>`;
  const lease =
    ha.lease.lastRenewalAgeMs === undefined
      ? '—'
      : `${fmtDuration(ha.lease.lastRenewalAgeMs)} ago (TTL ${fmtDuration(ha.lease.ttlMs)})`;
  const facts: [string, string][] = [
    [
      'Role',
      pill(ha.role === 'leader' ? 'ok' : ha.role === 'fenced' ? 'degraded' : 'standby') +
        ` ${esc(ha.role)}`,
    ],
    ['Leader', esc(ha.leader ?? '—')],
    ['Epoch', esc(ha.epoch ?? '—')],
    ['Last contact with etcd', lease],
    [
      'etcd',
      ha.etcd.reachable
        ? `reachable (${esc(ha.etcd.endpoint ?? '')})`
        : `<strong>not reachable</strong>${ha.etcd.lastError ? ` <span class="muted">${esc(ha.etcd.lastError)}</span>` : ''}`,
    ],
    ['Takeovers by this node', fmtCount(ha.takeovers)],
    [
      'Last takeover',
      ha.lastTakeover
        ? `${t(ha.lastTakeover.at)}, took ${fmtDuration(ha.lastTakeover.tookMs)} (epoch ${esc(ha.lastTakeover.epoch)})`
        : '—',
    ],
    [
      'Last stop as leader',
      ha.lastFenced ? `${t(ha.lastFenced.at)}: ${esc(ha.lastFenced.reason)}` : '—',
    ],
    [
      'Possible duplicates',
      `${fmtCount(ha.possibleDuplicates.reads)} reads sent again by the broker after a takeover`,
    ],
  ];
  const unmovable = ha.unmovableInputs.length
    ? `<p class="warn">${ha.unmovableInputs.map((i) => `Input <strong>${esc(i.id)}</strong>: ${esc(i.why)}`).join('<br>')}</p>`
    : '';
  const dups = ha.possibleDuplicates.recent.length
    ? tableHtml(
        ['Reference', 'DCP', 'Received', 'Epoch'],
        ha.possibleDuplicates.recent.map((d) => [
          `<code>${esc(d.reference ?? '')}</code>`,
          esc(d.dcpKey ?? ''),
          t(d.receivedAt),
          esc(d.epoch ?? ''),
        ]),
        '',
      )
    : '';
  return cardHtml('High availability', headline + factsHtml(facts) + unmovable + dups, 'wide');
}
