import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { serialInputSchema, type SerialInputConfig } from '../../src/inputs/serial/schema.js';
import { FramedStream } from '../../src/inputs/stream/framed-stream.js';
import { silentLogger } from '../../src/log.js';
import { FakeSink } from '../helpers/fake-sink.js';

/** FramedStream's timers (the pause that ends an overlong read) and rejection reasons, on a fake clock. */

let sink: FakeSink;
beforeEach(() => {
  vi.useFakeTimers();
  sink = new FakeSink();
});
afterEach(() => {
  vi.useRealTimers();
});

function stream(overrides: Partial<SerialInputConfig> = {}): FramedStream {
  const config = serialInputSchema.parse({
    id: 'line3',
    dcp: 'GI',
    type: 'serial',
    path: '/dev/null',
    ...overrides,
  });
  return new FramedStream({
    inputId: 'line3',
    config,
    sink,
    logger: silentLogger(),
    origin: { port: '/dev/null' },
  });
}

const bytes = (text: string): Buffer => Buffer.from(text, 'latin1');
const L256 = 'L'.repeat(256);

describe('FramedStream: an overlong read ends at a pause', () => {
  it('reports the 10,240 dropped bytes after 200 ms without a byte, and the next read survives', async () => {
    const s = stream();
    s.push(Buffer.alloc(10_240, 'L'));
    await vi.advanceTimersByTimeAsync(199);
    expect(sink.items).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    s.push(bytes('SER-AFTER-LONG-8\r'));
    await vi.advanceTimersByTimeAsync(0);
    expect(sink.texts()).toEqual([
      `<read longer than 4096 bytes: 10240 bytes up to a pause of 200 ms were dropped; the first 256 are kept|${L256}>`,
      'SER-AFTER-LONG-8',
    ]);
  });

  it('keeps dropping while bytes keep coming, and takes overlongPauseMs from the configuration', async () => {
    const s = stream({ overlongPauseMs: 500 });
    s.push(Buffer.alloc(5000, 'L'));
    await vi.advanceTimersByTimeAsync(400);
    s.push(Buffer.alloc(100, 'L'));
    await vi.advanceTimersByTimeAsync(499);
    expect(sink.items).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(sink.texts()).toEqual([
      `<read longer than 4096 bytes: 5100 bytes up to a pause of 500 ms were dropped; the first 256 are kept|${L256}>`,
    ]);
  });

  it('reports an overlong read ended by its terminator or by the end of the stream with its length', async () => {
    const s = stream({ maxReadLength: 8 });
    s.push(bytes('MUCH-TOO-LONG\rOK\rSTILL-TOO-LONG'));
    s.end('device closed before the read was complete');
    await vi.advanceTimersByTimeAsync(0);
    expect(sink.texts()).toEqual([
      '<read longer than 8 bytes: 13 bytes up to its terminator were dropped; the first 9 are kept|MUCH-TOO->',
      'OK',
      '<read longer than 8 bytes: 14 bytes up to the end of the stream were dropped; the first 9 are kept|STILL-TOO>',
    ]);
    // No pause timer left behind by end().
    expect(vi.getTimerCount()).toBe(0);
  });

  it('names the ETX or the next STX as the end of an overlong STX…ETX read', async () => {
    const s = stream({ framing: 'stxEtx', maxReadLength: 4 });
    s.push(bytes('\x02ABCDEF\x03\x02GHIJKL\x02OK\x03'));
    await vi.advanceTimersByTimeAsync(0);
    expect(sink.texts()).toEqual([
      '<read longer than 4 bytes: 6 bytes up to its ETX were dropped; the first 5 are kept|ABCDE>',
      '<read longer than 4 bytes: 6 bytes up to the next STX (its ETX never came) were dropped; the first 5 are kept|GHIJK>',
      'OK',
    ]);
  });

  it('uses silenceMs as the pause in silence framing', async () => {
    const s = stream({ framing: 'silence', silenceMs: 40, maxReadLength: 4 });
    s.push(bytes('ABCDEFGH'));
    await vi.advanceTimersByTimeAsync(40);
    expect(sink.texts()).toEqual([
      '<read longer than 4 bytes: 8 bytes up to a pause of 40 ms were dropped; the first 5 are kept|ABCDE>',
    ]);
  });
});

describe('FramedStream: line ends', () => {
  it('takes every read of a CRLF scanner on a CR terminator (not rejected as <LF>SER-AFTER-4)', async () => {
    const s = stream();
    s.push(bytes('SER-CRLF-1\r'));
    s.push(bytes('\nSER-AFTER-4\r\n'));
    await vi.advanceTimersByTimeAsync(0);
    expect(sink.texts()).toEqual(['SER-CRLF-1', 'SER-AFTER-4']);
  });

  it('rejects a read holding a LF on a CR terminator with the hint, also in overlong and cut-off reasons', async () => {
    const s = stream({ maxReadLength: 20, nakBytes: '\x15' });
    const written: string[] = [];
    s.setWriter((b) => written.push(b.toString('latin1')));
    s.push(bytes('SER-LF-2\nSER-CRLF-3\r'));
    s.push(bytes('A-1\nA-2\nA-3\nA-4\nA-5\nA-6\n'));
    await vi.advanceTimersByTimeAsync(200);
    s.push(bytes('B-1\n'));
    s.end('device closed before the read was complete');
    await vi.advanceTimersByTimeAsync(0);
    const hint =
      'looks like the scanner ends reads with LF, not CR; set terminator: "\\n" on this input, or make the scanner send CR';
    expect(sink.texts()).toEqual([
      `<the read holds LF (0x0a) at position 8: ${hint}|SER-LF-2\nSER-CRLF-3>`,
      `<read longer than 20 bytes: 24 bytes up to a pause of 200 ms were dropped; the first 21 are kept; it holds LF (0x0a) at position 3: ${hint}|A-1\nA-2\nA-3\nA-4\nA-5\nA>`,
      `<device closed before the read was complete; it holds LF (0x0a) at position 3: ${hint}|B-1\n>`,
    ]);
    expect(written.join('')).toBe('\x15\x15\x15');
  });
});
