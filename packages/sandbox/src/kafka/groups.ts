import { randomUUID } from 'node:crypto';
import { KafkaError } from './messages.js';
import { type Clock, systemClock } from '@scan-gateway/service-kit/clock';

/**
 * The group coordinator of the sandbox broker: the classic consumer group protocol (JoinGroup,
 * SyncGroup, Heartbeat, LeaveGroup; KIP-62 session and rebalance timeouts; KIP-394 member ids
 * handed out with MEMBER_ID_REQUIRED) and committed offsets. The assignment is the clients'
 * (the leader's SyncGroup carries it), as in Kafka. Members that stop heartbeating are removed
 * after their session timeout, and the group rebalances.
 */

/** Bounds of the coordinator. */
export interface GroupLimits {
  /** Most groups (with members or committed offsets). Default 100. */
  maxGroups: number;
  /** Most members of one group. Default 16. */
  maxMembers: number;
  /** Wait for more members after the first join of a rebalance, in ms (Kafka's group.initial.rebalance.delay.ms). Default 100. */
  joinDelayMs: number;
}

export const DEFAULT_GROUP_LIMITS: GroupLimits = {
  maxGroups: 100,
  maxMembers: 16,
  joinDelayMs: 100,
};

/** What a JoinGroup is answered. */
export interface JoinAnswer {
  errorCode: number;
  generationId: number;
  protocolType: string | null;
  protocolName: string | null;
  leader: string;
  memberId: string;
  members: Array<{ memberId: string; groupInstanceId: string | null; metadata: Buffer }>;
}

interface Member {
  memberId: string;
  groupInstanceId: string | null;
  sessionTimeoutMs: number;
  rebalanceTimeoutMs: number;
  protocols: Array<{ name: string; metadata: Buffer }>;
  lastSeen: number;
  assignment: Buffer;
  /** A JoinGroup waiting for the rebalance to complete. */
  pendingJoin?: (answer: JoinAnswer) => void;
  /** A SyncGroup waiting for the leader's assignment. */
  pendingSync?: (answer: { errorCode: number; assignment: Buffer }) => void;
}

interface Group {
  id: string;
  state: 'Empty' | 'PreparingRebalance' | 'CompletingRebalance' | 'Stable';
  generationId: number;
  protocolType: string | null;
  protocolName: string | null;
  leader: string;
  members: Map<string, Member>;
  /** Members that joined the coming generation. */
  joined: Set<string>;
  rebalanceTimer?: NodeJS.Timeout;
  deadline: number;
  /** Committed offsets: `topic/partition` → offset and metadata. */
  offsets: Map<string, { offset: number; metadata: string | null }>;
}

const noAnswer = (memberId: string, errorCode: number): JoinAnswer => ({
  errorCode,
  generationId: -1,
  protocolType: null,
  protocolName: null,
  leader: '',
  memberId,
  members: [],
});

export class GroupCoordinator {
  private readonly groups = new Map<string, Group>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly limits: GroupLimits = DEFAULT_GROUP_LIMITS,
    private readonly now: Clock = systemClock,
  ) {
    // Session expiry, checked every 500 ms (sessions are 6 s and more; Kafka's minimum is 6 s).
    this.sweeper = setInterval(() => this.expireSessions(), 500);
    this.sweeper.unref();
  }

  close(): void {
    clearInterval(this.sweeper);
    for (const group of this.groups.values()) {
      clearTimeout(group.rebalanceTimer);
      for (const m of group.members.values()) {
        m.pendingJoin?.(noAnswer(m.memberId, KafkaError.COORDINATOR_NOT_AVAILABLE));
        m.pendingSync?.({
          errorCode: KafkaError.COORDINATOR_NOT_AVAILABLE,
          assignment: Buffer.alloc(0),
        });
      }
    }
    this.groups.clear();
  }

  private group(id: string, create: boolean): Group | undefined {
    let group = this.groups.get(id);
    if (!group && create && this.groups.size < this.limits.maxGroups) {
      group = {
        id,
        state: 'Empty',
        generationId: 0,
        protocolType: null,
        protocolName: null,
        leader: '',
        members: new Map(),
        joined: new Set(),
        deadline: 0,
        offsets: new Map(),
      };
      this.groups.set(id, group);
    }
    return group;
  }

  /**
   * JoinGroup. `requireKnownMemberId` (v4+): a member without an id gets one with
   * MEMBER_ID_REQUIRED and joins again with it (KIP-394).
   */
  join(req: {
    groupId: string;
    memberId: string;
    groupInstanceId: string | null;
    sessionTimeoutMs: number;
    rebalanceTimeoutMs: number;
    protocolType: string;
    protocols: Array<{ name: string; metadata: Buffer }>;
    requireKnownMemberId: boolean;
  }): Promise<JoinAnswer> {
    if (req.groupId === '')
      return Promise.resolve(noAnswer(req.memberId, KafkaError.INVALID_GROUP_ID));
    if (req.sessionTimeoutMs < 1000 || req.sessionTimeoutMs > 300_000)
      return Promise.resolve(noAnswer(req.memberId, KafkaError.INVALID_SESSION_TIMEOUT));
    const group = this.group(req.groupId, true);
    if (!group)
      return Promise.resolve(noAnswer(req.memberId, KafkaError.COORDINATOR_NOT_AVAILABLE));
    if (
      group.protocolType !== null &&
      group.members.size > 0 &&
      group.protocolType !== req.protocolType
    ) {
      return Promise.resolve(noAnswer(req.memberId, KafkaError.INCONSISTENT_GROUP_PROTOCOL));
    }
    let memberId = req.memberId;
    if (memberId === '') {
      memberId = `${req.groupInstanceId ?? 'member'}-${randomUUID()}`;
      if (req.requireKnownMemberId)
        return Promise.resolve(noAnswer(memberId, KafkaError.MEMBER_ID_REQUIRED));
    } else if (!group.members.has(memberId) && !req.requireKnownMemberId) {
      return Promise.resolve(noAnswer(memberId, KafkaError.UNKNOWN_MEMBER_ID));
    }
    let member = group.members.get(memberId);
    if (!member) {
      if (group.members.size >= this.limits.maxMembers)
        return Promise.resolve(noAnswer(memberId, KafkaError.GROUP_MAX_SIZE_REACHED));
      member = {
        memberId,
        groupInstanceId: req.groupInstanceId,
        sessionTimeoutMs: req.sessionTimeoutMs,
        rebalanceTimeoutMs: req.rebalanceTimeoutMs,
        protocols: [],
        lastSeen: 0,
        assignment: Buffer.alloc(0),
      };
      group.members.set(memberId, member);
    }
    member.protocols = req.protocols;
    member.sessionTimeoutMs = req.sessionTimeoutMs;
    member.rebalanceTimeoutMs = req.rebalanceTimeoutMs;
    member.lastSeen = this.now();
    group.protocolType = req.protocolType;
    // A join replaces an older pending one of the same member (a client that timed out and retried).
    member.pendingJoin?.(noAnswer(memberId, KafkaError.REBALANCE_IN_PROGRESS));
    const answer = new Promise<JoinAnswer>((resolve) => {
      member.pendingJoin = resolve;
    });
    this.prepareRebalance(group);
    group.joined.add(memberId);
    this.maybeCompleteJoin(group);
    return answer;
  }

  private prepareRebalance(group: Group): void {
    if (group.state === 'PreparingRebalance') return;
    // Members waiting for an assignment of the generation now abandoned learn it at once.
    for (const m of group.members.values()) {
      m.pendingSync?.({ errorCode: KafkaError.REBALANCE_IN_PROGRESS, assignment: Buffer.alloc(0) });
      m.pendingSync = undefined;
    }
    group.state = 'PreparingRebalance';
    group.joined = new Set();
    const rebalanceTimeout = Math.max(
      ...[...group.members.values()].map((m) => m.rebalanceTimeoutMs),
      0,
    );
    group.deadline = this.now() + rebalanceTimeout;
    clearTimeout(group.rebalanceTimer);
    // After the initial delay, and again at the rebalance timeout: whoever has not joined by then is out.
    group.rebalanceTimer = setTimeout(
      () => this.maybeCompleteJoin(group, true),
      this.limits.joinDelayMs,
    );
    group.rebalanceTimer.unref();
  }

  private maybeCompleteJoin(group: Group, timerFired = false): void {
    if (group.state !== 'PreparingRebalance') return;
    const now = this.now();
    const allJoined = [...group.members.keys()].every((id) => group.joined.has(id));
    if (!timerFired || (!allJoined && now < group.deadline)) {
      if (timerFired) {
        group.rebalanceTimer = setTimeout(
          () => this.maybeCompleteJoin(group, true),
          Math.max(10, Math.min(500, group.deadline - now)),
        );
        group.rebalanceTimer.unref();
      }
      return;
    }
    for (const [id, m] of group.members) {
      if (!group.joined.has(id)) {
        m.pendingSync?.({ errorCode: KafkaError.UNKNOWN_MEMBER_ID, assignment: Buffer.alloc(0) });
        group.members.delete(id);
      }
    }
    const members = [...group.members.values()];
    if (members.length === 0) {
      group.state = 'Empty';
      group.generationId += 1;
      return;
    }
    // The first protocol of the leader's list that every member offers.
    const leader = members[0] as Member;
    const protocol = leader.protocols.find((p) =>
      members.every((m) => m.protocols.some((q) => q.name === p.name)),
    );
    group.generationId += 1;
    group.leader = leader.memberId;
    group.protocolName = protocol?.name ?? null;
    group.state = 'CompletingRebalance';
    for (const m of members) {
      m.lastSeen = now;
      const isLeader = m.memberId === group.leader;
      m.pendingJoin?.({
        errorCode: protocol ? KafkaError.NONE : KafkaError.INCONSISTENT_GROUP_PROTOCOL,
        generationId: group.generationId,
        protocolType: group.protocolType,
        protocolName: group.protocolName,
        leader: group.leader,
        memberId: m.memberId,
        members: isLeader
          ? members.map((x) => ({
              memberId: x.memberId,
              groupInstanceId: x.groupInstanceId,
              metadata:
                x.protocols.find((p) => p.name === protocol?.name)?.metadata ?? Buffer.alloc(0),
            }))
          : [],
      });
      m.pendingJoin = undefined;
    }
  }

  /** SyncGroup: the leader hands out the assignment; the others wait for it. */
  sync(req: {
    groupId: string;
    generationId: number;
    memberId: string;
    assignments: Array<{ memberId: string; assignment: Buffer }>;
  }): Promise<{
    errorCode: number;
    assignment: Buffer;
    protocolType: string | null;
    protocolName: string | null;
  }> {
    const group = this.group(req.groupId, false);
    const member = group?.members.get(req.memberId);
    const plain = (errorCode: number) =>
      Promise.resolve({
        errorCode,
        assignment: Buffer.alloc(0),
        protocolType: null,
        protocolName: null,
      });
    if (!group || !member) return plain(KafkaError.UNKNOWN_MEMBER_ID);
    if (req.generationId !== group.generationId) return plain(KafkaError.ILLEGAL_GENERATION);
    if (group.state === 'PreparingRebalance') return plain(KafkaError.REBALANCE_IN_PROGRESS);
    member.lastSeen = this.now();
    const withNames = (a: { errorCode: number; assignment: Buffer }) => ({
      ...a,
      protocolType: group.protocolType,
      protocolName: group.protocolName,
    });
    if (group.state === 'Stable')
      return Promise.resolve(
        withNames({ errorCode: KafkaError.NONE, assignment: member.assignment }),
      );
    if (req.memberId === group.leader) {
      for (const m of group.members.values())
        m.assignment =
          req.assignments.find((a) => a.memberId === m.memberId)?.assignment ?? Buffer.alloc(0);
      group.state = 'Stable';
      for (const m of group.members.values()) {
        m.pendingSync?.({ errorCode: KafkaError.NONE, assignment: m.assignment });
        m.pendingSync = undefined;
      }
      return Promise.resolve(
        withNames({ errorCode: KafkaError.NONE, assignment: member.assignment }),
      );
    }
    member.pendingSync?.({
      errorCode: KafkaError.REBALANCE_IN_PROGRESS,
      assignment: Buffer.alloc(0),
    });
    return new Promise((resolve) => {
      member.pendingSync = (a) => resolve(withNames(a));
    });
  }

  heartbeat(req: { groupId: string; generationId: number; memberId: string }): number {
    const group = this.group(req.groupId, false);
    const member = group?.members.get(req.memberId);
    if (!group || !member) return KafkaError.UNKNOWN_MEMBER_ID;
    member.lastSeen = this.now();
    if (group.state === 'PreparingRebalance') return KafkaError.REBALANCE_IN_PROGRESS;
    if (req.generationId !== group.generationId) return KafkaError.ILLEGAL_GENERATION;
    return KafkaError.NONE;
  }

  /** LeaveGroup of one member; the others rebalance. */
  leave(groupId: string, memberId: string): number {
    const group = this.group(groupId, false);
    const member = group?.members.get(memberId);
    if (!group || !member) return KafkaError.UNKNOWN_MEMBER_ID;
    this.remove(group, member);
    return KafkaError.NONE;
  }

  private remove(group: Group, member: Member): void {
    group.members.delete(member.memberId);
    member.pendingJoin?.(noAnswer(member.memberId, KafkaError.UNKNOWN_MEMBER_ID));
    member.pendingSync?.({ errorCode: KafkaError.UNKNOWN_MEMBER_ID, assignment: Buffer.alloc(0) });
    if (group.members.size === 0) {
      clearTimeout(group.rebalanceTimer);
      group.state = 'Empty';
      group.joined.clear();
      if (group.offsets.size === 0) this.groups.delete(group.id);
      return;
    }
    if (group.state === 'PreparingRebalance') this.maybeCompleteJoin(group);
    else this.prepareRebalance(group);
  }

  private expireSessions(): void {
    const now = this.now();
    for (const group of this.groups.values()) {
      for (const m of [...group.members.values()]) {
        // A member waiting in a join is alive; its session counts again once the join is answered.
        if (m.pendingJoin === undefined && now - m.lastSeen > m.sessionTimeoutMs)
          this.remove(group, m);
      }
    }
  }

  /**
   * OffsetCommit. A commit with generation -1 and no member id is a "simple" commit (no group
   * membership), which Kafka accepts while the group has no members.
   */
  commit(
    req: { groupId: string; generationId: number; memberId: string },
    offsets: Array<{ topic: string; partition: number; offset: number; metadata: string | null }>,
  ): number {
    const simple = req.generationId < 0 && req.memberId === '';
    const group = this.group(req.groupId, true);
    if (!group) return KafkaError.COORDINATOR_NOT_AVAILABLE;
    if (!simple) {
      if (!group.members.has(req.memberId)) return KafkaError.UNKNOWN_MEMBER_ID;
      if (req.generationId !== group.generationId) return KafkaError.ILLEGAL_GENERATION;
      if (group.state === 'PreparingRebalance') return KafkaError.REBALANCE_IN_PROGRESS;
    } else if (group.members.size > 0) {
      return KafkaError.UNKNOWN_MEMBER_ID;
    }
    for (const o of offsets)
      group.offsets.set(`${o.topic}/${o.partition}`, { offset: o.offset, metadata: o.metadata });
    return KafkaError.NONE;
  }

  /** The committed offset of a partition, -1 when none. */
  committed(
    groupId: string,
    topic: string,
    partition: number,
  ): { offset: number; metadata: string | null } {
    return (
      this.groups.get(groupId)?.offsets.get(`${topic}/${partition}`) ?? { offset: -1, metadata: '' }
    );
  }
}
