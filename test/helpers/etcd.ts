import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from './ports.js';
import { waitFor } from './wait.js';

/** One member of a test etcd cluster. */
export interface EtcdMember {
  name: string;
  /** `http://127.0.0.1:<port>`: its client URL (the v3 JSON gateway). */
  clientUrl: string;
  /** SIGKILL: the member is gone; the other two keep the quorum. */
  kill(): Promise<void>;
  /** Starts it again with its data dir: it rejoins the cluster. */
  restart(): Promise<void>;
  log(): string;
}

export interface EtcdCluster {
  members: EtcdMember[];
  stop(): Promise<void>;
}

/** The etcd binary (Debian `etcd-server`); the test fails, not skips, without it. */
function etcdBinary(): string {
  for (const candidate of ['etcd', '/usr/bin/etcd'])
    if (!spawnSync(candidate, ['--version'], { stdio: 'ignore' }).error) return candidate;
  throw new Error(
    'etcd is required for the high-availability test but was not found; install it: apt-get install etcd-server',
  );
}

/**
 * Starts a three-member etcd cluster on loopback (`--initial-cluster`, a data dir each under
 * `dir`, free ports), as a site runs it: two beside the gateways, one witness. Resolves once every
 * member answers `/health`. Short heartbeat and election timeouts, so a killed member's raft
 * leadership moves within a second, as on a LAN.
 */
export async function startEtcdCluster(dir: string): Promise<EtcdCluster> {
  const binary = etcdBinary();
  const names = ['etcd-a', 'etcd-b', 'etcd-witness'];
  const ports = await Promise.all(
    names.map(async () => ({ client: await freePort(), peer: await freePort() })),
  );
  const initialCluster = names.map((n, i) => `${n}=http://127.0.0.1:${ports[i]!.peer}`).join(',');
  const members: EtcdMember[] = names.map((name, i) => {
    const p = ports[i]!;
    const dataDir = join(dir, name);
    mkdirSync(dataDir, { recursive: true });
    let child: ChildProcess | undefined;
    let out = '';
    let state = 'new';
    const start = (): void => {
      child = spawn(
        binary,
        [
          `--name=${name}`,
          `--data-dir=${dataDir}`,
          `--listen-client-urls=http://127.0.0.1:${p.client}`,
          `--advertise-client-urls=http://127.0.0.1:${p.client}`,
          `--listen-peer-urls=http://127.0.0.1:${p.peer}`,
          `--initial-advertise-peer-urls=http://127.0.0.1:${p.peer}`,
          `--initial-cluster=${initialCluster}`,
          `--initial-cluster-state=${state}`,
          '--initial-cluster-token=sg-ha-test',
          '--heartbeat-interval=100',
          '--election-timeout=1000',
          '--log-level=error',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      state = 'existing';
      child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    };
    const exited = async (): Promise<void> => {
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        c.once('exit', () => resolve());
        c.kill('SIGKILL');
      });
    };
    return {
      name,
      clientUrl: `http://127.0.0.1:${p.client}`,
      kill: exited,
      async restart() {
        await exited();
        start();
        await healthy(`http://127.0.0.1:${p.client}`, () => out);
      },
      log: () => out,
      start,
    } as EtcdMember & { start: () => void };
  });
  for (const m of members) (m as EtcdMember & { start: () => void }).start();
  await Promise.all(members.map((m) => healthy(m.clientUrl, m.log)));
  return {
    members,
    async stop() {
      await Promise.all(members.map((m) => m.kill()));
    },
  };
}

async function healthy(url: string, log: () => string): Promise<void> {
  await waitFor(
    async () => {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) });
      return ((await res.json()) as { health?: string }).health === 'true';
    },
    {
      timeoutMs: 30_000,
      intervalMs: 100,
      what: `etcd ${url} healthy; log:\n${log().slice(-2000)}`,
    },
  );
}
