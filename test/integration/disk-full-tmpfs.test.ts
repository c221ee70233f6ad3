import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  writeSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statfsSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import Database from 'better-sqlite3';
import { Command } from 'commander';
import mqtt from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { BufferStore } from '../../src/buffer/store.js';
import { CommandExit } from '../../src/cli/exit.js';
import { registerTraceCommand } from '../../src/cli/trace-command.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { loadConfig } from '../../src/config/load.js';
import { HealthCodes } from '../../src/error-catalogue.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { startMosquitto } from '../helpers/mosquitto.js';
import { waitFor } from '../helpers/wait.js';
import { memoryLogger } from '../helpers/log-lines.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const FILES = 40;
const PER_FILE = 1000;
const TOTAL = FILES * PER_FILE;

/** On a timeout, what the gateway warned about: each message (and error code) with how often. */
function warningsByMessage(lines: readonly { level: number; msg: string }[]): [string, number][] {
  const seen = new Map<string, number>();
  for (const l of lines) {
    if (l.level < 40) continue;
    const key = `${l.msg} ${(l as { err?: { code?: string } }).err?.code ?? ''}`;
    seen.set(key, (seen.get(key) ?? 0) + 1);
  }
  return [...seen.entries()];
}

// Scans delivered seconds ago must yield here (the point of these tests): no protected window.
const ref = (f: number, i: number) =>
  `DISK-${String(f).padStart(3, '0')}-${String(i).padStart(4, '0')}-${'x'.repeat(80)}`;

/**
 * The buffer on a real, small file system (a 24 MiB tmpfs mounted by the test; root is
 * needed, as in CI). Far more reads than the disk holds, the upstream up: every read is delivered,
 * the audit yields (oldest delivered scans pruned first), intake never sticks, and the database is
 * sound. Fails (does not skip) when the tmpfs cannot be mounted.
 */
describe('a full disk never stops delivery (tmpfs)', () => {
  let base: string;
  let disk: string;
  let mounted = false;
  let sandbox: RunningSandbox;

  beforeAll(async () => {
    base = mkdtempSync(join(tmpdir(), 'sg-tmpfs-'));
    disk = join(base, 'disk');
    mkdirSync(disk);
    // Throws (and fails the test) when mount is missing or not permitted.
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', disk], { stdio: 'pipe' });
    mounted = true;
    sandbox = await startSandbox({ port: 0, processingDelayMs: 0 });
  });

  afterAll(async () => {
    await sandbox?.close();
    if (mounted) execFileSync('umount', [disk], { stdio: 'pipe' });
    rmSync(base, { recursive: true, force: true });
  });

  it(
    'delivers every read, prunes the oldest delivered scans first, never sticks, and keeps the database sound',
    { timeout: 90_000 },
    async () => {
      const fsSize = statfsSync(disk).blocks * statfsSync(disk).bsize;
      expect(fsSize).toBeLessThanOrEqual(25 * 1024 * 1024);
      const inbox = join(base, 'inbox');
      const bufferPath = join(disk, 'buffer.db');
      const file = join(base, 'config.yaml');
      writeFileSync(
        file,
        `site: { id: disk, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${bufferPath}, earlyPruneKeepHours: 0 }
delivery: { mode: direct, maxBatchScans: 2000, maxBatchDelayMs: 50, statusPollMs: 50, statusPollMaxMs: 100 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042, duplicateWindowMs: 0 }
inputs:
  - { id: inbox, type: files, dir: ${inbox}, format: lines, dcp: GI-01, stableMs: 20 }
`,
      );
      const mem = memoryLogger('info');
      const app: App = buildApp(
        loadConfig(file, { baseDir: base, env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET } }),
        { logger: mem.logger },
      );
      await app.start();
      let possibleDuplicates: number;
      try {
        expect(existsSync(`${bufferPath}.reserve`)).toBe(true);
        // Files are written beside the inbox and renamed in, so none is taken half-written.
        mkdirSync(join(base, 'staging'), { recursive: true });
        for (let f = 0; f < FILES; f++) {
          const staged = join(base, 'staging', `reads-${String(f).padStart(3, '0')}.txt`);
          writeFileSync(
            staged,
            Array.from({ length: PER_FILE }, (_, i) => ref(f, i)).join('\n') + '\n',
          );
          renameSync(staged, join(inbox, `reads-${String(f).padStart(3, '0')}.txt`));
        }
        await waitFor(
          () => {
            const status = app.status();
            return (
              readdirSync(inbox).filter((n) => n.endsWith('.txt')).length === 0 &&
              status.buffer.undeliveredScans === 0 &&
              (status.buffer.scans.pending ?? 0) === 0
            );
          },
          { timeoutMs: 80_000, intervalMs: 200, what: 'every file taken and every scan delivered' },
        );
        const status = app.status();
        const disk = status.buffer.disk!;
        expect(disk.prunedEarlyScans).toBeGreaterThan(0);
        // buffer.maxBytes not set: the quota is derived from this small disk, about 1.2 MB of
        // scan JSON, far below the 2 GiB the disk cannot hold.
        expect(disk.derivedQuotaBytes).toBe(status.buffer.quotaBytes);
        expect(disk.derivedQuotaBytes! * 3.5).toBeLessThan(fsSize);
        expect(disk.derivedQuotaBytes).toBeGreaterThan(1024 * 1024);
        expect(disk.quotaTooLarge).toBeUndefined();
        expect((status.healthProblems ?? []).map((p) => p.code)).toContain(
          HealthCodes.AUDIT_PRUNED_EARLY,
        );
        expect(existsSync(join(inbox, 'failed')) ? readdirSync(join(inbox, 'failed')) : []).toEqual(
          [],
        );
        possibleDuplicates =
          (status.delivery as { possibleDuplicatesTotal?: number }).possibleDuplicatesTotal ?? 0;
      } finally {
        await app.stop();
      }

      // Every read reached the service; more than once only if the gateway counted it as a possible
      // duplicate (an answer it could not record: at-least-once, docs/delivery.md).
      expect(mem.parsed().some((l) => /pruned the oldest delivered scans/.test(l.msg))).toBe(true);
      const log = (await (await fetch(`${sandbox.url}/_sandbox/scans`)).json()) as {
        scans: { scan: { reference: string } }[];
      };
      const refs = log.scans.map((s) => s.scan.reference);
      expect(new Set(refs).size).toBe(TOTAL);
      // A scan reaches the service twice only in an upload counted as a possible duplicate. The count
      // is an upper bound: a resend whose first attempt never reached the service is counted too.
      expect(refs.length).toBeLessThanOrEqual(TOTAL + possibleDuplicates);

      // The audit yielded oldest first: the first file's scans are gone, the last file's kept.
      let bytesPerScan: number;
      const db = new Database(bufferPath, { readonly: true });
      try {
        expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
        const kept = db
          .prepare(`SELECT reference FROM scans ORDER BY id`)
          .pluck()
          .all() as string[];
        expect(kept.length).toBeLessThan(TOTAL);
        expect(kept.some((r) => r.startsWith('DISK-000-'))).toBe(false);
        expect(kept.some((r) => r.startsWith(`DISK-${String(FILES - 1).padStart(3, '0')}-`))).toBe(
          true,
        );
        expect(
          db.prepare(`SELECT count(*) FROM scans WHERE state <> 'delivered'`).pluck().get(),
        ).toBe(0);
        const pages =
          (db.pragma('page_count', { simple: true }) as number) -
          (db.pragma('freelist_count', { simple: true }) as number);
        bytesPerScan = Math.round(
          (pages * (db.pragma('page_size', { simple: true }) as number)) / kept.length,
        );
      } finally {
        db.close();
      }
      // For docs/operations.md ("Disk sizing"): bytes on disk per delivered scan of this size.
      console.log(
        `disk-full-tmpfs: ${TOTAL} reads through a ${fsSize} byte file system; about ${bytesPerScan} bytes per scan (reference ${ref(0, 0).length} characters)`,
      );
    },
  );
  /**
   * The tmpfs emptied, a gateway on it with a files inbox (or the `input` given), retrying fast,
   * the sandbox's upload errors at `errorRate`, the byte quota `maxBytes` (undefined: derived from
   * the disk): started.
   */
  async function startOnFreshDisk(
    name: string,
    db: string,
    errorRate: number,
    maxBytes?: number,
    input?: string,
  ) {
    for (const entry of readdirSync(disk)) rmSync(join(disk, entry), { force: true });
    const dir = join(base, name);
    mkdirSync(dir);
    const inbox = join(dir, 'inbox');
    const bufferPath = join(disk, db);
    const file = join(dir, 'config.yaml');
    writeFileSync(
      file,
      `site: { id: disk, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${bufferPath}, earlyPruneKeepHours: 0${maxBytes === undefined ? '' : `, maxBytes: ${maxBytes}`} }
delivery: { mode: direct, maxBatchScans: 2000, maxBatchDelayMs: 50, statusPollMs: 50, statusPollMaxMs: 100, retryBaseMs: 50, retryMaxMs: 200 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042, duplicateWindowMs: 0 }
inputs:
  - ${input ?? `{ id: inbox, type: files, dir: ${inbox}, format: lines, dcp: GI-01, stableMs: 20 }`}
`,
    );
    await fetch(`${sandbox.url}/_sandbox/scans`, { method: 'DELETE' });
    sandbox.setFaults({ errorRate });
    const mem = memoryLogger('info');
    const app: App = buildApp(
      loadConfig(file, { baseDir: dir, env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET } }),
      { logger: mem.logger },
    );
    await app.start();
    return { dir, inbox, bufferPath, mem, app };
  }

  it(
    'upstream down until the disk is full: intake pauses (files wait), nothing is lost, and all is delivered once the upstream returns',
    { timeout: 90_000 },
    async () => {
      // A configured quota far larger than the disk (warned about): the disk, not the quota, fills.
      const { dir, inbox, bufferPath, mem, app } = await startOnFreshDisk(
        'down',
        'down.db',
        1,
        2 ** 30,
      );
      const files = 36;
      try {
        mkdirSync(join(dir, 'staging'), { recursive: true });
        for (let f = 0; f < files; f++) {
          const staged = join(dir, 'staging', `reads-${String(f).padStart(3, '0')}.txt`);
          writeFileSync(
            staged,
            Array.from({ length: PER_FILE }, (_, i) => ref(f, i)).join('\n') + '\n',
          );
          renameSync(staged, join(inbox, `reads-${String(f).padStart(3, '0')}.txt`));
        }
        // The disk fills with undelivered scans: intake pauses, files wait in the inbox.
        await waitFor(
          () =>
            app.status().buffer.intakePaused === true &&
            (app.status().buffer.quota as { diskFull?: unknown } | undefined)?.diskFull !==
              undefined,
          {
            timeoutMs: 40_000,
            intervalMs: 100,
            what: 'intake paused by a full disk',
          },
        );
        expect(readdirSync(inbox).filter((n) => n.endsWith('.txt')).length).toBeGreaterThan(0);
        expect(app.status().buffer.disk?.prunedEarlyScans).toBe(0);

        // The upstream returns: delivery works on the full disk (the reserve), the audit yields, intake resumes by itself.
        sandbox.setFaults({ errorRate: 0 });
        await waitFor(
          () => {
            const status = app.status();
            return (
              readdirSync(inbox).filter((n) => n.endsWith('.txt')).length === 0 &&
              status.buffer.undeliveredScans === 0 &&
              (status.buffer.scans.pending ?? 0) === 0
            );
          },
          {
            timeoutMs: 30_000,
            intervalMs: 200,
            what: 'every file taken and every scan delivered after the upstream returned',
          },
        ).catch((err: unknown) => {
          const st = app.status();
          console.log(
            'DEBUG',
            JSON.stringify({
              buffer: { ...st.buffer, batches: undefined, problems: undefined },
              delivery: st.delivery,
              inbox: readdirSync(inbox),
            }),
          );
          console.log('DEBUG', warningsByMessage(mem.parsed()));
          throw err;
        });
        expect(app.status().buffer.intakePaused).toBe(false);
        expect(existsSync(join(inbox, 'failed')) ? readdirSync(join(inbox, 'failed')) : []).toEqual(
          [],
        );
      } finally {
        await app.stop();
      }
      const msgs = mem.parsed().map((l) => l.msg);
      expect(msgs.some((m) => /released the reserve/.test(m))).toBe(true);
      expect(msgs).toContain('buffer disk has room again: intake resumes');
      const log = (await (await fetch(`${sandbox.url}/_sandbox/scans`)).json()) as {
        scans: { scan: { reference: string } }[];
      };
      expect(new Set(log.scans.map((s) => s.scan.reference)).size).toBe(files * PER_FILE);
      const db = new Database(bufferPath, { readonly: true });
      try {
        expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
        expect(
          db.prepare(`SELECT count(*) FROM scans WHERE state <> 'delivered'`).pluck().get(),
        ).toBe(0);
      } finally {
        db.close();
      }
    },
  );
  it(
    'the default quota, derived from the disk: upstream down, intake pauses at the quota before the disk fills, and all is delivered once the upstream returns',
    { timeout: 90_000 },
    async () => {
      const { dir, inbox, bufferPath, mem, app } = await startOnFreshDisk(
        'derived',
        'derived.db',
        1,
      );
      const files = 20;
      const quota = app.status().buffer.quotaBytes!;
      try {
        expect(app.status().buffer.disk?.derivedQuotaBytes).toBe(quota);
        mkdirSync(join(dir, 'staging'), { recursive: true });
        for (let f = 0; f < files; f++) {
          const staged = join(dir, 'staging', `reads-${String(f).padStart(3, '0')}.txt`);
          writeFileSync(
            staged,
            Array.from({ length: PER_FILE }, (_, i) => ref(f, i)).join('\n') + '\n',
          );
          renameSync(staged, join(inbox, `reads-${String(f).padStart(3, '0')}.txt`));
        }
        // Undelivered scans reach the quota (a file's next chunk of 1000 scans would pass it): intake
        // pauses by back-pressure, files wait.
        await waitFor(
          () =>
            app.status().buffer.intakePaused === true &&
            (app.status().buffer.quota as { level?: string } | undefined)?.level !== 'ok',
          {
            timeoutMs: 40_000,
            intervalMs: 100,
            what: 'intake paused at the derived quota',
          },
        );
        expect(readdirSync(inbox).filter((n) => n.endsWith('.txt')).length).toBeGreaterThan(0);
        // Not the disk: it never filled, nothing was pruned early, the reserve stayed.
        const status = app.status();
        expect(
          (status.buffer.quota as { diskFull?: unknown } | undefined)?.diskFull,
        ).toBeUndefined();
        expect(status.buffer.disk).toMatchObject({ prunedEarlyScans: 0, reserveReleased: false });
        console.log(
          `disk-full-tmpfs: derived quota ${quota} bytes; at the pause ${status.buffer.undeliveredBytes} bytes undelivered, ${status.buffer.disk!.freeBytes} free (mark ${status.buffer.disk!.lowFreeBytes}), buffer ${status.buffer.fileBytes} bytes`,
        );
        expect(status.buffer.disk!.freeBytes!).toBeGreaterThan(status.buffer.disk!.lowFreeBytes);

        sandbox.setFaults({ errorRate: 0 });
        await waitFor(
          () => {
            const st = app.status();
            return (
              readdirSync(inbox).filter((n) => n.endsWith('.txt')).length === 0 &&
              st.buffer.undeliveredScans === 0 &&
              (st.buffer.scans.pending ?? 0) === 0
            );
          },
          {
            timeoutMs: 60_000,
            intervalMs: 200,
            what: 'every file taken and every scan delivered after the upstream returned',
          },
        );
        expect(app.status().buffer.intakePaused).toBe(false);
        expect(existsSync(join(inbox, 'failed')) ? readdirSync(join(inbox, 'failed')) : []).toEqual(
          [],
        );
      } finally {
        await app.stop();
      }
      const msgs = mem.parsed().map((l) => l.msg);
      expect(msgs.filter((m) => /SQLITE_FULL|released the reserve/.test(m))).toEqual([]);
      const log = (await (await fetch(`${sandbox.url}/_sandbox/scans`)).json()) as {
        scans: { scan: { reference: string } }[];
      };
      expect(new Set(log.scans.map((s) => s.scan.reference)).size).toBe(files * PER_FILE);
      const db = new Database(bufferPath, { readonly: true });
      try {
        expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      } finally {
        db.close();
      }
    },
  );
  it(
    'another program fills the disk and then frees it: intake pauses, nothing is lost, and it all goes on by itself',
    { timeout: 90_000 },
    async () => {
      const { dir, inbox, bufferPath, app } = await startOnFreshDisk('ballast', 'ballast.db', 0);
      const files = 10;
      const ballast = join(disk, 'other-program.log');
      try {
        // Another program takes every free byte of the disk.
        const chunk = Buffer.alloc(64 * 1024, 0x41);
        const fd = openSync(ballast, 'w');
        try {
          for (;;) writeSync(fd, chunk);
        } catch (err) {
          expect((err as NodeJS.ErrnoException).code).toBe('ENOSPC');
        } finally {
          closeSync(fd);
        }
        mkdirSync(join(dir, 'staging'), { recursive: true });
        for (let f = 0; f < files; f++) {
          const staged = join(dir, 'staging', `reads-${String(f).padStart(3, '0')}.txt`);
          writeFileSync(
            staged,
            Array.from({ length: PER_FILE }, (_, i) => ref(f, i)).join('\n') + '\n',
          );
          renameSync(staged, join(inbox, `reads-${String(f).padStart(3, '0')}.txt`));
        }
        await waitFor(() => app.status().buffer.intakePaused === true, {
          timeoutMs: 30_000,
          intervalMs: 50,
          what: 'intake paused by a disk another program filled',
        });
        expect(readdirSync(inbox).filter((n) => n.endsWith('.txt')).length).toBeGreaterThan(0);

        // The other program's file goes: intake resumes by itself, everything is delivered.
        rmSync(ballast);
        await waitFor(
          () => {
            const status = app.status();
            return (
              readdirSync(inbox).filter((n) => n.endsWith('.txt')).length === 0 &&
              status.buffer.undeliveredScans === 0 &&
              (status.buffer.scans.pending ?? 0) === 0
            );
          },
          {
            timeoutMs: 40_000,
            intervalMs: 200,
            what: 'every file taken and every scan delivered after the space returned',
          },
        );
        expect(app.status().buffer.intakePaused).toBe(false);
        expect(
          existsSync(join(dir, 'inbox', 'failed')) ? readdirSync(join(inbox, 'failed')) : [],
        ).toEqual([]);
      } finally {
        rmSync(ballast, { force: true });
        await app.stop();
      }
      const log = (await (await fetch(`${sandbox.url}/_sandbox/scans`)).json()) as {
        scans: { scan: { reference: string } }[];
      };
      expect(new Set(log.scans.map((s) => s.scan.reference)).size).toBe(files * PER_FILE);
      const db = new Database(bufferPath, { readonly: true });
      try {
        expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      } finally {
        db.close();
      }
    },
  );
  it(
    'MQTT, upstream down until the disk is full: messages stay unacknowledged at the broker, nothing is lost, all is delivered as read once the upstream returns',
    { timeout: 120_000 },
    async () => {
      const brokerDir = join(base, 'broker');
      mkdirSync(brokerDir);
      // mosquitto drops to its own user: the folders above its own must be traversable.
      chmodSync(base, 0o755);
      const broker = await startMosquitto(brokerDir, { autosaveSeconds: 60 });
      // Long references: the disk fills with fewer messages (about 2.7 KB on disk each).
      const mref = (i: number) => `MQTT-${String(i).padStart(5, '0')}-${'m'.repeat(600)}`;
      const MESSAGES = 12_000;
      const input = `{ id: line, type: mqtt, url: ${broker.url}, topics: [line/reads], clientId: sg-tmpfs-gateway, dcp: GI-01 }`;
      // A configured quota far larger than the disk: the disk, not the quota, fills.
      const { bufferPath, mem, app } = await startOnFreshDisk('mqtt', 'mqtt.db', 1, 2 ** 30, input);
      const publisher = await mqtt.connectAsync(broker.url, {
        clientId: 'sg-tmpfs-publisher',
        clean: false,
        reconnectPeriod: 200,
      });
      const inputState = () => app.status().inputs.find((i) => i.id === 'line')?.state;
      let possibleDuplicates: number;
      try {
        await waitFor(() => inputState() === 'up', {
          timeoutMs: 30_000,
          intervalMs: 50,
          what: 'the MQTT input connected',
        });
        // Every message acknowledged by the broker (QoS 1): from here on the broker answers for it.
        // In windows of 500, so the publisher's own queue stays small.
        for (let from = 0; from < MESSAGES; from += 500) {
          await Promise.all(
            Array.from({ length: Math.min(500, MESSAGES - from) }, (_, k) =>
              publisher.publishAsync('line/reads', mref(from + k), { qos: 1 }),
            ),
          );
        }
        await waitFor(
          () =>
            (app.status().buffer.quota as { diskFull?: unknown } | undefined)?.diskFull !==
              undefined && app.status().buffer.intakePaused === true,
          {
            timeoutMs: 60_000,
            intervalMs: 100,
            what: 'intake paused by a full disk',
          },
        );
        await waitFor(() => inputState() === 'paused', {
          timeoutMs: 30_000,
          intervalMs: 50,
          what: 'the MQTT input paused (disconnected)',
        });
        // Fewer stored than published: the rest wait, unacknowledged, at the broker.
        const stored = new Database(bufferPath, { readonly: true });
        let storedScans: number;
        try {
          storedScans = stored.prepare(`SELECT count(*) FROM scans`).pluck().get() as number;
        } finally {
          stored.close();
        }
        expect(storedScans).toBeGreaterThan(0);
        expect(storedScans).toBeLessThan(MESSAGES);
        expect(app.status().buffer.disk?.quotaTooLarge).toMatch(/larger than the disk can hold/);

        // The upstream returns: delivery works from the reserve, the audit yields, the input connects
        // again by itself and takes what the broker kept.
        sandbox.setFaults({ errorRate: 0 });
        await waitFor(
          async () => {
            const status = app.status();
            if (
              status.buffer.undeliveredScans !== 0 ||
              (status.buffer.scans.pending ?? 0) !== 0 ||
              inputState() !== 'up'
            )
              return false;
            return (await sandboxRefs()).size === MESSAGES;
          },
          {
            timeoutMs: 90_000,
            intervalMs: 250,
            what: 'every message stored and delivered after the upstream returned',
          },
        ).catch(async (err: unknown) => {
          const st = app.status();
          console.log(
            'DEBUG',
            JSON.stringify({
              buffer: { ...st.buffer, batches: undefined },
              delivery: st.delivery,
              inputs: st.inputs,
              got: (await sandboxRefs()).size,
            }),
          );
          console.log('DEBUG', warningsByMessage(mem.parsed()));
          console.log(
            'DEBUG',
            JSON.stringify(
              mem
                .parsed()
                .filter((l) => /input|mqtt/.test(String(l.component)))
                .slice(-30),
            ),
          );
          throw err;
        });
        expect(app.status().buffer.intakePaused).toBe(false);
        possibleDuplicates =
          (app.status().delivery as { possibleDuplicatesTotal?: number }).possibleDuplicatesTotal ??
          0;
      } finally {
        await publisher.endAsync();
        await app.stop();
        await broker.stop();
      }
      const msgs = mem.parsed().map((l) => l.msg);
      expect(msgs.some((m) => /released the reserve/.test(m))).toBe(true);
      expect(msgs).toContain('buffer disk has room again: intake resumes');
      expect(msgs.filter((m) => m === 'message rejected')).toEqual([]);
      // Exactly what was read: each message once (a resend of a committed one is recognised), no
      // other reference; more uploads of one only if counted as a possible duplicate.
      const log = (await (await fetch(`${sandbox.url}/_sandbox/scans`)).json()) as {
        scans: { scan: { reference: string } }[];
      };
      const refs = log.scans.map((s) => s.scan.reference);
      expect(new Set(refs)).toEqual(new Set(Array.from({ length: MESSAGES }, (_, i) => mref(i))));
      // Possible duplicates are an upper bound (see the first test).
      expect(refs.length).toBeLessThanOrEqual(MESSAGES + possibleDuplicates);
      const db = new Database(bufferPath, { readonly: true });
      try {
        expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
        expect(
          db.prepare(`SELECT count(*) FROM scans WHERE state <> 'delivered'`).pluck().get(),
        ).toBe(0);
        expect(db.prepare(`SELECT count(*) FROM reads WHERE outcome <> 'scan'`).pluck().get()).toBe(
          0,
        );
      } finally {
        db.close();
      }
    },
  );

  /** The distinct references the sandbox received. */
  async function sandboxRefs(): Promise<Set<string>> {
    const log = (await (await fetch(`${sandbox.url}/_sandbox/scans`)).json()) as {
      scans: { scan: { reference: string } }[];
    };
    return new Set(log.scans.map((s) => s.scan.reference));
  }
});

/**
 * Early pruning takes only the shortfall, on a real 40 MiB tmpfs that another program's file
 * fills: the buffer holds delivered scans of three days ago (which may yield) and of an hour ago
 * (the protected window, `earlyPruneKeepHours` 24). First the other file leaves less room than
 * every old scan could give back: nothing is pruned, and the page says why. Then it leaves 1 MiB
 * short of the mark: the oldest scans go, about 1 MiB of them, the page warns with the count and
 * span, and `trace` of a pruned item says when and why.
 */
describe('a full disk keeps what can be kept (40 MiB tmpfs filled by another file)', () => {
  const MIB = 1024 * 1024;
  const OLD_BATCHES = 10;
  const PER_BATCH = 500;
  const RECENT = 1000;
  let base: string;
  let disk: string;
  let mounted = false;
  let sandbox: RunningSandbox;

  beforeAll(async () => {
    base = mkdtempSync(join(tmpdir(), 'sg-tmpfs-keep-'));
    disk = join(base, 'disk');
    mkdirSync(disk);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=40m', 'tmpfs', disk], { stdio: 'pipe' });
    mounted = true;
    sandbox = await startSandbox({ port: 0, processingDelayMs: 0 });
  });

  afterAll(async () => {
    await sandbox?.close();
    if (mounted) execFileSync('umount', [disk], { stdio: 'pipe' });
    rmSync(base, { recursive: true, force: true });
  });

  /** Commits `refs` read at `at`, batches them and finishes the batch at `at` (delivered). */
  function delivered(s: BufferStore, refs: string[], at: number): void {
    s.intake.commitIntake(
      refs.map((reference) => ({
        inputId: 'inbox',
        receivedAt: new Date(at),
        raw: Buffer.from(reference),
        outcome: 'scan' as const,
        scan: {
          reference,
          dcpKey: 'GI-01',
          instant: new Date(at),
          body: JSON.stringify({ reference, pad: 'p'.repeat(1000) }),
        },
      })),
      at,
    );
    const b = formBatch(s, {
      maxScans: 10_000,
      maxBytes: 1e9,
      mode: 'direct',
      nowIso: new Date(at).toISOString(),
    })!;
    s.batches.updateBatch(b.id, { state: 'uploaded', requestId: String(b.id) });
    s.batches.finishBatch(b.id, { state: 'Success', failures: [] }, new Date(at).toISOString());
  }

  const free = () => statfsSync(disk).bavail * statfsSync(disk).bsize;

  it(
    'prunes nothing when it cannot help and says so; then only the shortfall, oldest first, a warning with a code, and trace explains',
    { timeout: 120_000 },
    async () => {
      const bufferPath = join(disk, 'buffer.db');
      const now = Date.now();
      const old = now - 3 * 24 * 3600_000;
      const seed = BufferStore.openAt(bufferPath);
      for (let b = 0; b < OLD_BATCHES; b++)
        delivered(
          seed,
          Array.from({ length: PER_BATCH }, (_, i) => `OLD-${b}-${i}`),
          old + b * 60_000,
        );
      delivered(
        seed,
        Array.from({ length: RECENT }, (_, i) => `RECENT-${i}`),
        now - 3600_000,
      );
      seed.close();

      const dir = join(base, 'gw');
      mkdirSync(join(dir, 'inbox'), { recursive: true });
      const file = join(dir, 'config.yaml');
      writeFileSync(
        file,
        `site: { id: disk, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${bufferPath}, earlyPruneKeepHours: 24 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
inputs:
  - { id: inbox, type: files, dir: ${join(dir, 'inbox')}, format: lines, dcp: GI-01 }
`,
      );
      const mem = memoryLogger('info');
      const app: App = buildApp(
        loadConfig(file, { baseDir: dir, env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET } }),
        { logger: mem.logger },
      );
      await app.start();
      const other = join(disk, 'other-program.dat');
      const count = (like: string) => {
        const db = new Database(bufferPath, { readonly: true });
        try {
          return db
            .prepare(`SELECT count(*) FROM scan_rows WHERE reference LIKE ?`)
            .pluck()
            .get(like) as number;
        } finally {
          db.close();
        }
      };
      try {
        const lowFree = app.status().buffer.disk!.lowFreeBytes;
        const codes = () => (app.status().healthProblems ?? []).map((p) => p.code);

        // 1. Another program leaves 0.5 MiB: even every old scan (about 8 MiB) cannot cover
        // the shortfall of the mark. Nothing is pruned; the page says so.
        writeFileSync(other, Buffer.alloc(free() - MIB / 2, 0x41));
        await waitFor(() => app.status().buffer.disk?.pruneCannotHelp !== undefined, {
          timeoutMs: 20_000,
          intervalMs: 100,
          what: 'the disk guard says pruning cannot help',
        });
        expect(app.status().buffer.disk!.pruneCannotHelp).toMatch(
          /^pruning cannot help: \d+ bytes needed, at most \d+ recoverable from delivered scans older than 24 h; nothing was pruned$/,
        );
        expect(codes()).toContain(HealthCodes.BUFFER_DISK_LOW);
        expect(app.status().buffer.disk!.prunedEarlyScans).toBe(0);
        expect(count('OLD-%')).toBe(OLD_BATCHES * PER_BATCH);
        expect(
          mem.parsed().filter((l) => /pruning cannot help/.test(l.msg)),
          'warned once, not at every check',
        ).toHaveLength(1);

        // 2. It frees room until the disk is 1 MiB short of the mark: only that is pruned.
        truncateSync(other, statSync(other).size - (lowFree - MIB - free()));
        await waitFor(
          () => (app.status().buffer.disk?.prunedEarlyScans ?? 0) > 0 && free() >= lowFree,
          {
            timeoutMs: 20_000,
            intervalMs: 100,
            what: 'the shortfall pruned and given back to the disk',
          },
        );
        const status = app.status();
        const d = status.buffer.disk!;
        // About 1 MiB of scans of some 1.7 KB each: a few hundred, far from the 5,000 old ones.
        expect(d.prunedEarlyScans).toBeLessThan((OLD_BATCHES * PER_BATCH) / 4);
        expect(count('OLD-%')).toBe(OLD_BATCHES * PER_BATCH - d.prunedEarlyScans);
        // Oldest first: the last old batch and the protected hour are whole.
        expect(count(`OLD-${OLD_BATCHES - 1}-%`)).toBe(PER_BATCH);
        expect(count('RECENT-%')).toBe(RECENT);
        expect(count('OLD-0-%')).toBeLessThan(PER_BATCH);
        expect(d.pruneCannotHelp).toBeUndefined();
        expect(d.auditLost).toMatchObject({
          scans: d.prunedEarlyScans,
          firstReadAt: new Date(old).toISOString(),
        });
        expect(d.auditLost!.reason).toMatch(
          /^the disk ran low: \d+ bytes free, below the mark of \d+$/,
        );
        const problem = (status.healthProblems ?? []).find(
          (p) => p.code === HealthCodes.AUDIT_PRUNED_EARLY,
        );
        expect(problem?.severity).toBe('degraded');
        expect(problem?.sentence).toContain(`${d.prunedEarlyScans} delivered scans (read between`);
        expect(codes()).not.toContain(HealthCodes.BUFFER_DISK_LOW);
        // Said at warn with the count and span; a second, smaller step may follow when the
        // estimate of bytes per scan fell a little short (each check measures again).
        const warns = mem
          .parsed()
          .filter((l) => /only what frees the shortfall/.test(l.msg)) as unknown as {
          level: number;
          scans: number;
          firstReadAt: string;
          lastReadAt: string;
        }[];
        expect(warns.length).toBeGreaterThan(0);
        expect(warns.every((w) => w.level === 40 && w.firstReadAt && w.lastReadAt)).toBe(true);
        expect(warns.reduce((n, w) => n + w.scans, 0)).toBe(d.prunedEarlyScans);

        // trace, beside the running gateway, of an item pruned early.
        const gone = (() => {
          const db = new Database(bufferPath, { readonly: true });
          try {
            const kept = new Set(
              db
                .prepare(`SELECT reference FROM scan_rows WHERE reference LIKE 'OLD-0-%'`)
                .pluck()
                .all() as string[],
            );
            return Array.from({ length: PER_BATCH }, (_, i) => `OLD-0-${i}`).find(
              (r) => !kept.has(r),
            )!;
          } finally {
            db.close();
          }
        })();
        expect(gone).toMatch(/^OLD-0-/);
        const stdout = new PassThrough();
        let out = '';
        stdout.on('data', (c: Buffer) => (out += c.toString()));
        const program = new Command('scan-gateway').exitOverride();
        registerTraceCommand(program, {
          stdout,
          stderr: new PassThrough(),
          cwd: dir,
          env: {},
        });
        await program
          .parseAsync(['node', 'scan-gateway', 'trace', gone, '--buffer', bufferPath])
          .catch((e: unknown) => {
            if (!(e instanceof CommandExit)) throw e;
          });
        expect(out).toContain(`${gone}: not in the buffer`);
        expect(out).toMatch(
          new RegExp(
            `Scans of ${gone} were pruned early at .*because the disk ran low: \\d+ bytes free, below the mark of ${lowFree} \\(\\d+ delivered scans pruned then, read between`,
          ),
        );
      } finally {
        await app.stop();
        rmSync(other, { force: true });
      }
      const db = new Database(bufferPath, { readonly: true });
      try {
        expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      } finally {
        db.close();
      }
    },
  );
});
