import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BufferStore } from '../../src/buffer/store.js';
import { configSchema } from '../../src/config/schema.js';
import { rejectionItem } from '../../src/inputs/input-items.js';
import { Intake } from '../../src/intake/intake.js';
import { mappingContext } from '../../src/mapping/map-read.js';
import { serialInputSchema, type SerialInputConfig } from '../../src/inputs/serial/schema.js';
import { ackOnNotes, VERDICT_REASONS } from '../../src/config/verdict-reasons.js';
import { FramedStream, type StreamVerdict } from '../../src/inputs/stream/framed-stream.js';
import type { IntakeItem, IntakeSink, SubmitResult } from '../../src/inputs/types.js';
import { mappedVerdict, refusalCode } from '../../src/intake/verdict.js';
import { silentLogger } from '../../src/log.js';
import { waitFor } from '../helpers/wait.js';

describe('refusalCode: the reasons the mapper writes, as codes', () => {
  it.each([
    ['the read is empty', 'empty'],
    ['the read is not valid UTF-8 text (12 bytes, kept as raw bytes)', 'notText'],
    ['the read holds the control byte 0x02 at position 0, which no barcode carries', 'notText'],
    ['invalid GS1 data: AI 01 (GTIN) check digit is 4, expected 1', 'checkDigit'],
    ['invalid GS1 data: AI 17 (USE BY) month 13', 'invalidGs1'],
    [
      'rule cells: needs an open container (module) at ST-20, and none is open: scan the container first, then this item again; this read is not sent',
      'noContainer',
    ],
    ['opens container module at ST-20, refused: too many open', 'container'],
    ['no rule matched the read from input st20 (rules tried: modules, cells)', 'noRule'],
    ['rule cells: DCP "ST-99" is not configured (known: ST-10, ST-20)', 'unknownDcp'],
    ['input "gone" is not in the configuration', 'unknownDcp'],
    [
      'product model key "X" is not in the upstream product list (fetched …); productCheck.rejectUnknown is on',
      'unknownProduct',
    ],
    ['time stamp "yesterday" is not ISO 8601 (expected e.g. 2026-11-18T06:58:12+01:00)', 'time'],
    ['rule cells: reference: AI 21 is absent', 'refused'],
  ])('%s → %s', (reason, code) => {
    expect(refusalCode(reason)).toBe(code);
    expect(VERDICT_REASONS).toContain(code);
  });

  it('acks a container code that did its work, naks a closing code with none open and a no-read', () => {
    expect(
      mappedVerdict({
        outcome: 'noRead',
        container: { name: 'module', action: 'opened', parent: 'MOD-1' },
      }),
    ).toEqual({ verdict: 'ack', reference: 'MOD-1' });
    expect(
      mappedVerdict({ outcome: 'noRead', container: { name: 'module', action: 'closed' } }),
    ).toEqual({ verdict: 'nak', code: 'noContainer' });
    expect(mappedVerdict({ outcome: 'noRead' })).toEqual({ verdict: 'nak', code: 'noRead' });
    expect(
      mappedVerdict({ outcome: 'rejected', reason: 'anything', code: 'containerShort' }),
    ).toEqual({
      verdict: 'nak',
      code: 'containerShort',
    });
  });
});

/** A sink that answers each read with the outcome its text names (`scan:…`, `rejected:…`). */
class JudgingSink implements IntakeSink {
  failing = false;
  readonly items: IntakeItem[] = [];
  async submit(items: IntakeItem[]): Promise<SubmitResult> {
    await new Promise((resolve) => setImmediate(resolve));
    if (this.failing) throw new Error('SQLITE_FULL: database or disk is full');
    this.items.push(...items);
    return {
      outcomes: items.map((i) => {
        if (i.kind === 'rejection')
          return { outcome: 'rejected', verdict: 'nak', code: i.rejection.code };
        const text = i.read.raw.toString('latin1');
        return text.startsWith('scan:')
          ? { outcome: 'scan', verdict: 'ack' }
          : { outcome: 'rejected', verdict: 'nak', code: 'noContainer' };
      }),
    };
  }
}

function stream(sink: IntakeSink, over: Partial<SerialInputConfig>) {
  const config = serialInputSchema.parse({
    id: 'st20',
    dcp: 'ST-20',
    type: 'serial',
    path: '/dev/null',
    ackBytes: 'A',
    nakBytes: 'N',
    ...over,
  });
  let wire = '';
  const verdicts: StreamVerdict[] = [];
  const s = new FramedStream({
    inputId: 'st20',
    config,
    sink,
    logger: silentLogger(),
    origin: { port: '/dev/null' },
    submitRetryBaseMs: 10,
    onVerdict: (_item, v) => verdicts.push(v),
  });
  s.setWriter((b) => (wire += b.toString('latin1')));
  return { s, wire: () => wire, verdicts };
}

describe('FramedStream answers each read with its verdict', () => {
  it('ackOn verdict: ACK a scan, the reason\u2019s NAK for a refusal, NAK an empty read', async () => {
    const sink = new JudgingSink();
    const { s, wire, verdicts } = stream(sink, {
      ackOn: 'verdict',
      nakBytesByReason: { noContainer: 'C', empty: 'E' },
    });
    s.push(Buffer.from('scan:1\rcell\r\rscan:2\r', 'latin1'));
    await s.settled();
    expect(wire()).toBe('ACEA');
    expect(verdicts.map((v) => [v.verdict, v.code])).toEqual([
      ['ack', undefined],
      ['nak', 'noContainer'],
      ['nak', 'empty'],
      ['ack', undefined],
    ]);
    expect(sink.items[2]).toMatchObject({
      kind: 'rejection',
      rejection: { reason: 'empty read: its terminator with nothing before it', code: 'empty' },
    });
  });

  it('ackOn commit (the default): ACK every stored read, NAK only what framing rejected', async () => {
    const sink = new JudgingSink();
    const { s, wire } = stream(sink, {});
    s.push(Buffer.from('scan:1\rcell\r\r', 'latin1'));
    await s.settled();
    expect(wire()).toBe('AAN');
  });

  it('STX…ETX: nothing between STX and ETX, or only the prefix stripped, is an empty read', async () => {
    const sink = new JudgingSink();
    const { s, wire } = stream(sink, { ackOn: 'verdict', framing: 'stxEtx', etx: '\r' });
    s.push(Buffer.from('\x02\r\n\x02scan:1\r\n', 'latin1'));
    await s.settled();
    expect(wire()).toBe('NA');
    expect(sink.items[0]).toMatchObject({
      kind: 'rejection',
      rejection: { reason: 'empty read: nothing between STX and ETX', code: 'empty' },
    });
    const sink2 = new JudgingSink();
    const t = stream(sink2, { ackOn: 'verdict', terminator: '\r\n', stripPrefix: '\x02' });
    t.s.push(Buffer.from('\x02\r\n', 'latin1'));
    await t.s.settled();
    expect(t.wire()).toBe('N');
    expect(sink2.items[0]).toMatchObject({ kind: 'rejection', rejection: { code: 'empty' } });
  });

  it('a read the buffer refused gets the notTaken NAK once, and no answer when stored later', async () => {
    const sink = new JudgingSink();
    sink.failing = true;
    const { s, wire, verdicts } = stream(sink, {
      ackOn: 'verdict',
      nakBytesByReason: { notTaken: 'T' },
    });
    s.push(Buffer.from('scan:1\r', 'latin1'));
    await waitFor(() => wire() === 'T', { what: 'the notTaken NAK' });
    sink.failing = false;
    await waitFor(() => sink.items.length === 1, { what: 'stored once the buffer took it' });
    await s.settled();
    expect(wire()).toBe('T');
    expect(verdicts).toEqual([{ verdict: 'nak', code: 'notTaken' }]);
  });
});

describe('ackOnNotes (config check)', () => {
  it('warns a serial or TCP input that acks on commit, not one on verdict or without ackBytes', () => {
    const notes = ackOnNotes({
      inputs: [
        { id: 'st10', type: 'tcp', ackBytes: '\x06', ackOn: 'commit' },
        { id: 'st20', type: 'serial', ackBytes: '\x06', ackOn: 'verdict' },
        { id: 'quiet', type: 'serial', ackOn: 'commit' },
        { id: 'mes', type: 'mqtt' },
      ],
    });
    expect(notes.map((n) => n.where)).toEqual(['inputs[st10].ackOn']);
    expect(notes[0]?.message).toMatch(/default becomes verdict/);
  });
});

describe('the real intake hands each item its verdict', () => {
  it('ACK a scan and a container label that opened its container; NAK with the code a duplicate, a refusal, an input-level rejection', async () => {
    const config = configSchema.parse({
      site: { id: 'v', timezone: 'Europe/Berlin' },
      upstream: { baseUrl: 'http://127.0.0.1:1', authUrl: 'http://127.0.0.1:1', clientId: 'c' },
      dcps: [{ key: 'ST-20', kind: 'endOfProcess', productModelKey: 'MOD-A' }],
      inputs: [{ id: 'st20', type: 'serial', path: '/dev/null', dcp: 'ST-20' }],
      containers: [{ name: 'module', open: { regex: '^MOD-' }, sendParent: false }],
      rules: [{ name: 'cells', match: { regex: '^CELL' }, requireContainer: 'module' }],
    });
    const store = BufferStore.openAt(join(mkdtempSync(join(tmpdir(), 'sg-verdict-')), 'b.db'));
    const intake = new Intake({ store, mapping: mappingContext(config), logger: silentLogger() });
    intake.open();
    try {
      const at = new Date();
      const read = (text: string): IntakeItem => ({
        kind: 'read',
        read: { inputId: 'st20', raw: Buffer.from(text), receivedAt: at },
      });
      const result = await intake.submit([
        read('CELL-0'),
        read('MOD-1'),
        read('CELL-1'),
        read('CELL-1'),
        rejectionItem('st20', Buffer.alloc(0), 'empty read', at, undefined, 'empty'),
      ]);
      expect(result.outcomes.map((o) => [o.outcome, o.verdict, o.code, o.reference])).toEqual([
        ['rejected', 'nak', 'noContainer', undefined],
        ['noRead', 'ack', undefined, 'MOD-1'],
        ['scan', 'ack', undefined, 'CELL-1'],
        ['duplicate', 'nak', 'duplicate', 'CELL-1'],
        ['rejected', 'nak', 'empty', undefined],
      ]);
    } finally {
      intake.close();
      store.close();
    }
  });
});
