import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isGatewayError } from '../../src/errors.js';
import { Framer, terminatorBytes, type FramerEvent } from '../../src/inputs/stream/framer.js';
import { CAPTURE_FRAMES, samplePath } from '../helpers/samples.js';

const CAPTURE = readFileSync(samplePath('serial-capture-line3.bin'));
const GS = '\x1d';

/** The 11 reads of serial-capture-line3.bin (CR-terminated), as latin1 text so every byte shows. */

function frameTexts(events: FramerEvent[]): string[] {
  return events.map((e) => {
    switch (e.kind) {
      case 'frame':
        return e.bytes.toString('latin1');
      case 'overlong':
        return `<overlong:${e.head.toString('latin1')}>`;
      case 'noise':
        return `<noise:${e.bytes.toString('latin1')}>`;
      case 'partial':
        return `<partial:${e.bytes.toString('latin1')}>`;
    }
  });
}

function feed(framer: Framer, chunks: Buffer[]): FramerEvent[] {
  return chunks.flatMap((chunk) => framer.push(chunk));
}

function framer(terminator: string, maxLength = 4096, headBytes?: number): Framer {
  return new Framer({ terminator: terminatorBytes(terminator), maxLength, ...(headBytes === undefined ? {} : { headBytes }) });
}

const bytes = (text: string): Buffer => Buffer.from(text, 'latin1');

/** The obvious, whole-stream definition the streaming framer must agree with. */
function reference(stream: Buffer, terminator: Buffer, maxLength: number): string[] {
  const out: string[] = [];
  const head = (b: Buffer): string => `<overlong:${b.subarray(0, Math.min(256, maxLength + 1)).toString('latin1')}>`;
  let start = 0;
  for (let idx = stream.indexOf(terminator); idx >= 0; idx = stream.indexOf(terminator, start)) {
    const frame = stream.subarray(start, idx);
    if (frame.length > maxLength) out.push(head(frame));
    else if (frame.length > 0) out.push(frame.toString('latin1'));
    start = idx + terminator.length;
  }
  const tail = stream.subarray(start);
  if (tail.length > maxLength + terminator.length - 1) out.push(head(tail));
  return out;
}

describe('Framer', () => {
  it('splits the serial capture into its 11 reads with every byte kept (AIM id, GS, invalid UTF-8)', () => {
    const events = framer('\r').push(CAPTURE);
    expect(frameTexts(events)).toEqual(CAPTURE_FRAMES);
    const garbage = events[7];
    expect(garbage?.kind === 'frame' && [...garbage.bytes]).toEqual([0xff, 0xfe, 0x00, 0x67, 0x61, 0x72, 0x62, 0x61, 0x67, 0x65, 0x80, 0x81]);
    const first = events[0];
    expect(first?.kind === 'frame' && first.bytes.subarray(0, 3).toString('latin1')).toBe(']d2');
    expect(first?.kind === 'frame' && first.bytes.includes(0x1d)).toBe(true);
  });

  it('gives the same frames when the capture is split in two at every position', () => {
    for (let at = 0; at <= CAPTURE.length; at++) {
      const events = feed(framer('\r'), [CAPTURE.subarray(0, at), CAPTURE.subarray(at)]);
      expect(frameTexts(events), `split at ${at}`).toEqual(CAPTURE_FRAMES);
    }
  });

  it('gives the same frames when the capture arrives one byte at a time', () => {
    const chunks = [...CAPTURE].map((b) => Buffer.from([b]));
    expect(frameTexts(feed(framer('\r'), chunks))).toEqual(CAPTURE_FRAMES);
  });

  it('frames at CRLF, including a CRLF split between chunks, and keeps a lone CR as data', () => {
    const stream = bytes('ABC\r\nD\rE\r\n\r\nFGH\r\n');
    for (let at = 0; at <= stream.length; at++) {
      const f = framer('\r\n');
      expect(frameTexts(feed(f, [stream.subarray(0, at), stream.subarray(at)])), `split at ${at}`).toEqual(['ABC', 'D\rE', 'FGH']);
    }
  });

  it('frames at a multi-byte terminator split at every position (ETX CR LF)', () => {
    const stream = bytes('0104012345678901\x03\r\n]Q1hello\x03\r\nX\x03\rY\x03\r\n');
    for (let a = 0; a <= stream.length; a++) {
      for (let b = a; b <= stream.length; b++) {
        const f = framer('\x03\r\n');
        const events = feed(f, [stream.subarray(0, a), stream.subarray(a, b), stream.subarray(b)]);
        expect(frameTexts(events), `splits ${a},${b}`).toEqual(['0104012345678901', ']Q1hello', 'X\x03\rY']);
      }
    }
  });

  it('skips empty frames (terminator twice in a row, or at the very start)', () => {
    expect(frameTexts(framer('\r').push(bytes('\r\rA\r\r\rB\r')))).toEqual(['A', 'B']);
  });

  it('keeps an unterminated tail until the terminator arrives, and flush() returns it', () => {
    const f = framer('\r');
    expect(frameTexts(f.push(bytes('AB\rCD')))).toEqual(['AB']);
    expect(frameTexts(f.flush())).toEqual(['<partial:CD>']);
    expect(f.flush()).toEqual([]);
    expect(frameTexts(f.push(bytes('EF\r')))).toEqual(['EF']);
  });

  it('accepts a read of exactly maxLength bytes and reports maxLength + 1 as overlong', () => {
    const f = framer('\r\n', 5);
    expect(frameTexts(f.push(bytes('12345\r\n')))).toEqual(['12345']);
    expect(frameTexts(f.push(bytes('123456\r\nOK\r\n')))).toEqual(['<overlong:123456>', 'OK']);
  });

  it('does not mistake a partial terminator at the limit for an overlong read', () => {
    const f = framer('\r\n', 5);
    expect(f.push(bytes('12345\r'))).toEqual([]);
    expect(frameTexts(f.push(bytes('\n')))).toEqual(['12345']);
  });

  it('reports an overlong read before its terminator arrives, keeps only its head, and recovers after it', () => {
    const f = framer('\r', 8, 4);
    expect(frameTexts(f.push(bytes('OK1\rAAAAAAAAAA')))).toEqual(['OK1', '<overlong:AAAA>']);
    expect(f.push(bytes('B'.repeat(10_000)))).toEqual([]);
    expect(f.flush()).toEqual([]);
    const g = framer('\r', 8, 4);
    g.push(bytes('AAAAAAAAAA'));
    g.push(bytes('B'.repeat(100)));
    expect(frameTexts(g.push(bytes('BB\rGOOD\rNEXT')))).toEqual(['GOOD']);
    expect(frameTexts(g.push(bytes('\r')))).toEqual(['NEXT']);
  });

  it('recovers after an overlong read whose multi-byte terminator is split across chunks', () => {
    const f = framer('\r\n', 4, 256);
    expect(frameTexts(f.push(bytes('TOOLONGTOOLONG\r')))).toEqual(['<overlong:TOOLO>']);
    expect(frameTexts(f.push(bytes('\nFINE\r\n')))).toEqual(['FINE']);
  });

  it('caps the kept head of an overlong read at 256 bytes by default', () => {
    const f = framer('\r', 300);
    const [event] = f.push(Buffer.alloc(1000, 0x41));
    expect(event?.kind).toBe('overlong');
    expect(event?.kind === 'overlong' && event.head.length).toBe(256);
  });

  it('returns frames that do not share memory with the pushed chunk', () => {
    const chunk = bytes('ABC\r');
    const [event] = framer('\r').push(chunk);
    chunk.fill(0x5a);
    expect(event?.kind === 'frame' && event.bytes.toString('latin1')).toBe('ABC');
  });

  it('gives the same events for any chunking of any byte stream (property)', () => {
    const alphabet = fc.constantFrom(0x0d, 0x0a, 0x1d, 0x41, 0x42, 0x00, 0xff);
    fc.assert(
      fc.property(
        fc.array(alphabet, { maxLength: 120 }),
        fc.array(fc.nat(), { maxLength: 10 }),
        fc.constantFrom('\r', '\r\n', '\n\r\n'),
        fc.integer({ min: 1, max: 12 }),
        (streamBytes, cuts, terminator, maxLength) => {
          const stream = Buffer.from(streamBytes);
          const positions = [...new Set(cuts.map((c) => c % (stream.length + 1)))].sort((a, b) => a - b);
          const chunks: Buffer[] = [];
          let last = 0;
          for (const p of positions) {
            chunks.push(stream.subarray(last, p));
            last = p;
          }
          chunks.push(stream.subarray(last));
          const wholeFramer = framer(terminator, maxLength);
          const whole = wholeFramer.push(stream);
          const piecesFramer = framer(terminator, maxLength);
          const pieces = feed(piecesFramer, chunks);
          expect(frameTexts(pieces)).toEqual(frameTexts(whole));
          expect(frameTexts(whole)).toEqual(reference(stream, bytes(terminator), maxLength));
          expect(piecesFramer.flush()).toEqual(wholeFramer.flush());
        },
      ),
    );
  });
});

const stxEtx = (maxLength = 4096, headBytes?: number): Framer =>
  new Framer({ mode: 'stxEtx', maxLength, ...(headBytes === undefined ? {} : { headBytes }) });

describe('Framer (stxEtx)', () => {
  const STREAM = bytes('\x02ABC\x03\r\n\x02]d2010952123454321310X\x1d21Y\x03\x02NOREAD\x03');
  const FRAMES = ['ABC', `]d2010952123454321310X${GS}21Y`, 'NOREAD'];

  it('takes the bytes between STX and ETX and drops CR/LF filler between reads', () => {
    expect(frameTexts(stxEtx().push(STREAM))).toEqual(FRAMES);
  });

  it('gives the same reads when split at every pair of positions', () => {
    for (let a = 0; a <= STREAM.length; a++) {
      for (let b = a; b <= STREAM.length; b++) {
        const events = feed(stxEtx(), [STREAM.subarray(0, a), STREAM.subarray(a, b), STREAM.subarray(b)]);
        expect(frameTexts(events), `splits ${a},${b}`).toEqual(FRAMES);
      }
    }
  });

  it('reports non-filler bytes between reads as noise, once, before the next read', () => {
    const f = stxEtx();
    expect(frameTexts(f.push(bytes('junk')))).toEqual([]);
    expect(frameTexts(f.push(bytes('\r\nmore\x02OK\x03')))).toEqual(['<noise:junk\r\nmore>', 'OK']);
    const noise = stxEtx().push(bytes('zz\x02A\x03'))[0];
    expect(noise?.kind === 'noise' && noise.reason).toMatch(/outside STX…ETX \(2 bytes\)/);
  });

  it('reports a read whose ETX was lost (a new STX came first) and takes the next read', () => {
    expect(frameTexts(stxEtx().push(bytes('\x02LOST\x02GOOD\x03')))).toEqual(['<noise:LOST>', 'GOOD']);
  });

  it('reports an overlong read once and recovers at its ETX, or at a new STX', () => {
    const f = stxEtx(4);
    expect(frameTexts(f.push(bytes('\x02ABCDEFG')))).toEqual(['<overlong:ABCDE>']);
    expect(frameTexts(f.push(bytes('HIJ\x03\x02OK\x03')))).toEqual(['OK']);
    expect(frameTexts(stxEtx(4).push(bytes('\x02ABCDEFG\x02OK\x03')))).toEqual(['<overlong:ABCDE>', 'OK']);
  });

  it('returns a cut-off read and pending noise at flush()', () => {
    const f = stxEtx();
    f.push(bytes('\x02A\x03xx'));
    expect(frameTexts(f.flush())).toEqual(['<noise:xx>']);
    f.push(bytes('\x02HALF'));
    expect(frameTexts(f.flush())).toEqual(['<partial:HALF>']);
  });

  it('gives the same events for any chunking of any byte stream (property)', () => {
    const alphabet = fc.constantFrom(0x02, 0x03, 0x0d, 0x41, 0x42, 0xff);
    fc.assert(
      fc.property(fc.array(alphabet, { maxLength: 100 }), fc.array(fc.nat(), { maxLength: 8 }), fc.integer({ min: 1, max: 8 }), (streamBytes, cuts, maxLength) => {
        const stream = Buffer.from(streamBytes);
        const positions = [...new Set(cuts.map((c) => c % (stream.length + 1)))].sort((a, b) => a - b);
        const chunks: Buffer[] = [];
        let last = 0;
        for (const p of positions) {
          chunks.push(stream.subarray(last, p));
          last = p;
        }
        chunks.push(stream.subarray(last));
        const whole = stxEtx(maxLength);
        const pieces = stxEtx(maxLength);
        expect(frameTexts(feed(pieces, chunks))).toEqual(frameTexts(whole.push(stream)));
        expect(frameTexts(pieces.flush())).toEqual(frameTexts(whole.flush()));
      }),
    );
  });
});

describe('Framer (silence)', () => {
  it('completes a read only at idle(), keeping every byte including CR/LF', () => {
    const f = new Framer({ mode: 'silence', maxLength: 100 });
    expect(f.push(bytes('AB'))).toEqual([]);
    expect(f.push(bytes('C\r\n'))).toEqual([]);
    expect(frameTexts(f.idle())).toEqual(['ABC\r\n']);
    expect(f.idle()).toEqual([]);
  });

  it('reports an overlong read at once and drops the rest of it until the next silence', () => {
    const f = new Framer({ mode: 'silence', maxLength: 3 });
    expect(frameTexts(f.push(bytes('ABCDE')))).toEqual(['<overlong:ABCD>']);
    expect(f.push(bytes('FGH'))).toEqual([]);
    expect(f.idle()).toEqual([]);
    f.push(bytes('OK'));
    expect(frameTexts(f.idle())).toEqual(['OK']);
  });

  it('ignores idle() in the other modes', () => {
    const f = framer('\r');
    f.push(bytes('AB'));
    expect(f.idle()).toEqual([]);
    expect(frameTexts(f.flush())).toEqual(['<partial:AB>']);
  });
});

describe('terminatorBytes', () => {
  it('turns the configured string into bytes, one per character', () => {
    expect([...terminatorBytes('\r')]).toEqual([0x0d]);
    expect([...terminatorBytes('\r\n')]).toEqual([0x0d, 0x0a]);
    expect([...terminatorBytes('\x03\xff')]).toEqual([0x03, 0xff]);
  });

  it('refuses an empty string and characters that are not one byte', () => {
    expect(() => terminatorBytes('')).toThrow(/must not be empty/);
    let caught: unknown;
    try {
      terminatorBytes('\u2028');
    } catch (err) {
      caught = err;
    }
    expect(isGatewayError(caught, 'SCANGW_E_CONFIG')).toBe(true);
    expect((caught as Error).message).toMatch(/U\+2028/);
  });
});
