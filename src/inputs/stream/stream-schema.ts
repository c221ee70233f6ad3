import { z } from 'zod';
import { byteString, maxReadLength } from '../schema-parts.js';
import { VERDICT_REASONS } from '../../config/verdict-reasons.js';

/**
 * Pause that ends an overlong serial/TCP read being dropped, in ms: far above the gaps inside one
 * read (a scanner sends a read in one burst), below the time between two scans.
 */
export const DEFAULT_OVERLONG_PAUSE_MS = 200;

/** Framing and acknowledgement keys shared by byte-stream inputs (serial, tcp). */
export const streamKeys = {
  framing: z
    .enum(['terminator', 'stxEtx', 'silence'])
    .default('terminator')
    .describe(
      'terminator = a read ends at `terminator`; stxEtx = a read sits between `stx` and `etx`; silence = a read ends when no byte came for `silenceMs`.',
    ),
  terminator: byteString
    .default('\r')
    .describe(
      'framing terminator: byte sequence that ends a read; YAML escapes such as "\\r\\n" work in double quotes.',
    ),
  stx: byteString
    .refine((s) => s.length === 1, 'must be one byte')
    .default('\x02')
    .describe('framing stxEtx: the byte that starts a read.'),
  etx: byteString
    .refine((s) => s.length === 1, 'must be one byte')
    .default('\x03')
    .describe('framing stxEtx: the byte that ends a read.'),
  silenceMs: z
    .number()
    .int()
    .min(1)
    .max(10_000)
    .default(50)
    .describe('framing silence: a read ends after this long without a byte, in ms.'),
  stripPrefix: byteString
    .optional()
    .describe('Bytes removed from the start of a read when present (a scanner-added prefix).'),
  stripSuffix: byteString
    .optional()
    .describe('Bytes removed from the end of a read when present (a scanner-added suffix).'),
  maxReadLength,
  overlongPauseMs: z
    .number()
    .int()
    .min(10)
    .max(10_000)
    .default(DEFAULT_OVERLONG_PAUSE_MS)
    .describe(
      'framing terminator and stxEtx: a read longer than maxReadLength is dropped (but for its first bytes) up to its terminator or ETX, or up to a pause this long without a byte, in ms; the next byte starts a new read.',
    ),
  ackBytes: byteString
    .optional()
    .describe(
      'Bytes written back to the scanner after a read is committed (many scanners beep on them); with ackOn verdict, only for a read that became a scan.',
    ),
  nakBytes: byteString
    .optional()
    .describe(
      'Bytes written back when a read is not taken: with ackOn verdict, every read that did not become a scan; with ackOn commit, one framing rejected (overlong, cut off, empty) or the buffer refused.',
    ),
  ackOn: z
    .enum(['commit', 'verdict'])
    .default('commit')
    .describe(
      "What ackBytes mean. verdict = the read became a scan and is stored (a refused, rejected, duplicate or no-read gets nakBytes: the operator hears it); commit = the read is stored, whatever the mapping made of it (a refused read is ack'd too). The default becomes verdict in a later release.",
    ),
  nakBytesByReason: z
    .partialRecord(z.enum(VERDICT_REASONS), byteString)
    .optional()
    .describe(
      `Bytes written back instead of nakBytes for a read not taken for this reason, e.g. { noContainer: "\\x15\\x15" } for a distinct beep; reasons: ${VERDICT_REASONS.join(', ')}.`,
    ),
};

/** The framing and acknowledgement keys of serial and tcp inputs. */
export type StreamInputConfig = z.infer<z.ZodObject<typeof streamKeys>>;
