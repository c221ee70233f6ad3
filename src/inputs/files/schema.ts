import { z } from 'zod';
import { inputBaseKeys } from '../../config/input-kind.js';
import { jsonFieldsSchema, maxReadLength } from '../schema-parts.js';

/** `type: files`: a watched folder (docs/inputs.md, "files"). */
export const filesInputSchema = z
  .object({
    ...inputBaseKeys,
    type: z.literal('files'),
    dir: z
      .string()
      .min(1)
      .describe('Folder to watch; `processed/` and `failed/` are created inside it.'),
    format: z
      .enum(['lines', 'csv', 'ndjson', 'json'])
      .default('lines')
      .describe(
        'lines = one barcode per line; csv = header row, then rows; ndjson = one JSON read per line; json = a JSON array of reads.',
      ),
    barcodeColumn: z
      .string()
      .default('barcode')
      .describe('csv: header of the column holding the barcode.'),
    timeColumn: z
      .string()
      .optional()
      .describe('csv: header of the column holding the read time stamp.'),
    dcpColumn: z
      .string()
      .optional()
      .describe('csv: header of the column holding the DCP key (overrides `dcp` where filled).'),
    parentColumn: z
      .string()
      .optional()
      .describe('csv: header of the column holding a parent reference.'),
    attributeColumns: z
      .record(z.string().min(1), z.string().min(1))
      .optional()
      .describe('csv: attributes taken from columns, as attribute key → column header.'),
    delimiter: z.string().length(1).default(',').describe('csv: field delimiter.'),
    fields: jsonFieldsSchema
      .prefault({})
      .describe('ndjson and json: where the fields of a read are in each object.'),
    maxReadLength,
    rememberFilesDays: z
      .number()
      .int()
      .min(0)
      .default(30)
      .describe(
        'A file whose content was ingested within this many days is not ingested again (content hash); 0 = off.',
      ),
    stableMs: z
      .number()
      .int()
      .min(0)
      .default(500)
      .describe('A file is read once its size has not changed for this long, in ms.'),
    usePolling: z
      .boolean()
      .default(false)
      .describe('Poll instead of inotify (needed on SMB/NFS shares).'),
    maxFileBytes: z
      .number()
      .int()
      .min(1)
      .default(2 * 1024 * 1024 * 1024)
      .describe(
        'Largest file taken, in bytes; a larger file goes to failed/ with the reason (files are read in chunks, so memory does not grow with the size).',
      ),
    allowHardLinks: z
      .boolean()
      .default(false)
      .describe(
        'Read a file that has more than one name (a hard link). Off by default: a hard link needs no right on the file it names, so anyone who may drop files could have the gateway read and show a key or password file; such a file goes to failed/ unread. Turn on only for a writer that makes hard links on purpose.',
      ),
  })
  .strict();

/** One `type: files` entry, as the schema makes it. */
export type FilesInputConfig = z.infer<typeof filesInputSchema>;
