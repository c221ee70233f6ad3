import type { IntakeItem } from '../types.js';
import { silentLogger } from '../../log.js';
import { FramedStream } from './framed-stream.js';
import type { StreamInputConfig } from './stream-schema.js';

/**
 * `try --payload` for a serial or TCP input: the items the input makes of `payload` received in
 * one piece, by the input's own {@link FramedStream} (terminator, STX…ETX or silence, stripPrefix
 * and stripSuffix, overlong and empty reads). What ends the payload is the end of the stream, so
 * bytes after the last terminator (or ETX) are a read cut off, as when the connection closes
 * there; in silence framing they are the last read. One payload may hold several reads.
 */
export async function framedItems(
  input: StreamInputConfig & { id: string },
  payload: Buffer,
  receivedAt: Date,
  origin: Record<string, string | number>,
): Promise<IntakeItem[]> {
  const items: IntakeItem[] = [];
  const stream = new FramedStream({
    inputId: input.id,
    config: input,
    sink: {
      submit: (taken) => {
        items.push(...taken);
        return Promise.resolve();
      },
    },
    logger: silentLogger(),
    origin,
    now: () => receivedAt.getTime(),
  });
  stream.push(payload);
  await stream.close(
    'the payload ended before the read was complete (its terminator or ETX is missing; the live input waits for it)',
  );
  return items;
}
