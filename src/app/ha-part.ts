import type { EtcdClient } from '../ha/etcd-client.js';
import type { Leadership } from '../ha/leadership.js';
import { findInputKind } from '../inputs/registry.js';
import type { Gateway } from './gateway.js';
import type { Component } from './parts.js';

/** The high-availability parts of one gateway (`ha` configured): the etcd client and the election over it. */
export interface HaParts {
  etcd: EtcdClient;
  leadership: Leadership;
}

/**
 * High availability as a part of the app, started before the inputs' place in the start order:
 * the election runs from here, and the inputs run only while this node leads. Winning starts every
 * configured input (fresh adapters, as a reload does); losing the lease, or being fenced, stops
 * them. Delivery, the HTTP server, status events and retention run on both nodes, whatever the role:
 * each node delivers its own buffer. At stop a leader stops its inputs and revokes its lease, so
 * the other node takes over at once.
 */
export class HaPart implements Component {
  readonly name = 'ha';

  constructor(
    private readonly g: Gateway,
    private readonly ha: HaParts,
  ) {}

  async start(): Promise<void> {
    await this.ha.etcd.open();
    this.ha.leadership.start({ onLeader: () => this.lead(), onFollower: () => this.follow() });
  }

  async stop(): Promise<void> {
    await this.ha.leadership.stop();
    await this.ha.etcd.close();
  }

  private async lead(): Promise<void> {
    const { g } = this;
    const log = g.logger.child({ component: 'ha' });
    const inputs = g.live.current.config.inputs;
    // The message identities of this node's earlier leaderships are stale: the other node may have
    // acknowledged those packet ids since, and the broker hands them out again.
    for (const c of inputs)
      if (findInputKind(c.type)?.redelivers === true) g.intake.forgetMessages(c.id);
    for (const c of inputs) {
      try {
        await g.inputs.add(c);
      } catch (err) {
        log.error({ err, input: c.id }, 'input could not start on taking over; the others run');
      }
    }
  }

  private async follow(): Promise<void> {
    for (const { id, err } of await this.g.inputs.clear())
      this.g.logger.error(
        { component: 'ha', err, input: id },
        'stopping an input on leaving leadership failed',
      );
  }
}
