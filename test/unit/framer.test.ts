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
        return `<overlong:${e.head.toString('latin1')}:${e.length}@${e.end}>`;
      case 'noise':
        return `<noise:${e.bytes.toString('latin1')}>`;
      case 'lineEnd':
        return `<lineEnd:${e.bytes.toString('latin1')}>`;
      case 'partial':
        return `<partial:${e.bytes.toString('latin1')}>`;
      case 'empty':
        return '<empty>';
    }
  });
}

function feed(framer: Framer, chunks: Buffer[]): FramerEvent[] {
  return chunks.flatMap((chunk) => framer.push(chunk));
}

function framer(terminator: string, maxLength = 4096, headBytes?: number): Framer {
  return new Framer({
    terminator: terminatorBytes(terminator),
    maxLength,
    ...(headBytes === undefined ? {} : { headBytes }),
  });
}

const bytes = (text: string): Buffer => Buffer.from(text, 'latin1');

/**
 * The obvious, whole-stream definition the streaming framer must agree with: the events of
 * `push(stream)` and then of `flush()`. Terminator CR: a LF right after it is dropped; terminator
 * LF: a CR right before it is dropped; with either, a read holding the other byte is `lineEnd`.
 */
function reference(
  stream: Buffer,
  terminator: Buffer,
  maxLength: number,
): { pushed: string[]; flushed: string[] } {
  const pushed: string[] = [];
  const single = terminator.length === 1 ? terminator.toString('latin1') : '';
  const head = (b: Buffer, end: string): string =>
    `<overlong:${b.subarray(0, Math.min(256, maxLength + 1)).toString('latin1')}:${b.length}@${end}>`;
  let start = 0;
  for (let idx = stream.indexOf(terminator); idx >= 0; idx = stream.indexOf(terminator, start)) {
    let frame = stream.subarray(start, idx);
    if (single === '\n' && frame.at(-1) === 0x0d) frame = frame.subarray(0, -1);
    if (frame.length > maxLength) pushed.push(head(frame, 'terminator'));
    else if ((single === '\r' && frame.includes(0x0a)) || (single === '\n' && frame.includes(0x0d)))
      pushed.push(`<lineEnd:${frame.toString('latin1')}>`);
    else if (frame.length > 0) pushed.push(frame.toString('latin1'));
    start = idx + terminator.length;
    if (single === '\r' && stream[start] === 0x0a) start += 1;
  }
  const tail = stream.subarray(start);
  const flushed =
    tail.length > maxLength + terminator.length - 1 + (single === '\n' ? 1 : 0)
      ? [head(tail, 'end')]
      : tail.length > 0
        ? [`<partial:${tail.toString('latin1')}>`]
        : [];
  return { pushed, flushed };
}

describe('Framer', () => {
  it('splits the serial capture into its 11 reads with every byte kept (AIM id, GS, invalid UTF-8)', () => {
    const events = framer('\r').push(CAPTURE);
    expect(frameTexts(events)).toEqual(CAPTURE_FRAMES);
    const garbage = events[7];
    expect(garbage?.kind === 'frame' && [...garbage.bytes]).toEqual([
      0xff, 0xfe, 0x00, 0x67, 0x61, 0x72, 0x62, 0x61, 0x67, 0x65, 0x80, 0x81,
    ]);
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
      expect(
        frameTexts(feed(f, [stream.subarray(0, at), stream.subarray(at)])),
        `split at ${at}`,
      ).toEqual(['ABC', 'D\rE', 'FGH']);
    }
  });

  it('frames at a multi-byte terminator split at every position (ETX CR LF)', () => {
    const stream = bytes('0104012345678901\x03\r\n]Q1hello\x03\r\nX\x03\rY\x03\r\n');
    for (let a = 0; a <= stream.length; a++) {
      for (let b = a; b <= stream.length; b++) {
        const f = framer('\x03\r\n');
        const events = feed(f, [stream.subarray(0, a), stream.subarray(a, b), stream.subarray(b)]);
        expect(frameTexts(events), `splits ${a},${b}`).toEqual([
          '0104012345678901',
          ']Q1hello',
          'X\x03\rY',
        ]);
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
    expect(frameTexts(f.push(bytes('123456\r\nOK\r\n')))).toEqual([
      '<overlong:123456:6@terminator>',
      'OK',
    ]);
  });

  it('does not mistake a partial terminator at the limit for an overlong read', () => {
    const f = framer('\r\n', 5);
    expect(f.push(bytes('12345\r'))).toEqual([]);
    expect(frameTexts(f.push(bytes('\n')))).toEqual(['12345']);
  });

  it('drops an overlong read but for its head up to its terminator, then reports it with its length and recovers', () => {
    const f = framer('\r', 8, 4);
    expect(frameTexts(f.push(bytes('OK1\rAAAAAAAAAA')))).toEqual(['OK1']);
    expect(f.dropping).toBe(true);
    expect(f.push(bytes('B'.repeat(10_000)))).toEqual([]);
    expect(frameTexts(f.flush())).toEqual(['<overlong:AAAA:10010@end>']);
    expect(f.dropping).toBe(false);
    const g = framer('\r', 8, 4);
    g.push(bytes('AAAAAAAAAA'));
    g.push(bytes('B'.repeat(100)));
    expect(frameTexts(g.push(bytes('BB\rGOOD\rNEXT')))).toEqual([
      '<overlong:AAAA:112@terminator>',
      'GOOD',
    ]);
    expect(frameTexts(g.push(bytes('\r')))).toEqual(['NEXT']);
  });

  it('recovers after an overlong read whose multi-byte terminator is split across chunks', () => {
    const f = framer('\r\n', 4, 256);
    expect(frameTexts(f.push(bytes('TOOLONGTOOLONG\r')))).toEqual([]);
    expect(frameTexts(f.push(bytes('\nFINE\r\n')))).toEqual([
      '<overlong:TOOLO:14@terminator>',
      'FINE',
    ]);
  });

  it('caps the kept head of an overlong read at 256 bytes by default', () => {
    const f = framer('\r', 300);
    f.push(Buffer.alloc(1000, 0x41));
    const [event] = f.idle();
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
        fc.constantFrom('\r', '\n', '\r\n', '\n\r\n'),
        fc.integer({ min: 1, max: 12 }),
        (streamBytes, cuts, terminator, maxLength) => {
          const stream = Buffer.from(streamBytes);
          const positions = [...new Set(cuts.map((c) => c % (stream.length + 1)))].sort(
            (a, b) => a - b,
          );
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
          const expected = reference(stream, bytes(terminator), maxLength);
          expect(frameTexts(whole)).toEqual(expected.pushed);
          const flushed = wholeFramer.flush();
          expect(piecesFramer.flush()).toEqual(flushed);
          expect(frameTexts(flushed)).toEqual(expected.flushed);
        },
      ),
    );
  });
});

describe('Framer: a pause ends an overlong read, so the good read after it is not swallowed', () => {
  it('reports 10,240 bytes without a terminator at the pause, and keeps the next read', () => {
    const f = framer('\r');
    expect(f.push(Buffer.alloc(10_240, 'L'))).toEqual([]);
    expect(f.dropping).toBe(true);
    expect(frameTexts(f.idle())).toEqual([`<overlong:${'L'.repeat(256)}:10240@pause>`]);
    expect(f.dropping).toBe(false);
    expect(frameTexts(f.push(bytes('SER-AFTER-LONG-8\r')))).toEqual(['SER-AFTER-LONG-8']);
  });

  it('counts every dropped byte whatever the chunking, and the bytes held as a possible terminator', () => {
    for (const chunk of [1, 7, 100, 5000]) {
      const f = framer('\r\n', 16, 4);
      const stream = Buffer.concat([Buffer.alloc(999, 'X'), bytes('\r')]);
      for (let at = 0; at < stream.length; at += chunk) f.push(stream.subarray(at, at + chunk));
      expect(frameTexts(f.idle()), `chunks of ${chunk}`).toEqual(['<overlong:XXXX:1000@pause>']);
      expect(frameTexts(f.push(bytes('NEXT\r\n'))), `chunks of ${chunk}`).toEqual(['NEXT']);
    }
  });

  it('leaves a read in progress that is not overlong alone at a pause', () => {
    const f = framer('\r');
    f.push(bytes('HALF'));
    expect(f.idle()).toEqual([]);
    expect(frameTexts(f.push(bytes('-READ\r')))).toEqual(['HALF-READ']);
  });

  it('ends an overlong STX…ETX read at a pause; what follows without STX is noise', () => {
    const f = stxEtx(4);
    f.push(bytes('\x02ABCDEFGH'));
    expect(frameTexts(f.idle())).toEqual(['<overlong:ABCDE:8@pause>']);
    expect(frameTexts(f.push(bytes('IJ\x03\x02OK\x03')))).toEqual(['<noise:IJ\x03>', 'OK']);
  });
});

describe('Framer: CR and LF line ends (a CRLF scanner on a CR terminator must not have every read after the first rejected)', () => {
  it('terminator CR: drops the LF of a CRLF, also when it comes in the next chunk', () => {
    const stream = bytes('SER-1\r\nSER-2\r\n\r\nSER-3\r\n');
    for (let at = 0; at <= stream.length; at++) {
      const f = framer('\r');
      expect(
        frameTexts(feed(f, [stream.subarray(0, at), stream.subarray(at)])),
        `split at ${at}`,
      ).toEqual(['SER-1', 'SER-2', 'SER-3']);
      expect(f.flush(), `split at ${at}`).toEqual([]);
    }
  });

  it('terminator LF: drops the CR of a CRLF, and does not count it into maxLength', () => {
    const stream = bytes('SER-1\r\nSER-2\r\n12345\r\n');
    for (let at = 0; at <= stream.length; at++) {
      const f = framer('\n', 5);
      expect(
        frameTexts(feed(f, [stream.subarray(0, at), stream.subarray(at)])),
        `split at ${at}`,
      ).toEqual(['SER-1', 'SER-2', '12345']);
    }
  });

  it('terminator CR: a read holding a LF is reported as lineEnd with the hint to set terminator "\\n"', () => {
    const events = framer('\r').push(bytes('SER-LF-2\nSER-CRLF-3\r\nSER-4\r'));
    expect(frameTexts(events)).toEqual(['<lineEnd:SER-LF-2\nSER-CRLF-3>', 'SER-4']);
    const [lineEnd] = events;
    expect(lineEnd?.kind === 'lineEnd' && lineEnd.reason).toBe(
      'the read holds LF (0x0a) at position 8: looks like the scanner ends reads with LF, not CR; set terminator: "\\n" on this input, or make the scanner send CR',
    );
  });

  it('terminator LF: a read holding a CR is reported with the hint to set terminator "\\r"', () => {
    const [event] = framer('\n').push(bytes('A-1\rA-2\n'));
    expect(event?.kind === 'lineEnd' && event.reason).toMatch(
      /holds CR \(0x0d\) at position 3: looks like the scanner ends reads with CR, not LF; set terminator: "\\r"/,
    );
  });

  it('gives the hint for other bytes only with a CR or LF terminator', () => {
    expect(framer('\r').lineEndHint(bytes('ABC'))).toBeUndefined();
    expect(framer('\r\n').lineEndHint(bytes('A\rB'))).toBeUndefined();
    expect(framer('\r').lineEndHint(bytes('A\nB'), 'head')).toMatch(
      /^head holds LF \(0x0a\) at position 1/,
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
        const events = feed(stxEtx(), [
          STREAM.subarray(0, a),
          STREAM.subarray(a, b),
          STREAM.subarray(b),
        ]);
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

  it('does not count the CR LF after an ETX, or filler before the next STX, into the noise', () => {
    const stream = bytes('\x02A\x03\r\nnoise\r\n \x02B\x03\r\n\x00\t \x02C\x03');
    for (let at = 0; at <= stream.length; at++) {
      const events = feed(stxEtx(), [stream.subarray(0, at), stream.subarray(at)]);
      expect(frameTexts(events), `split at ${at}`).toEqual(['A', '<noise:noise>', 'B', 'C']);
      const noise = events[1];
      expect(noise?.kind === 'noise' && noise.reason, `split at ${at}`).toBe(
        'bytes outside STX…ETX (5 bytes)',
      );
    }
    const f = stxEtx();
    f.push(bytes('\x02A\x03\r\nxy\r\n'));
    const [atEnd] = f.flush();
    expect(atEnd?.kind === 'noise' && [atEnd.bytes.toString('latin1'), atEnd.reason]).toEqual([
      'xy',
      'bytes outside STX…ETX (2 bytes)',
    ]);
  });

  it('reports a read whose ETX was lost (a new STX came first) and takes the next read', () => {
    expect(frameTexts(stxEtx().push(bytes('\x02LOST\x02GOOD\x03')))).toEqual([
      '<noise:LOST>',
      'GOOD',
    ]);
  });

  it('reports an overlong read once and recovers at its ETX, or at a new STX', () => {
    const f = stxEtx(4);
    expect(frameTexts(f.push(bytes('\x02ABCDEFG')))).toEqual([]);
    expect(frameTexts(f.push(bytes('HIJ\x03\x02OK\x03')))).toEqual([
      '<overlong:ABCDE:10@etx>',
      'OK',
    ]);
    expect(frameTexts(stxEtx(4).push(bytes('\x02ABCDEFG\x02OK\x03')))).toEqual([
      '<overlong:ABCDE:7@stx>',
      'OK',
    ]);
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
      fc.property(
        fc.array(alphabet, { maxLength: 100 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        fc.integer({ min: 1, max: 8 }),
        (streamBytes, cuts, maxLength) => {
          const stream = Buffer.from(streamBytes);
          const positions = [...new Set(cuts.map((c) => c % (stream.length + 1)))].sort(
            (a, b) => a - b,
          );
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
        },
      ),
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

  it('drops an overlong read up to the next silence and reports it there with its length', () => {
    const f = new Framer({ mode: 'silence', maxLength: 3 });
    expect(frameTexts(f.push(bytes('ABCDE')))).toEqual([]);
    expect(f.push(bytes('FGH'))).toEqual([]);
    expect(frameTexts(f.idle())).toEqual(['<overlong:ABCD:8@pause>']);
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
