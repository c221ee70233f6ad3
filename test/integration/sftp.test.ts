import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import ssh2 from 'ssh2';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { configSchema, deliverySchema, sftpSchema } from '../../src/config/schema.js';
import { Batcher } from '../../src/delivery/batcher.js';
import {
  batchBodyChunks,
  batchFileName,
  hashBatchBody,
  remoteJoin,
} from '../../src/delivery/sftp-transfer.js';
import { StatusTracker } from '../../src/delivery/status-tracker.js';
import { silentLogger } from '../../src/log.js';
import { hostKeyFingerprint } from '@scan-gateway/contract/host-key';
import { waitFor } from '../helpers/wait.js';
import { createHash } from 'node:crypto';
import { queriesOf } from '../helpers/queries.js';

// SFTP delivery without a server: the file name, the fingerprint as ssh-keygen prints it, the body
// streamed in pages, the batch counts of an SFTP batch, the config rules, and the status tracker's
// door for SFTP batches (transferred, then the service's word by file name or by references).

let store: BufferStore | undefined;
afterEach(() => store?.close());

function scan(reference: string, pad = 0): IntakeRecord {
  const body = JSON.stringify({ reference, dcpKey: 'GI-01', note: 'x'.repeat(pad) });
  return {
    inputId: 'in',
    receivedAt: new Date(0),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: { reference, dcpKey: 'GI-01', instant: new Date(0), body },
  };
}

function newStore(): BufferStore {
  return (store = BufferStore.openAt(
    join(mkdtempSync(join(tmpdir(), 'sg-sftp-unit-')), 'buffer.db'),
  ));
}

describe('SFTP pieces', () => {
  it('fills the file name template and joins the remote folder', () => {
    const sha = 'ab'.repeat(32);
    expect(
      batchFileName('{siteId}-{batchId}-{sha256:12}.json', {
        siteId: 'plant-7',
        batchId: 42,
        sha256: sha,
      }),
    ).toBe('plant-7-42-abababababab.json');
    expect(batchFileName('{batchId}-{sha256}.json', { siteId: 's', batchId: 1, sha256: sha })).toBe(
      `1-${sha}.json`,
    );
    expect(remoteJoin('.', 'a.json')).toBe('a.json');
    expect(remoteJoin('/in/', 'a.json')).toBe('/in/a.json');
  });

  it('prints a host key fingerprint exactly as ssh-keygen -lf does', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-fp-'));
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, 'k')]);
    const line = execFileSync('ssh-keygen', ['-lf', join(dir, 'k.pub')], { encoding: 'utf8' });
    const parsed = ssh2.utils.parseKey(readFileSync(join(dir, 'k.pub')));
    if (parsed instanceof Error) throw parsed;
    expect(line).toContain(hostKeyFingerprint(parsed.getPublicSSH()));
  });

  it('streams a batch body in pages that join to exactly the stored body, and hashes it', async () => {
    const s = newStore();
    s.intake.commitIntake(
      Array.from({ length: 300 }, (_, i) => scan(`B-${i}`, 500)),
      0,
    );
    const b = s.batches.writeBatch({
      mode: 'sftp',
      scanIds: Array.from({ length: 300 }, (_, i) => i + 1),
      bytes: 0,
      nowIso: new Date(0).toISOString(),
    })!;
    s.batches.updateBatch(b.id, { bytes: Buffer.byteLength(s.batches.batchBody(b.id)) });
    const chunks: Buffer[] = [];
    for await (const c of batchBodyChunks(s.batches, b.id)) chunks.push(c);
    expect(chunks.length).toBeGreaterThan(3);
    expect(Math.max(...chunks.map((c) => c.length))).toBeLessThanOrEqual(64 * 1024 + 600);
    expect(Buffer.concat(chunks).toString()).toBe(s.batches.batchBody(b.id));
    const { sha256, bytes } = await hashBatchBody(s.batches, b.id);
    expect(sha256).toBe(createHash('sha256').update(s.batches.batchBody(b.id)).digest('hex'));
    expect(bytes).toBe(Buffer.byteLength(s.batches.batchBody(b.id)));
  });

  it('stores an SFTP batch as route sftp: read back as mode sftp and counted under sftp', () => {
    const s = newStore();
    s.intake.commitIntake([scan('A'), scan('B')], 0);
    const b = s.batches.writeBatch({
      mode: 'sftp',
      scanIds: [1, 2],
      bytes: 0,
      nowIso: new Date(0).toISOString(),
    })!;
    expect(b.mode).toBe('sftp');
    s.batches.finishBatch(b.id, { state: 'transferred' }, new Date(0).toISOString());
    expect(queriesOf(s).batchCounts()).toEqual([{ mode: 'sftp', state: 'transferred', count: 1 }]);
  });

  it('forms SFTP batches by sftpMaxBytes in sftp mode, and a backlog by largeBatchRoute in auto mode', () => {
    const s = newStore();
    s.intake.commitIntake(
      Array.from({ length: 50 }, (_, i) => scan(`C-${i}`, 100)),
      0,
    );
    const sftp = new Batcher({
      store: s,
      config: deliverySchema.parse({ mode: 'sftp', sftpMaxBytes: 2000 }),
      logger: silentLogger(),
      now: () => 0,
    });
    const first = sftp.form()!;
    expect(first.mode).toBe('sftp');
    expect(first.bytes).toBeLessThanOrEqual(2000);
    const auto = new Batcher({
      store: s,
      config: deliverySchema.parse({ mode: 'auto', maxBatchScans: 10, largeBatchRoute: 'sftp' }),
      logger: silentLogger(),
      now: () => 0,
    });
    expect(auto.form()!.mode).toBe('sftp');
  });

  it('needs upstream.sftp for an SFTP route, a fingerprint as hostKey, and a file name with {batchId}', () => {
    const base = {
      site: { id: 's', timezone: 'Europe/Berlin' },
      upstream: { baseUrl: 'https://up.example', authUrl: 'https://auth.example', clientId: 'c' },
      dcps: [{ key: 'GI-01', kind: 'goodsIn', productModelKey: 'P', supplierKey: 'S' }],
      inputs: [],
    };
    const missing = configSchema.safeParse({ ...base, delivery: { mode: 'sftp' } });
    expect(missing.success).toBe(false);
    expect(JSON.stringify(missing.error?.issues)).toContain('upstream');
    const auto = configSchema.safeParse({
      ...base,
      delivery: { mode: 'auto', largeBatchRoute: 'sftp' },
    });
    expect(auto.success).toBe(false);
    expect(sftpSchema.safeParse({ host: 'h', hostKey: 'yes' }).success).toBe(false);
    expect(
      sftpSchema.safeParse({
        host: 'h',
        hostKey: 'SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8',
        fileName: 'fixed.json',
      }).success,
    ).toBe(false);
    const ok = sftpSchema.parse({
      host: 'h',
      hostKey: 'SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8',
    });
    expect(ok).toMatchObject({
      port: 22,
      remoteDir: '.',
      fileName: '{siteId}-{batchId}-{sha256:12}.json',
    });
  });
});

describe('status tracker and SFTP batches', () => {
  function setup() {
    const s = newStore();
    const tracker = new StatusTracker({
      store: s,
      api: { getScanStatus: () => Promise.reject(new Error('an SFTP batch is never polled')) },
      config: deliverySchema.parse({}),
      logger: silentLogger(),
      now: () => 1_700_000_000_000,
      concurrency: 1,
      onResend: () => undefined,
    });
    s.intake.commitIntake([scan('A'), scan('B'), scan('C')], 0);
    const b = s.batches.writeBatch({
      mode: 'sftp',
      scanIds: [1, 2, 3],
      bytes: 0,
      nowIso: new Date(0).toISOString(),
    })!;
    s.batches.updateBatch(b.id, {
      state: 'uploaded',
      remotePath: '/in/s-1-abc.json',
      sha256: 'abc',
    });
    return { s, tracker, id: b.id };
  }

  it('ends an uploaded SFTP batch in transferred, then takes the service word named by file name', () => {
    const t = setup();
    expect(t.tracker.apply(t.id, { state: 'transferred', requestId: '' })).toBe('done');
    expect(t.s.batches.batch(t.id)).toMatchObject({ state: 'done', upstreamState: 'transferred' });
    expect(t.s.reports.scanCounts()).toMatchObject({ delivered: 3 });
    const answer = {
      state: 'HasFailures',
      requestId: '77',
      processed: 3,
      failed: 1,
      failures: [{ reference: 'B', reason: 'Invalid DCP' }],
    };
    expect(t.tracker.apply({ fileName: 's-1-abc.json' }, answer)).toBe('done');
    expect(t.s.batches.batch(t.id)).toMatchObject({
      upstreamState: 'HasFailures',
      requestId: '77',
      failed: 1,
    });
    expect(t.s.reports.scanCounts()).toMatchObject({ delivered: 2, failed: 1 });
    // Once the service spoke, a later answer changes nothing; an unknown name is ignored.
    expect(
      t.tracker.apply({ fileName: 's-1-abc.json' }, { state: 'Success', requestId: '77' }),
    ).toBe('ignored');
    expect(t.tracker.apply({ fileName: 'other.json' }, { state: 'Success', requestId: '1' })).toBe(
      'ignored',
    );
  });

  it('finds a transferred batch by the references of its scans, and only a batch holding all of them', () => {
    const t = setup();
    t.tracker.apply(t.id, { state: 'transferred', requestId: '' });
    expect(t.tracker.apply({ references: ['A', 'Z'] }, { state: 'Failed', requestId: '9' })).toBe(
      'ignored',
    );
    expect(
      t.tracker.apply(
        { references: ['C', 'A'] },
        {
          state: 'Failed',
          requestId: '9',
          failures: [
            { reference: 'A', reason: 'x' },
            { reference: 'C', reason: 'y' },
          ],
        },
      ),
    ).toBe('done');
    expect(t.s.batches.batch(t.id)).toMatchObject({ upstreamState: 'Failed' });
  });

  it('ends an uploaded SFTP batch in transferred at once while status events flow (nobody to ask: the safety interval is for polls)', async () => {
    const s = newStore();
    const tracker = new StatusTracker({
      store: s,
      api: { getScanStatus: () => Promise.reject(new Error('an SFTP batch is never polled')) },
      config: deliverySchema.parse({}),
      logger: silentLogger(),
      now: () => Date.now(),
      concurrency: 1,
      onResend: () => undefined,
      pace: () => ({ events: true, safetyPollMs: 600_000 }),
    });
    s.intake.commitIntake([scan('A')], 0);
    const b = s.batches.writeBatch({
      mode: 'sftp',
      scanIds: [1],
      bytes: 0,
      nowIso: new Date().toISOString(),
    })!;
    s.batches.updateBatch(b.id, {
      state: 'uploaded',
      remotePath: '/in/s-1-abc.json',
      sha256: 'abc',
      uploadedAt: new Date().toISOString(),
      nextAttemptAt: 0,
    });
    tracker.start();
    try {
      await waitFor(() => s.batches.batch(b.id)?.state === 'done', {
        what: 'transferred',
        timeoutMs: 30_000,
      });
      expect(s.batches.batch(b.id)?.upstreamState).toBe('transferred');
    } finally {
      await tracker.stop();
    }
  });
});
