import { createHash } from 'node:crypto';
import { PassThrough } from 'node:stream';
import mqttPacket from 'mqtt-packet';
import { describe, expect, it } from 'vitest';
import {
  PublishCuts,
  PublishLimiter,
  type PublishCut,
} from '../../src/inputs/mqtt/mqtt-publish-limit.js';

/** mqtt-packet (mqtt.js's own parser and generator, a dependency of mqtt) on both sides of the limiter. */
async function through(
  packets: mqttPacket.Packet[],
  protocolVersion: 4 | 5,
  max: number,
  chunk: number,
): Promise<{ parsed: mqttPacket.Packet[]; cuts: PublishCut[]; largestChunk: number }> {
  const cuts: PublishCut[] = [];
  const limiter = new PublishLimiter(max, 16, protocolVersion, (c) => cuts.push(c));
  const parser = mqttPacket.parser({ protocolVersion });
  const parsed: mqttPacket.Packet[] = [];
  parser.on('packet', (p) => parsed.push(p));
  parser.on('error', (err) => parsed.push({ cmd: 'error', err } as unknown as mqttPacket.Packet));
  let largestChunk = 0;
  limiter.on('data', (b: Buffer) => {
    largestChunk = Math.max(largestChunk, b.length);
    parser.parse(b);
  });
  const bytes = Buffer.concat(packets.map((p) => mqttPacket.generate(p, { protocolVersion })));
  const source = new PassThrough();
  source.pipe(limiter);
  for (let at = 0; at < bytes.length; at += chunk) source.write(bytes.subarray(at, at + chunk));
  source.end();
  await new Promise((resolve) => limiter.on('end', resolve).resume());
  return { parsed, cuts, largestChunk };
}

const publish = (
  topic: string,
  payload: Buffer,
  messageId?: number,
  extra: Partial<mqttPacket.IPublishPacket> = {},
): mqttPacket.IPublishPacket => ({
  cmd: 'publish',
  topic,
  payload,
  qos: messageId === undefined ? 0 : 1,
  dup: false,
  retain: false,
  ...(messageId !== undefined ? { messageId } : {}),
  ...extra,
});

describe('PublishLimiter: a PUBLISH over the limit reaches the parser cut to its first bytes', () => {
  for (const protocolVersion of [4, 5] as const) {
    for (const chunk of [1, 7, 4096, 1 << 20]) {
      it(`MQTT ${protocolVersion === 5 ? '5' : '3.1.1'}, chunks of ${chunk} bytes`, async () => {
        const big = Buffer.alloc(300_000, 0x41);
        big.write('HEAD-OF-THE-BIG-ONE', 0);
        const small = Buffer.from('CELL-00001');
        const props =
          protocolVersion === 5 ? { properties: { userProperties: { line: 'L1' } } } : {};
        const packets: mqttPacket.Packet[] = [
          publish('plant/L1/scans', small, 1),
          publish('plant/L1/scans', big, 2, { dup: true, ...props }),
          { cmd: 'pingresp' },
          publish('plant/L1/scans', Buffer.alloc(1000, 0x42)), // QoS 0, exactly at the limit
          publish('a'.repeat(2000), Buffer.from('long topic, small payload'), 3),
          publish('plant/L1/scans', small, 4),
        ];
        const { parsed, cuts, largestChunk } = await through(packets, protocolVersion, 1000, chunk);
        expect(parsed.map((p) => p.cmd)).toEqual([
          'publish',
          'publish',
          'pingresp',
          'publish',
          'publish',
          'publish',
        ]);
        const cutOne = parsed[1] as mqttPacket.IPublishPacket;
        expect(cutOne).toMatchObject({ topic: 'plant/L1/scans', messageId: 2, qos: 1, dup: true });
        expect(Buffer.from(cutOne.payload as Buffer).toString()).toBe('HEAD-OF-THE-BIG-');
        if (protocolVersion === 5)
          expect(cutOne.properties?.userProperties).toEqual({ line: 'L1' });
        expect(cuts).toEqual([
          {
            topic: 'plant/L1/scans',
            messageId: 2,
            payloadBytes: 300_000,
            payloadSha256: createHash('sha256').update(big).digest(),
            keptBytes: 16,
          },
        ]);
        expect((parsed[3] as mqttPacket.IPublishPacket).payload).toHaveLength(1000);
        expect((parsed[4] as mqttPacket.IPublishPacket).topic).toBe('a'.repeat(2000));
        expect(
          Buffer.from((parsed[5] as mqttPacket.IPublishPacket).payload as Buffer).toString(),
        ).toBe('CELL-00001');
        // Never more than a chunk (or the small packets around) passed on at once: the 300 kB never whole.
        expect(largestChunk).toBeLessThan(Math.max(chunk, 4096) + 100);
      });
    }
  }

  it('matches each cut to its message by topic, packet id and length, and keeps at most 100', () => {
    const cuts = new PublishCuts();
    const cut = (messageId: number): PublishCut => ({
      topic: 't',
      messageId,
      payloadBytes: 9,
      payloadSha256: Buffer.alloc(32),
      keptBytes: 3,
    });
    for (let i = 1; i <= 101; i++) cuts.add(cut(i));
    expect(cuts.take('t', 1, Buffer.from('abc'))).toBeUndefined(); // the oldest went at the bound
    expect(cuts.take('t', 2, Buffer.from('abcd'))).toBeUndefined();
    expect(cuts.take('t', 2, Buffer.from('abc'))?.messageId).toBe(2);
    expect(cuts.take('t', 2, Buffer.from('abc'))).toBeUndefined();
  });
});
