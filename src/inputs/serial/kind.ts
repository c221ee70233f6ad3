import type { InputKind } from '../kind.js';
import { serialInputSchema, type SerialInputConfig } from './schema.js';

/** `type: serial`: a scanner on a serial port (README.md beside this file; docs/inputs.md, "serial"). */
export const serialKind: InputKind<SerialInputConfig> = {
  type: 'serial',
  schema: serialInputSchema,
  // The port is wired to one box: the other node cannot open it.
  haMovable: false,
  haAdvice: 'use a serial device server on TCP (docs/high-availability.md)',
  acknowledges: ['commit', 'verdict'],
  async create(config, { sink, logger, now }) {
    const { SerialInput } = await import('./serial-input.js');
    return new SerialInput({ config, sink, logger, ...(now ? { now } : {}) });
  },
  resources: (config) => [
    {
      kind: 'device',
      key: 'path',
      path: config.path,
      accessHint: 'serial devices belong to the dialout group',
    },
  ],
  fieldSources: () => ({ kind: 'none', why: 'a serial input hands only the code' }),
  secrets: () => [],
  payload: {
    isJson: () => false,
    // The bytes as the scanner sends them, cut into reads by the input's own framing.
    items: async (config, payload, { receivedAt }) => {
      const { framedItems } = await import('../stream/try-frames.js');
      return framedItems(config, payload, receivedAt, { port: config.path });
    },
  },
  starter: {
    id: 'scanner',
    text: (
      id,
    ) => `  # A scanner on a serial port or USB (CDC/ACM, FTDI) adapter (docs/inputs.md, "serial").
  # ls -l /dev/serial/by-id/ names it; that name survives re-plugging, /dev/ttyUSB0 may not.
  - id: ${id}
    type: serial
    path: /dev/serial/by-id/CHANGE-ME
    baudRate: 9600               # the scanner's setting: 9600 8N1 is the usual factory default
    terminator: "\\r"             # what ends a read: "\\r", "\\r\\n" or "\\n"
    dcp: DCP-01
`,
  },
};
