import { z } from 'zod';
import { key } from './common-schemas.js';

/**
 * The `inputs` section of the configuration: one schema per input type, joined into a
 * discriminated union on `type`. Part of the one configuration schema (schema.ts).
 */

const inputBase = {
  id: key.describe('Identifier of this input, unique in the file.'),
  dcp: key.describe('Key of the DCP (from `dcps`) that reads of this input belong to.'),
  noReadStrings: z
    .array(z.string())
    .default(['NOREAD', 'ERROR', 'NR', 'NoRead'])
    .describe('Texts the scanner sends when it could not read a code: counted, never sent.'),
};

export const filesInputSchema = z
  .object({
    ...inputBase,
    type: z.literal('files'),
    dir: z.string().min(1).describe('Folder to watch; `processed/` and `failed/` are created inside it.'),
    format: z.enum(['lines', 'csv']).default('lines').describe('lines = one barcode per line; csv = header row, then rows.'),
    barcodeColumn: z.string().default('barcode').describe('csv: header of the column holding the barcode.'),
    timeColumn: z.string().optional().describe('csv: header of the column holding the read time stamp.'),
    delimiter: z.string().length(1).default(',').describe('csv: field delimiter.'),
    stableMs: z
      .number()
      .int()
      .min(0)
      .default(500)
      .describe('A file is read once its size has not changed for this long, in ms.'),
    usePolling: z.boolean().default(false).describe('Poll instead of inotify (needed on SMB/NFS shares).'),
  })
  .strict();

export const serialInputSchema = z
  .object({
    ...inputBase,
    type: z.literal('serial'),
    path: z.string().min(1).describe('Device path; prefer /dev/serial/by-id/… which survives re-plugging.'),
    baudRate: z.number().int().positive().default(9600),
    dataBits: z.union([z.literal(5), z.literal(6), z.literal(7), z.literal(8)]).default(8),
    stopBits: z.union([z.literal(1), z.literal(1.5), z.literal(2)]).default(1),
    parity: z.enum(['none', 'even', 'odd', 'mark', 'space']).default('none'),
    terminator: z
      .string()
      .min(1)
      .default('\r')
      .describe('Byte sequence that ends a read; YAML escapes such as "\\r\\n" work in double quotes.'),
    maxReadLength: z.number().int().positive().default(4096).describe('Longest read in bytes; longer is rejected.'),
    reconnectMs: z.number().int().positive().default(2000).describe('Delay before reopening a lost device, in ms.'),
  })
  .strict();

export const inputSchema = z.discriminatedUnion('type', [filesInputSchema, serialInputSchema]);


export type InputConfig = z.infer<typeof inputSchema>;
export type FilesInputConfig = z.infer<typeof filesInputSchema>;
export type SerialInputConfig = z.infer<typeof serialInputSchema>;
