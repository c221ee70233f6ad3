import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferStore } from '../../src/buffer/store.js';
import { configSchema } from '../../src/config/schema.js';
import { ErrorCodes } from '../../src/errors.js';
import { fileSinkOf } from '../../src/inputs/files/file-sink.js';
import { filesKind } from '../../src/inputs/files/kind.js';
import { filesInputSchema } from '../../src/inputs/files/schema.js';
import { messageSinkOf } from '../../src/inputs/mqtt/message-sink.js';
import { mqttKind } from '../../src/inputs/mqtt/kind.js';
import { mqttInputSchema } from '../../src/inputs/mqtt/schema.js';
import type { IntakeSink } from '../../src/inputs/types.js';
import { Intake } from '../../src/intake/intake.js';
import { silentLogger } from '../../src/log.js';
import { mappingContext } from '../../src/mapping/map-read.js';

/**
 * The shared sink carries only `submit`; the files and MQTT kinds ask the sink they are given for
 * their own extension (a file's hash, a message's identity committed with the items). The intake
 * must be that sink, and a sink that is not must be refused rather than lose the records.
 */

const config = configSchema.parse({
  site: { id: 'sinks', timezone: 'Europe/Berlin' },
  upstream: {
    baseUrl: 'http://127.0.0.1:1',
    authUrl: 'http://127.0.0.1:1',
    clientId: 'demo-client',
  },
  dcps: [{ key: 'GI-01', kind: 'goodsIn', productModelKey: 'PACK-A', supplierKey: 'SUP-0042' }],
  inputs: [{ id: 'inbox', type: 'files', dir: '/tmp/unused', dcp: 'GI-01' }],
});

const files = filesInputSchema.parse({
  id: 'inbox',
  type: 'files',
  dir: '/tmp/unused',
  dcp: 'GI-01',
});
const mqtt = mqttInputSchema.parse({
  id: 'mq',
  type: 'mqtt',
  dcp: 'GI-01',
  url: 'mqtt://127.0.0.1:1',
  topics: ['t/#'],
  clientId: 'gw-sinks',
});

/** A sink with only the shared `submit`: it would commit a file's or a message's items without their record. */
const plain: IntakeSink = { submit: async () => {} };

let store: BufferStore | undefined;
afterEach(() => store?.close());

describe("the kinds' sink extensions", () => {
  it('are implemented by the intake: the files and MQTT kinds take it as their sink', () => {
    store = BufferStore.openAt(join(mkdtempSync(join(tmpdir(), 'sg-sinks-')), 'buffer.db'));
    const intake = new Intake({ store, mapping: mappingContext(config), logger: silentLogger() });
    expect(fileSinkOf(intake, 'inbox')).toBe(intake);
    expect(messageSinkOf(intake, 'mq')).toBe(intake);
  });

  it('refuse a sink that records no files or messages (SCANGW_E_INTERNAL), before an adapter is made', async () => {
    expect(() => fileSinkOf(plain, 'inbox')).toThrow(
      /files input inbox: its sink records no files/,
    );
    expect(() => messageSinkOf(plain, 'mq')).toThrow(/mqtt input mq: its sink records no messages/);
    const deps = { sink: plain, logger: silentLogger(), env: {} };
    await expect(filesKind.create(files, deps)).rejects.toMatchObject({
      code: ErrorCodes.INTERNAL,
    });
    await expect(mqttKind.create(mqtt, deps)).rejects.toMatchObject({ code: ErrorCodes.INTERNAL });
  });
});
