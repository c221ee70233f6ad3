import type { Clock } from '../clock.js';
import { ErrorCodes, GatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import { LoopSleep } from '../loop.js';
import type { EtcdClient } from './etcd-client.js';

/** A node's part in the pair: `leader` takes reads, `follower` waits for the lease to lapse, `fenced` just stopped leading. */
export type HaRole = 'leader' | 'follower' | 'fenced';

/** What the status, the page and the metrics show of the election (docs/high-availability.md, "What is shown"). */
export interface HaStatus {
  nodeId: string;
  /** The etcd key the pair elects its leader by (one per line). */
  key: string;
  role: HaRole;
  /** Node id holding the leader key, as last seen (this node's own when it leads). */
  leader: string | undefined;
  /** Epoch of that leadership: the etcd revision at which its key was created. */
  epoch: number | undefined;
  takeovers: number;
  /** This node's last takeover: when its inputs started, and how long from the lease lapse seen to then, ms. */
  lastTakeover: { at: string; tookMs: number; epoch: number } | undefined;
  /** The last time this node stopped leading, and why. */
  lastFenced: { at: string; reason: string } | undefined;
  lease: {
    ttlMs: number;
    /** Age of the last successful renewal (leader) or look at the key (follower), ms; undefined before the first. */
    lastRenewalAgeMs: number | undefined;
  };
  etcd: { reachable: boolean; endpoint: string | undefined; lastError: string | undefined };
}

export interface LeadershipOptions {
  etcd: EtcdClient;
  nodeId: string;
  key: string;
  leaseTtlMs: number;
  logger: Logger;
  /** Wall clock, for the times shown. */
  now: Clock;
  /** Monotonic clock, ms (default `performance.now`): every deadline is on it, so a stopped process or a changed wall clock moves none. */
  monotonic?: () => number;
}

/** What a role change does to the node: start or stop taking reads (the app's inputs). */
export interface RoleHandlers {
  /** Starts taking reads (the inputs). Called once per leadership, after the key is won. */
  onLeader: (epoch: number) => Promise<void>;
  /** Stops taking reads. Called once per leadership that ends. */
  onFollower: (reason: string) => Promise<void>;
}

/** Share of the TTL after the send of the last successful renewal at which the leader stops taking reads (etcd counts the TTL from its receipt, later). */
export const FENCE_SHARE = 0.6;

/**
 * The leader election over one etcd key (etcd's lease + a create-if-absent transaction, the
 * pattern of etcd's own `concurrency.Election`, with no consensus of our own). The follower looks
 * at the key every {@link pollMs}; when it is gone (the leader's lease lapsed or was revoked) it
 * grants itself a lease and puts the key with it only if the key still does not exist. The winner
 * renews every third of the TTL.
 *
 * Fencing: the leader may take reads only until {@link FENCE_SHARE} of the TTL after the send of
 * its last successful renewal, measured on the monotonic clock ({@link mayTake}); at that deadline
 * it stops its inputs, revokes its lease if it still can, and follows. Since etcd cannot have
 * expired the lease before then, no two nodes take reads at once. A process stopped (SIGSTOP, a
 * hung VM) past its deadline refuses, on resume, what it had pending, before any timer runs.
 */
export class Leadership {
  private role: HaRole = 'follower';
  private lease: string | undefined;
  private ownEpoch: number | undefined;
  /** Monotonic deadline of the current leadership; reads are taken only before it. */
  private deadline = -Infinity;
  private leaderSeen: { nodeId: string; epoch: number } | undefined;
  private lastContact: number | undefined;
  private reachable = false;
  private lastError: string | undefined;
  private takeovers = 0;
  private lastTakeover: HaStatus['lastTakeover'];
  private lastFenced: HaStatus['lastFenced'];
  private keyGoneSeenAt: number | undefined;
  /** After a leadership ends, this node campaigns again only from then on (monotonic): the other node goes first. */
  private campaignFrom = -Infinity;
  private stopped = true;
  private loop: Promise<void> | undefined;
  /** Aborted at {@link stop}: ends the loop's sleep, and the next one at once. */
  private stopping = new AbortController();
  private readonly sleeps = new LoopSleep();
  private fenceTimer: NodeJS.Timeout | undefined;
  /** Role changes of the inputs, one after the other. */
  private transitions: Promise<void> = Promise.resolve();
  private readonly mono: () => number;
  private readonly log: Logger;
  private handlers: RoleHandlers = {
    onLeader: async () => undefined,
    onFollower: async () => undefined,
  };

  constructor(private readonly o: LeadershipOptions) {
    this.mono = o.monotonic ?? (() => performance.now());
    this.log = o.logger.child({ component: 'ha', nodeId: o.nodeId });
  }

  /** How often the follower looks at the key, ms. */
  get pollMs(): number {
    return Math.min(500, Math.floor(this.o.leaseTtlMs / 10));
  }

  private get renewMs(): number {
    return Math.floor(this.o.leaseTtlMs / 3);
  }

  /** Begins campaigning; `handlers` start and stop the inputs as the role changes. */
  start(handlers: RoleHandlers): void {
    this.handlers = handlers;
    this.stopped = false;
    this.stopping = new AbortController();
    this.loop = this.run();
  }

  /** Stops campaigning; a leader stops its inputs and revokes its lease, so the other node takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopping.abort();
    await this.loop;
    if (this.role === 'leader') await this.lose('this node stops', true);
    await this.transitions;
  }

  /** Why reads may not be taken now, or undefined when this node leads within its deadline. */
  mayTake(): string | undefined {
    if (this.role !== 'leader') return `node ${this.o.nodeId} is not the leader (${this.role})`;
    if (this.mono() >= this.deadline)
      return `node ${this.o.nodeId} could not renew its leader lease in time`;
    return undefined;
  }

  /**
   * What an input holding a session shared by both nodes (MQTT) needs of the election: whether it
   * may connect now (only while leading), and how long its last will waits, in whole seconds. The
   * will waits three lease times: a standby resumes the shared session within about one, and the
   * broker then drops the old leader's `offline`.
   */
  inputHandover(): { mayConnect: () => boolean; willDelaySec: number } {
    return {
      mayConnect: () => this.mayTake() === undefined,
      willDelaySec: Math.ceil((3 * this.o.leaseTtlMs) / 1000),
    };
  }

  /** The epoch reads are taken under now (undefined when not leading). */
  epoch(): number | undefined {
    return this.role === 'leader' ? this.ownEpoch : undefined;
  }

  /** Gives up leadership (the buffer cannot be written): inputs stopped, the lease revoked, so the other node takes over. */
  giveUp(reason: string): void {
    if (this.role !== 'leader') return;
    void this.lose(reason, true);
  }

  snapshot(): HaStatus {
    const lead = this.role === 'leader';
    return {
      nodeId: this.o.nodeId,
      key: this.o.key,
      role: this.role,
      leader: lead ? this.o.nodeId : this.leaderSeen?.nodeId,
      epoch: lead ? this.ownEpoch : this.leaderSeen?.epoch,
      takeovers: this.takeovers,
      lastTakeover: this.lastTakeover,
      lastFenced: this.lastFenced,
      lease: {
        ttlMs: this.o.leaseTtlMs,
        lastRenewalAgeMs:
          this.lastContact === undefined ? undefined : Math.round(this.mono() - this.lastContact),
      },
      etcd: {
        reachable: this.reachable,
        endpoint: this.o.etcd.lastEndpoint,
        lastError: this.lastError,
      },
    };
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      let ok = true;
      try {
        if (this.role === 'leader') await this.renew();
        else await this.follow();
      } catch (err) {
        ok = false;
        this.failed(err);
        // The fence timer stops leading at the deadline; checked here too, whatever the timers do.
        if (this.role === 'leader') this.checkDeadline();
      }
      // A failed renewal is tried again soon, not a third of the TTL later: etcd electing a new
      // raft leader (a member killed) refuses requests for about a second, well within the deadline.
      await this.sleeps.sleep(
        this.role === 'leader' && ok ? this.renewMs : this.pollMs,
        this.stopping.signal,
      );
    }
  }

  private failed(err: unknown): void {
    const message = (err as Error).message;
    if (this.reachable || this.lastError !== message)
      this.log.warn({ err, role: this.role }, 'etcd request failed');
    this.reachable = false;
    this.lastError = message;
  }

  private contact(): void {
    this.reachable = true;
    this.lastError = undefined;
  }

  /** One look at the key; when it is gone, one campaign. */
  private async follow(): Promise<void> {
    const holder = await this.o.etcd.get(this.o.key);
    this.contact();
    if (this.role === 'fenced') this.role = 'follower';
    if (holder) {
      this.lastContact = this.mono();
      this.keyGoneSeenAt = undefined;
      if (this.leaderSeen?.epoch !== holder.createRevision)
        this.log.info(
          { leader: holder.value, epoch: holder.createRevision },
          `standby for ${holder.value}`,
        );
      this.leaderSeen = { nodeId: holder.value, epoch: holder.createRevision };
      return;
    }
    this.keyGoneSeenAt ??= this.mono();
    if (this.mono() < this.campaignFrom) return;
    const sentAt = this.mono();
    const lease = await this.o.etcd.grant(this.o.leaseTtlMs);
    let result;
    try {
      result = await this.o.etcd.campaign(this.o.key, this.o.nodeId, lease);
    } catch (err) {
      // The put may have been applied: a lease left alone lapses by itself.
      await this.o.etcd.revoke(lease).catch(() => undefined);
      throw err;
    }
    this.lastContact = this.mono();
    if (!result.won) {
      await this.o.etcd.revoke(lease).catch(() => undefined);
      if (result.holder)
        this.leaderSeen = { nodeId: result.holder.value, epoch: result.holder.createRevision };
      return;
    }
    this.win(lease, result.epoch, sentAt);
  }

  private win(lease: string, epoch: number, sentAt: number): void {
    this.role = 'leader';
    this.lease = lease;
    this.ownEpoch = epoch;
    this.leaderSeen = { nodeId: this.o.nodeId, epoch };
    this.extend(sentAt);
    const lapseSeenAt = this.keyGoneSeenAt ?? sentAt;
    this.keyGoneSeenAt = undefined;
    this.transitions = this.transitions.then(async () => {
      if (this.role !== 'leader' || this.ownEpoch !== epoch) return;
      try {
        await this.handlers.onLeader(epoch);
      } catch (err) {
        this.log.error({ err, epoch }, 'starting the inputs as leader failed');
      }
      const tookMs = Math.round(this.mono() - lapseSeenAt);
      this.takeovers++;
      this.lastTakeover = { at: new Date(this.o.now()).toISOString(), tookMs, epoch };
      this.log.warn(
        { epoch, tookMs, previousLeader: undefined },
        `took over as leader (epoch ${epoch}) in ${tookMs} ms: inputs started`,
      );
    });
  }

  /** Renews the lease once; a lapsed lease ends the leadership. */
  private async renew(): Promise<void> {
    const lease = this.lease;
    if (!lease) return;
    const sentAt = this.mono();
    const ttl = await this.o.etcd.keepAlive(lease);
    this.contact();
    if (this.role !== 'leader' || this.lease !== lease) return;
    if (ttl <= 0) {
      await this.lose('the leader lease lapsed (etcd no longer knows it)', false);
      return;
    }
    this.extend(sentAt);
  }

  private extend(sentAt: number): void {
    this.lastContact = sentAt;
    this.deadline = sentAt + this.o.leaseTtlMs * FENCE_SHARE;
    this.armFence();
  }

  private armFence(): void {
    clearTimeout(this.fenceTimer);
    this.fenceTimer = setTimeout(
      () => this.checkDeadline(),
      Math.max(0, this.deadline - this.mono()) + 1,
    );
    this.fenceTimer.unref();
  }

  /** At the deadline: stop leading. A timer can fire early against the monotonic clock (libuv's cached loop time): then it is armed again. */
  private checkDeadline(): void {
    if (this.role !== 'leader') return;
    if (this.mono() < this.deadline) {
      this.armFence();
      return;
    }
    void this.lose(
      `no lease renewal within ${Math.round(this.o.leaseTtlMs * FENCE_SHARE)} ms of the last one`,
      true,
    );
  }

  /** Ends this node's leadership: reads refused at once, inputs stopped, the lease revoked (when asked and possible). */
  private async lose(reason: string, revoke: boolean): Promise<void> {
    if (this.role !== 'leader') return;
    const lease = this.lease;
    const epoch = this.ownEpoch;
    this.role = 'fenced';
    this.deadline = -Infinity;
    // A node that just gave up (a full disk, cut off from etcd) lets the other one take over first,
    // instead of winning the key back at once and failing again.
    this.campaignFrom = this.mono() + this.o.leaseTtlMs;
    this.lease = undefined;
    this.leaderSeen = undefined;
    clearTimeout(this.fenceTimer);
    this.lastFenced = { at: new Date(this.o.now()).toISOString(), reason };
    this.log.warn(
      { epoch, reason },
      `stopped leading (epoch ${epoch}): ${reason}; taking no reads, inputs stop`,
    );
    this.transitions = this.transitions.then(async () => {
      try {
        await this.handlers.onFollower(reason);
      } catch (err) {
        this.log.error({ err }, 'stopping the inputs after leadership failed');
      }
    });
    if (revoke && lease)
      await this.o.etcd
        .revoke(lease)
        .catch((err: unknown) =>
          this.log.debug({ err }, 'revoking the lease failed; it lapses by itself'),
        );
    await this.transitions;
  }
}

/** The error a fenced or following node's intake refuses reads with (retryable: the source keeps them). */
export function notLeader(reason: string): GatewayError {
  return new GatewayError(ErrorCodes.HA_NOT_LEADER, reason, { retryable: true });
}
