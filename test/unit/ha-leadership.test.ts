import { createHash } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferStore } from '../../src/buffer/store.js';
import { configSchema } from '../../src/config/schema.js';
import { ErrorCodes } from '../../src/errors.js';
import type { CampaignResult, EtcdClient, EtcdKeyValue } from '../../src/ha/etcd-client.js';
import { FENCE_SHARE, Leadership } from '../../src/ha/leadership.js';
import { Intake, type IntakeFence } from '../../src/intake/intake.js';
import type { IntakeItem } from '../../src/inputs/types.js';
import { silentLogger } from '../../src/log.js';
import { mappingContext } from '../../src/mapping/map-read.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { waitFor } from '../helpers/wait.js';
import { queriesOf } from '../helpers/queries.js';

/** An etcd of one key in memory, with the calls the election makes; `down` makes every call fail. */
class FakeEtcd {
  key: EtcdKeyValue | undefined;
  revision = 10;
  leases = new Map<string, boolean>();
  revoked: string[] = [];
  down = false;
  lastEndpoint = 'fake';
  private next = 1;
  private check(): void {
    if (this.down)
      throw Object.assign(new Error('no etcd endpoint answered'), { code: ErrorCodes.HA_ETCD });
  }
  async grant(): Promise<string> {
    this.check();
    const id = String(this.next++);
    this.leases.set(id, true);
    return id;
  }
  async keepAlive(lease: string): Promise<number> {
    this.check();
    return this.leases.get(lease) ? 5 : 0;
  }
  async revoke(lease: string): Promise<void> {
    this.check();
    this.revoked.push(lease);
    this.lapse(lease);
  }
  async get(): Promise<EtcdKeyValue | undefined> {
    this.check();
    return this.key;
  }
  async campaign(_key: string, value: string, lease: string): Promise<CampaignResult> {
    this.check();
    if (this.key) return { won: false, holder: this.key };
    this.revision++;
    this.key = { value, createRevision: this.revision, lease };
    return { won: true, epoch: this.revision };
  }
  /** The lease lapses (etcd's TTL ran out, or a revoke): its key goes with it. */
  lapse(lease: string): void {
    this.leases.delete(lease);
    if (this.key?.lease === lease) this.key = undefined;
  }
}

const TTL = 600;

/**
 * `clock.t` is added to the monotonic clock (a process stopped and resumed); a frozen clock is
 * `t` alone, so no deadline passes unless the test moves it, however late the timers run.
 */
function election(etcd: FakeEtcd, nodeId: string, clock: { t: number; frozen?: boolean }) {
  const events: string[] = [];
  const leadership = new Leadership({
    etcd: etcd as unknown as EtcdClient,
    nodeId,
    key: '/l',
    leaseTtlMs: TTL,
    logger: silentLogger(),
    now: Date.now,
    monotonic: () => (clock.frozen ? clock.t : clock.t + performance.now()),
  });
  leadership.start({
    onLeader: async (epoch) => void events.push(`leader ${epoch}`),
    onFollower: async (why) => void events.push(`follower: ${why}`),
  });
  return { leadership, events };
}

const running: Leadership[] = [];
afterEach(async () => {
  for (const l of running.splice(0)) await l.stop();
});

describe('leader election over an etcd lease', () => {
  it("one node wins, the other stands by for it; the winner's epoch is the revision of its key", async () => {
    const etcd = new FakeEtcd();
    // Frozen: what A may do below does not depend on how soon a loaded machine runs its renewal.
    const a = election(etcd, 'A', { t: 0, frozen: true });
    running.push(a.leadership);
    await waitFor(() => a.leadership.mayTake() === undefined, { what: 'A leads' });
    const b = election(etcd, 'B', { t: 0, frozen: true });
    running.push(b.leadership);
    await waitFor(() => b.leadership.snapshot().leader === 'A', { what: 'B sees A lead' });
    expect(a.leadership.epoch()).toBe(11);
    expect(a.events).toEqual(['leader 11']);
    expect(b.leadership.mayTake()).toMatch(/not the leader/);
    // An MQTT input connects only on the leader; its will waits three lease times, in whole seconds.
    expect(a.leadership.inputHandover().mayConnect()).toBe(true);
    expect(b.leadership.inputHandover()).toMatchObject({
      willDelaySec: Math.ceil((3 * TTL) / 1000),
    });
    expect(b.leadership.inputHandover().mayConnect()).toBe(false);
    expect(b.leadership.snapshot()).toMatchObject({ role: 'follower', leader: 'A', epoch: 11 });
    // A lease lapse (A stopped renewing) lets B win, under a higher epoch.
    etcd.lapse(etcd.key!.lease);
    await waitFor(() => b.leadership.mayTake() === undefined, { what: 'B took over' });
    expect(b.leadership.epoch()).toBeGreaterThan(11);
    // A learns at its next renewal that its lease is gone, and stops taking reads.
    await waitFor(() => a.events.some((e) => e.startsWith('follower')), { what: 'A follows' });
    expect(a.leadership.mayTake()).toBeDefined();
  });

  it('fences at the deadline on the monotonic clock, before any timer runs (a process resumed after SIGSTOP)', async () => {
    const etcd = new FakeEtcd();
    const clock = { t: 0 };
    const a = election(etcd, 'A', clock);
    running.push(a.leadership);
    await waitFor(() => a.leadership.mayTake() === undefined, { what: 'A leads' });
    // The process "was stopped" past the deadline: the very next check refuses, synchronously.
    clock.t += TTL * FENCE_SHARE + 1;
    expect(a.leadership.mayTake()).toMatch(/could not renew/);
  });

  it('a leader cut off from etcd stops taking reads at 60% of the TTL, and gives up', async () => {
    const etcd = new FakeEtcd();
    const a = election(etcd, 'A', { t: 0 });
    running.push(a.leadership);
    await waitFor(() => a.leadership.mayTake() === undefined, { what: 'A leads' });
    const cutAt = performance.now();
    etcd.down = true;
    await waitFor(() => a.events.some((e) => e.startsWith('follower')), {
      timeoutMs: 30_000,
      what: 'A fenced',
    });
    // Printed, not asserted: a loaded machine delays timers; the deadline itself is checked at
    // each commit (the test above), whatever the timers do.
    console.log(
      `fenced ${Math.round(performance.now() - cutAt)} ms after etcd went away (deadline ${TTL * FENCE_SHARE} ms)`,
    );
    expect(a.leadership.snapshot().etcd.reachable).toBe(false);
    expect(a.leadership.mayTake()).toBeDefined();
  });

  it('gives up leadership on request (the buffer cannot be written): inputs stop, the lease is revoked', async () => {
    const etcd = new FakeEtcd();
    const a = election(etcd, 'A', { t: 0 });
    running.push(a.leadership);
    await waitFor(() => a.leadership.mayTake() === undefined, { what: 'A leads' });
    const lease = etcd.key!.lease;
    a.leadership.giveUp('the disk is full');
    await waitFor(() => etcd.revoked.includes(lease), { what: 'lease revoked' });
    expect(a.events.at(-1)).toBe('follower: the disk is full');
  });
});

describe('intake under a fence', () => {
  const config = configSchema.parse({
    site: { id: 'ha', timezone: 'Europe/Berlin' },
    upstream: {
      baseUrl: 'http://127.0.0.1:1',
      authUrl: 'http://127.0.0.1:1',
      clientId: 'demo-client',
    },
    dcps: [
      {
        key: 'GI-01',
        kind: 'goodsIn',
        productModelKey: 'PACK-A',
        supplierKey: 'SUP-0042',
        duplicateWindowMs: 0,
      },
    ],
    inputs: [
      {
        id: 'line',
        type: 'mqtt',
        url: 'mqtt://127.0.0.1:1',
        topics: ['t'],
        clientId: 'x',
        dcp: 'GI-01',
      },
    ],
  });
  const read = (code: string): IntakeItem[] => [
    { kind: 'read', read: { inputId: 'line', raw: Buffer.from(code), receivedAt: new Date() } },
  ];
  const message = (id: number, code: string, dup: boolean) => ({
    packetId: id,
    topic: 't',
    payloadSha256: createHash('sha256').update(code).digest(),
    dup,
  });

  it('commits only while the fence allows, with the epoch; a resend (DUP) is stored as a possible duplicate', async () => {
    const store = BufferStore.openAt(
      join(mkdtempSync(join(tmpdir(), 'sg-ha-intake-')), 'buffer.db'),
    );
    let refusal: string | undefined = 'node A is not the leader (follower)';
    const failures: unknown[] = [];
    const fence: IntakeFence = {
      mayTake: () => refusal,
      epoch: () => 42,
      commitFailed: (err) => failures.push(err),
    };
    const intake = new Intake({
      store,
      mapping: mappingContext(config),
      logger: silentLogger(),
      fence,
    });
    intake.open();
    try {
      await expect(
        intake.submitMessage(read('R-1'), message(1, 'R-1', false)),
      ).rejects.toMatchObject({
        code: ErrorCodes.HA_NOT_LEADER,
        retryable: true,
      });
      expect(store.reports.totals().pendingScans).toBe(0);
      refusal = undefined;
      await intake.submitMessage(read('R-1'), message(1, 'R-1', false));
      await intake.submitMessage(read('R-2'), message(2, 'R-2', true));
      const rows = sqlOf(store)
        .prepare(
          'SELECT raw, leader_epoch AS epoch, possible_duplicate AS dup FROM reads ORDER BY id',
        )
        .all() as { raw: Buffer; epoch: number; dup: number }[];
      expect(rows.map((r) => [r.raw.toString(), r.epoch, r.dup])).toEqual([
        ['R-1', 42, 0],
        ['R-2', 42, 1],
      ]);
      expect(queriesOf(store).haPossibleDuplicates(10)).toMatchObject({
        reads: 1,
        recent: [{ reference: 'R-2', epoch: 42 }],
      });
      expect(failures).toEqual([]);
    } finally {
      intake.close();
      store.close();
    }
  });
});

describe('config check under ha', () => {
  it('warns of each serial input: it is bound to this machine and does not fail over', async () => {
    const { haNotes } = await import('../../src/config/ha-schema.js');
    const base = {
      site: { id: 'ha', timezone: 'Europe/Berlin' },
      upstream: {
        baseUrl: 'http://127.0.0.1:1',
        authUrl: 'http://127.0.0.1:1',
        clientId: 'demo-client',
      },
      dcps: [{ key: 'GI-01', kind: 'goodsIn', productModelKey: 'PACK-A', supplierKey: 'SUP-0042' }],
      inputs: [
        { id: 'scanner-1', type: 'serial', path: '/dev/ttyUSB0', dcp: 'GI-01' },
        {
          id: 'line',
          type: 'mqtt',
          url: 'mqtt://127.0.0.1:1',
          topics: ['t'],
          clientId: 'x',
          dcp: 'GI-01',
        },
      ],
    };
    expect(haNotes(configSchema.parse(base))).toEqual([]);
    const notes = haNotes(
      configSchema.parse({
        ...base,
        ha: { nodeId: 'a', etcd: { endpoints: ['http://127.0.0.1:2379'] } },
      }),
    );
    expect(notes).toEqual([
      {
        severity: 'note',
        where: 'inputs.0',
        message: expect.stringContaining(
          'serial input scanner-1 is bound to this machine; it does not fail over: use a serial device server on TCP',
        ),
      },
    ]);
  });
});
