import { z } from 'zod';
import { inputBaseKeys } from '../../config/input-kind.js';
import { streamKeys } from '../stream/stream-schema.js';

/** `type: serial`: a scanner on a serial port (docs/inputs.md, "serial"). */
export const serialInputSchema = z
  .object({
    ...inputBaseKeys,
    ...streamKeys,
    type: z.literal('serial'),
    path: z
      .string()
      .min(1)
      .describe('Device path; prefer /dev/serial/by-id/… which survives re-plugging.'),
    baudRate: z.number().int().positive().default(9600),
    dataBits: z.union([z.literal(5), z.literal(6), z.literal(7), z.literal(8)]).default(8),
    stopBits: z.union([z.literal(1), z.literal(1.5), z.literal(2)]).default(1),
    parity: z.enum(['none', 'even', 'odd', 'mark', 'space']).default('none'),
    flowControl: z
      .enum(['none', 'rtscts', 'xonxoff'])
      .default('none')
      .describe('none; rtscts = hardware (RTS/CTS lines); xonxoff = software (XON/XOFF bytes).'),
    reconnectMs: z
      .number()
      .int()
      .positive()
      .default(2000)
      .describe('First delay before reopening a lost device, in ms; doubles up to reconnectMaxMs.'),
    reconnectMaxMs: z
      .number()
      .int()
      .positive()
      .default(10_000)
      .describe('Longest delay between two reopen attempts, in ms.'),
  })
  .strict();

/** One `type: serial` entry, as the schema makes it. */
export type SerialInputConfig = z.infer<typeof serialInputSchema>;
