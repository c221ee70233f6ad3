import { Counter, Gauge, type Registry } from 'prom-client';
import type { StatusSnapshot } from './metrics-buffer.js';
import type { HaStatusView } from './page-ha.js';

/**
 * The metrics of high availability (src/health/metrics.ts), from the `ha` part of the status
 * snapshot: leadership, epoch, takeovers, etcd and the lease, possible duplicates.
 */

/** Registers the metrics of high availability in `r`, in the order the text shows them. */
export function registerHaMetrics(r: Registry, snap: StatusSnapshot): void {
  // High availability (`ha`): labelled by node and leader key (one key per pair), so a gateway
  // without `ha` has no samples of them and an alert over a pair groups by key.
  const haSample = (value: (ha: HaStatusView) => number | undefined) => {
    const ha = snap()?.ha as HaStatusView | undefined;
    const v = ha ? value(ha) : undefined;
    return ha && v !== undefined
      ? { labels: { node: ha.nodeId, key: ha.key }, value: v }
      : undefined;
  };
  const haGauge = (name: string, help: string, value: (ha: HaStatusView) => number | undefined) =>
    new Gauge({
      name,
      help,
      labelNames: ['node', 'key'],
      registers: [r],
      collect() {
        this.reset();
        const sample = haSample(value);
        if (sample) this.set(sample.labels, sample.value);
      },
    });
  haGauge(
    'scan_gateway_ha_leader',
    'High availability: 1 while this node leads (takes reads), 0 as standby or fenced.',
    (ha) => (ha.role === 'leader' ? 1 : 0),
  );
  haGauge(
    'scan_gateway_ha_epoch',
    'High availability: the leader epoch (etcd revision of the leader key) this node leads under, or last saw.',
    (ha) => ha.epoch,
  );
  // Counts exposed as Prometheus counters, so increase() and rate() read them as counts.
  const haCounter = (name: string, help: string, value: (ha: HaStatusView) => number) =>
    new Counter({
      name,
      help,
      labelNames: ['node', 'key'],
      registers: [r],
      collect() {
        this.reset();
        const sample = haSample(value);
        if (sample) this.inc(sample.labels, sample.value);
      },
    });
  haCounter(
    'scan_gateway_ha_takeovers_total',
    'High availability: takeovers by this node since it started.',
    (ha) => ha.takeovers,
  );
  haGauge(
    'scan_gateway_ha_last_takeover_seconds',
    "High availability: how long this node's last takeover took, from the lease lapse seen to its inputs started, in seconds.",
    (ha) => (ha.lastTakeover ? ha.lastTakeover.tookMs / 1000 : undefined),
  );
  haGauge(
    'scan_gateway_ha_etcd_reachable',
    'High availability: 1 when the last request to etcd was answered.',
    (ha) => (ha.etcd.reachable ? 1 : 0),
  );
  haGauge(
    'scan_gateway_ha_lease_renewal_age_seconds',
    'High availability: age of the last successful lease renewal (leader) or look at the leader key (standby), in seconds.',
    (ha) =>
      ha.lease.lastRenewalAgeMs === undefined ? undefined : ha.lease.lastRenewalAgeMs / 1000,
  );
  haCounter(
    'scan_gateway_ha_possible_duplicates_total',
    'High availability: reads stored as possible duplicates, sent again by the broker after a takeover (lifetime, kept in the buffer).',
    (ha) => ha.possibleDuplicates.reads,
  );
}
