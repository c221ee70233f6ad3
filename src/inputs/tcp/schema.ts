import { z } from 'zod';
import { inputBaseKeys } from '../../config/input-kind.js';
import { streamKeys } from '../stream/stream-schema.js';

/** `type: tcp`: network readers, as client or server, framed like serial (docs/inputs.md, "tcp"). */
export const tcpInputSchema = z
  .object({
    ...inputBaseKeys,
    ...streamKeys,
    type: z.literal('tcp'),
    mode: z
      .enum(['client', 'server'])
      .describe(
        "Who opens the connection. server = the scanner connects to us (the reader is set up with the gateway's address and port as its target; we listen on `host`:`port`); client = we connect to the scanner (the reader listens, as many fixed-mount cameras do by default).",
      ),
    host: z
      .string()
      .min(1)
      .describe(
        "client: the reader's host name or address; server: the address to listen on (0.0.0.0 = all).",
      ),
    port: z
      .number()
      .int()
      .min(0)
      .max(65_535)
      .describe("client: the reader's port; server: the port to listen on."),
    keepAliveMs: z
      .number()
      .int()
      .min(0)
      .default(10_000)
      .describe('TCP keepalive: idle time before the first probe, in ms; 0 = off.'),
    idleTimeoutMs: z
      .number()
      .int()
      .min(0)
      .default(0)
      .describe(
        'Drop (client: and reconnect) a connection that sent nothing for this long, in ms; 0 = never. For readers that send heartbeats.',
      ),
    connectTimeoutMs: z
      .number()
      .int()
      .positive()
      .default(10_000)
      .describe('client: longest wait for a connection, in ms.'),
    reconnectMs: z
      .number()
      .int()
      .positive()
      .default(1000)
      .describe('client: first delay before reconnecting, in ms; doubles up to reconnectMaxMs.'),
    reconnectMaxMs: z
      .number()
      .int()
      .positive()
      .default(30_000)
      .describe('client: longest delay between two connection attempts, in ms.'),
    maxConnections: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(32)
      .describe('server: most readers connected at once; more are refused.'),
    expectReaders: z
      .number()
      .int()
      .min(0)
      .max(1000)
      .default(0)
      .describe(
        'server: readers that should be connected; fewer is a problem on the page and /healthz (SCANGW_H_INPUT_NO_READER). 0 = none expected (the input still says `waiting for reader` while none is).',
      ),
  })
  .strict();

/** One `type: tcp` entry, as the schema makes it. */
export type TcpInputConfig = z.infer<typeof tcpInputSchema>;
