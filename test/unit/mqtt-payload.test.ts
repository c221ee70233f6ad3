import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isTopicFilter, mqttInputSchema } from '../../src/inputs/mqtt/schema.js';
import { createHash } from 'node:crypto';
import { AckQueue, CommitsInProgress } from '../../src/inputs/mqtt/mqtt-acks.js';
import { mqttClientOptions, safeUrl, statusTopicOf } from '../../src/inputs/mqtt/mqtt-options.js';
import { dcpFromTopic, messageToItem } from '../../src/inputs/mqtt/mqtt-payload.js';
import type { IntakeItem } from '../../src/inputs/types.js';
import { samplePath } from '../helpers/samples.js';

const AT = new Date('2026-11-18T06:00:00Z');
const base = {
  id: 'mq',
  type: 'mqtt',
  dcp: 'L1',
  url: 'mqtt://broker:1883',
  topics: ['plant/+/scans'],
  clientId: 'gw-1',
};
const cfg = (over: Record<string, unknown> = {}) => mqttInputSchema.parse({ ...base, ...over });

function show(item: IntakeItem): unknown {
  return item.kind === 'read'
    ? {
        code: item.read.raw.toString('latin1'),
        ...(item.read.dcpKey ? { dcp: item.read.dcpKey } : {}),
        ...(item.read.sourceTime ? { ts: item.read.sourceTime } : {}),
      }
    : { rejected: item.rejection.reason };
}

describe('dcpFromTopic', () => {
  it('takes the {dcp} level; + matches one level, # the rest; a topic outside the pattern gives none', () => {
    expect(dcpFromTopic('plant/{dcp}/scans', 'plant/EOL-3/scans')).toBe('EOL-3');
    expect(dcpFromTopic('+/{dcp}/scans', 'berlin/EOL-3/scans')).toBe('EOL-3');
    expect(dcpFromTopic('plant/{dcp}/#', 'plant/GI-1/a/b')).toBe('GI-1');
    expect(dcpFromTopic('plant/{dcp}/#', 'plant/GI-1')).toBe('GI-1');
    expect(dcpFromTopic('plant/{dcp}/scans', 'plant/EOL-3/scans/extra')).toBeUndefined();
    expect(dcpFromTopic('plant/{dcp}/scans', 'plant/EOL-3')).toBeUndefined();
    expect(dcpFromTopic('plant/{dcp}/scans', 'other/EOL-3/scans')).toBeUndefined();
    expect(dcpFromTopic('plant/{dcp}/scans', 'plant//scans')).toBeUndefined();
  });
});

describe('messageToItem', () => {
  it('text: the payload is the barcode, bytes kept, a trailing CR/LF dropped; DCP from the topic', () => {
    const c = cfg({ dcpFromTopic: 'plant/{dcp}/scans' });
    const item = messageToItem(
      c,
      'plant/EOL-3/scans',
      Buffer.from(']d2010\x1d21X\r\n', 'latin1'),
      AT,
    );
    expect(show(item)).toEqual({ code: ']d2010\x1d21X', dcp: 'EOL-3' });
    expect(item).toMatchObject({
      read: { inputId: 'mq', receivedAt: AT, origin: { topic: 'plant/EOL-3/scans' } },
    });
    expect(show(messageToItem(c, 'plant/EOL-3/scans', Buffer.from('\r\n'), AT))).toEqual({
      rejected: 'empty payload',
    });
    expect(show(messageToItem(c, 'elsewhere', Buffer.from('X'), AT))).toEqual({
      rejected: 'topic "elsewhere" does not match dcpFromTopic "plant/{dcp}/scans"',
    });
  });

  it('json: every line of the reader sample, with station as DCP and parent as parents', () => {
    const c = cfg({ format: 'json', fields: { dcp: 'station', parents: 'parent' } });
    const lines = readFileSync(samplePath('mqtt-reader-payloads.ndjson'), 'utf8')
      .trim()
      .split('\n');
    const items = lines.map((l) => messageToItem(c, 'cam', Buffer.from(l), AT));
    expect(items.map(show)).toEqual([
      {
        code: ']Q3010952123454321321MOD-000042\x1d240BM-48V-16S',
        dcp: 'EOL-3',
        ts: '2026-11-18T07:01:02.123Z',
      },
      {
        code: ']Q3010952123454321321MOD-000043\x1d240BM-48V-16S',
        dcp: 'EOL-3',
        ts: '2026-11-18T07:01:09.870Z',
      },
      { code: 'NoRead', dcp: 'EOL-3', ts: '2026-11-18T07:01:15.002Z' },
      { code: ']d1C24A0K3B0712345', dcp: 'SOP-3', ts: '2026-11-18T07:02:00.000Z' },
      { code: ']d1C24A0K3B0712346', dcp: 'SOP-3', ts: '2026-11-18T07:02:01.500Z' },
    ]);
    expect(items[4]).toMatchObject({
      read: { parents: ['MOD-000043'], attributes: { cellVoltage: '3.652', ocvTest: 'pass' } },
    });
  });

  it('json: nested field paths, and the JSON DCP wins over the topic DCP', () => {
    const c = cfg({
      format: 'json',
      fields: { code: 'data.barcode', time: 'data.at', dcp: 'meta.dcp' },
      dcpFromTopic: 'plant/{dcp}/scans',
    });
    const payload = JSON.stringify({
      data: { barcode: 'N-1', at: '2026-11-18T07:00:00Z' },
      meta: { dcp: 'SOP-9' },
    });
    expect(show(messageToItem(c, 'plant/EOL-3/scans', Buffer.from(payload), AT))).toEqual({
      code: 'N-1',
      dcp: 'SOP-9',
      ts: '2026-11-18T07:00:00Z',
    });
    expect(
      show(messageToItem(c, 'plant/EOL-3/scans', Buffer.from('{"data":{"barcode":"N-2"}}'), AT)),
    ).toEqual({ code: 'N-2', dcp: 'EOL-3' });
  });

  it('json: too big, not UTF-8, not JSON, or not a read become rejections with the reason and the first bytes', () => {
    const c = cfg({ format: 'json', maxPayloadBytes: 100 });
    const cases: [Buffer, RegExp][] = [
      [Buffer.alloc(101, 0x41), /payload of 101 bytes is larger than maxPayloadBytes \(100\)/],
      [Buffer.from([0x7b, 0xff, 0x7d]), /not valid UTF-8/],
      [Buffer.from('{"code":'), /payload is not JSON/],
      [Buffer.from('"just text"'), /expected a JSON object, got text "just text"/],
      [
        Buffer.from('{"code":"A","parents":[1]}'),
        /field "parents\[0\]" must be non-empty text, got number 1/,
      ],
      [
        Buffer.from('{"code":"A","attributes":{"x":null}}'),
        /field "attributes.x" must be text, a number or a boolean, got null/,
      ],
      [Buffer.from('{"code":"A","dcp":"has space"}'), /field "dcp" must not contain white space/],
    ];
    for (const [payload, reason] of cases) {
      const item = messageToItem(c, 't', payload, AT);
      expect(item.kind, payload.toString()).toBe('rejection');
      if (item.kind === 'rejection') {
        expect(item.rejection.reason).toMatch(reason);
        expect(item.rejection.raw).toEqual(payload);
        expect(item.rejection.origin).toEqual({ topic: 't' });
      }
    }
  });

  it('keeps only the first 4096 bytes of a huge rejected payload', () => {
    const item = messageToItem(cfg(), 't', Buffer.alloc(2 * 1024 * 1024, 0x42), AT);
    expect(item.kind === 'rejection' && item.rejection.raw.length).toBe(4096);
    expect(item.kind === 'rejection' && item.rejection.reason).toMatch(
      /first 4096 of 2097152 bytes kept/,
    );
  });
});

describe('AckQueue', () => {
  it('sends PUBACKs in arrival order: a committed message waits for the ones before it', () => {
    const sent: number[] = [];
    const q = new AckQueue((id) => sent.push(id));
    const [a, b, c] = [q.add(1), q.add(2), q.add(3)];
    q.complete(c);
    q.complete(b);
    expect(sent).toEqual([]);
    q.complete(a);
    expect(sent).toEqual([1, 2, 3]);
  });

  it('sends nothing once its connection is gone', () => {
    const sent: number[] = [];
    const q = new AckQueue((id) => sent.push(id));
    const a = q.add(7);
    q.reset();
    q.complete(a);
    expect(sent).toEqual([]);
    expect(q.isReset).toBe(true);
  });
});

describe('CommitsInProgress', () => {
  it('lets a resend wait for the commit under way of the same message, and forgets it once settled', async () => {
    const inProgress = new CommitsInProgress();
    const id = (packetId: number, payload: string) => ({
      packetId,
      topic: 't',
      payloadSha256: createHash('sha256').update(payload).digest(),
    });
    const k1 = CommitsInProgress.key(id(1, 'A'));
    expect(CommitsInProgress.key(id(2, 'A'))).not.toBe(k1);
    expect(CommitsInProgress.key(id(1, 'B'))).not.toBe(k1);
    let finish!: () => void;
    inProgress.add(k1, new Promise<void>((resolve) => (finish = resolve)));
    let waited = false;
    const resend = inProgress.earlier(k1).then(() => (waited = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(waited).toBe(false);
    finish();
    await resend;
    expect(inProgress.size).toBe(0);
    inProgress.add(k1, Promise.reject(new Error('refused')));
    await inProgress.earlier(k1); // a failed commit is waited for too, and never rejects here
    expect(inProgress.size).toBe(0);
  });
});

describe('mqtt input configuration', () => {
  it('has the documented defaults', () => {
    expect(cfg()).toMatchObject({
      format: 'text',
      qos: 1,
      protocolVersion: 5,
      maxInFlight: 1000,
      maxPayloadBytes: 262144,
      fields: { code: 'code', time: 'ts' },
    });
    expect(statusTopicOf(cfg())).toBe('scan-gateway/gw-1/status');
    expect(statusTopicOf(cfg({ statusTopic: false }))).toBeUndefined();
  });

  it('refuses a literal password, in its own key or in the URL, and half a client certificate', () => {
    expect(
      mqttInputSchema.safeParse({ ...base, username: 'u', password: 'secret' }).error?.issues[0]
        ?.message,
    ).toMatch(/literal password is refused/);
    expect(
      mqttInputSchema.safeParse({ ...base, url: 'mqtt://u:secret@broker' }).error?.issues[0]
        ?.message,
    ).toMatch(/literal password is refused/);
    expect(
      mqttInputSchema.safeParse({ ...base, certFile: '/c.pem' }).error?.issues[0],
    ).toMatchObject({ path: ['keyFile'] });
    expect(
      mqttInputSchema.safeParse({ ...base, passwordEnv: 'PW' }).error?.issues[0],
    ).toMatchObject({ path: ['username'] });
    expect(mqttInputSchema.safeParse({ ...base, url: 'http://broker' }).success).toBe(false);
    expect(mqttInputSchema.safeParse({ ...base, dcpFromTopic: 'plant/scans' }).success).toBe(false);
    expect(mqttInputSchema.safeParse({ ...base, topics: ['a/#/b'] }).success).toBe(false);
    expect(safeUrl('mqtts://user@broker:8883')).toBe('mqtts://broker:8883');
  });

  it('accepts valid topic filters only', () => {
    expect(['a/b', 'a/+/c', '#', 'a/#', '+'].every(isTopicFilter)).toBe(true);
    expect(['a#', 'a/b+', 'a/#/c'].some(isTopicFilter)).toBe(false);
  });

  it('builds a persistent-session client: clean false, session expiry, receive maximum, will, password from the environment', async () => {
    const options = await mqttClientOptions(cfg({ username: 'gw', passwordEnv: 'MQTT_PW' }), {
      MQTT_PW: ' s3cret\n',
    });
    expect(options).toMatchObject({
      clientId: 'gw-1',
      clean: false,
      protocolVersion: 5,
      username: 'gw',
      password: 's3cret',
      rejectUnauthorized: true,
      properties: {
        sessionExpiryInterval: 604800,
        receiveMaximum: 1000,
        maximumPacketSize: 262144 + 65536 + 1024,
      },
      will: { topic: 'scan-gateway/gw-1/status', qos: 1, retain: true },
    });
    await expect(
      mqttClientOptions(cfg({ username: 'gw', passwordEnv: 'MQTT_PW' }), {}),
    ).rejects.toMatchObject({ code: 'SCANGW_E_SECRET' });
    await expect(
      mqttClientOptions(cfg({ username: 'gw', passwordFile: '/nonexistent/pw' }), {}),
    ).rejects.toMatchObject({ code: 'SCANGW_E_SECRET' });
    await expect(
      mqttClientOptions(cfg({ caFile: '/nonexistent/ca.pem' }), {}),
    ).rejects.toMatchObject({ code: 'SCANGW_E_INPUT' });
  });
});
