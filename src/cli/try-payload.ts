import { mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { InputConfig } from '../config/schema.js';
import { DEFAULT_MAX_READ_LENGTH } from '../config/input-schemas.js';
import { parseInboxFile } from '../inputs/files/take-file.js';
import { ingestBodyItems } from '../inputs/http/ingest-body.js';
import { INGEST_PATH } from '../inputs/http/ingest-routes.js';
import { rejectionItem } from '../inputs/input-items.js';
import { messageToItem } from '../inputs/mqtt/mqtt-payload.js';
import { FramedStream } from '../inputs/stream/framed-stream.js';
import type { IntakeItem } from '../inputs/types.js';
import { silentLogger } from '../log.js';

/**
 * `try --payload`: what an input's own parsing makes of one raw message, by the very functions the
 * live input runs, so `try` shows what the input would hand to the mapping:
 *
 * - `mqtt`: one message on `topic` ({@link messageToItem}: size limit, `dcpFromTopic`, text or JSON
 *   fields and `attributeFields`);
 * - `http`: one request body, a read or an array of reads ({@link ingestBodyItems});
 * - `files`: the content of one dropped file in the input's `format` (for csv its header row, then
 *   rows), parsed from a temporary file by the parser the input uses ({@link parseInboxFile});
 * - `serial`, `tcp`: the bytes as the scanner sends them, framing included, cut into reads by the
 *   input's own framing ({@link framedItems}: terminator, STX…ETX or silence, stripPrefix and
 *   stripSuffix, overlong and empty reads); one payload may hold several reads.
 *
 * A payload the input would refuse as a whole (an HTTP body that is not JSON, a file in UTF-16)
 * comes back as one rejection with the input's reason.
 */
export async function payloadItems(
  input: InputConfig,
  payload: Buffer,
  options: { receivedAt: Date; topic: string | undefined },
): Promise<IntakeItem[]> {
  const { receivedAt } = options;
  switch (input.type) {
    case 'mqtt':
      return [
        messageToItem(input, options.topic ?? defaultTopic(input.topics), payload, receivedAt),
      ];
    case 'http': {
      const origin = { http: `POST ${INGEST_PATH}`, peer: 'scan-gateway try' };
      let value: unknown;
      try {
        value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(payload));
      } catch (err) {
        return [
          rejectionItem(
            input.id,
            payload,
            err instanceof SyntaxError
              ? `body is not JSON: ${err.message} (the input answers 400)`
              : 'body is not valid UTF-8 (the input answers 400)',
            receivedAt,
            origin,
          ),
        ];
      }
      const parsed = ingestBodyItems(value, {
        inputId: input.id,
        fields: input.fields,
        receivedAt,
        origin,
        maxReadLength: input.maxReadLength ?? DEFAULT_MAX_READ_LENGTH,
      });
      if (!parsed.ok)
        return [
          rejectionItem(
            input.id,
            payload,
            `${parsed.message}${parsed.field ? ` (field ${parsed.field})` : ''} (the input answers 400)`,
            receivedAt,
            origin,
          ),
        ];
      return parsed.items;
    }
    case 'files':
      return fileItems(input, payload, receivedAt);
    case 'serial':
    case 'tcp':
      return framedItems(input, payload, receivedAt);
  }
}

/**
 * The items a serial or TCP input makes of `payload` received in one piece, by the input's own
 * {@link FramedStream}: what ends the payload is the end of the stream, so bytes after the last
 * terminator (or ETX) are a read cut off, as when the connection closes there; in silence framing
 * they are the last read.
 */
async function framedItems(
  input: Extract<InputConfig, { type: 'serial' | 'tcp' }>,
  payload: Buffer,
  receivedAt: Date,
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
    origin: input.type === 'serial' ? { port: input.path } : { peer: 'scan-gateway try' },
    now: () => receivedAt.getTime(),
  });
  stream.push(payload);
  await stream.close(
    'the payload ended before the read was complete (its terminator or ETX is missing; the live input waits for it)',
  );
  return items;
}

/** The topic of a message when `--topic` is not given: the first topic filter as written (no `dcpFromTopic` to fill). */
function defaultTopic(topics: readonly string[]): string {
  return topics[0] ?? '';
}

async function fileItems(
  input: Extract<InputConfig, { type: 'files' }>,
  payload: Buffer,
  receivedAt: Date,
): Promise<IntakeItem[]> {
  const dir = await mkdtemp(join(tmpdir(), 'scan-gateway-try-'));
  const fileName = `payload.${input.format === 'lines' ? 'txt' : input.format}`;
  const path = join(dir, fileName);
  try {
    await writeFile(path, payload, { mode: 0o600 });
    const handle = await open(path, 'r');
    try {
      return await parseInboxFile(input, handle, {
        inputId: input.id,
        fileName,
        receivedAt,
        maxReadLength: input.maxReadLength,
      });
    } catch (err) {
      // The input moves such a file to failed/ with this reason.
      return [
        rejectionItem(
          input.id,
          payload.subarray(0, 256),
          `the whole file is refused (moved to failed/): ${(err as Error).message}`,
          receivedAt,
          { file: fileName },
        ),
      ];
    } finally {
      await handle.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
