import type { InputKind } from '../kind.js';
import { fileSinkOf } from './file-sink.js';
import { filesInputSchema, type FilesInputConfig } from './schema.js';

/** `type: files`: a watched folder (README.md beside this file; docs/inputs.md, "files"). */
export const filesKind: InputKind<FilesInputConfig> = {
  type: 'files',
  schema: filesInputSchema,
  haMovable: true,
  acknowledges: ['commit'],
  async create(config, { sink, logger, now, scrub }) {
    const { FilesInput } = await import('./files-input.js');
    return new FilesInput({
      config,
      sink: fileSinkOf(sink, config.id),
      logger,
      ...(now ? { now } : {}),
      ...(scrub ? { scrub } : {}),
    });
  },
  resources: (config) => [{ kind: 'folder', key: 'dir', path: config.dir }],
  fieldSources(config) {
    if (config.format === 'lines')
      return { kind: 'none', why: 'its files are lines: only the code' };
    if (config.format === 'csv')
      return {
        kind: 'only',
        keys: Object.keys(config.attributeColumns ?? {}),
        why: 'its CSV rows give fields only by attributeColumns',
      };
    return {
      kind: 'json',
      keys: Object.keys(config.fields.attributeFields ?? {}),
      objectPath: config.fields.attributes,
    };
  },
  secrets: () => [],
  payload: {
    isJson: (config) => config.format !== 'lines' && config.format !== 'csv',
    async items(config, payload, { receivedAt }) {
      const { fileItems } = await import('./try-file.js');
      return fileItems(config, payload, receivedAt);
    },
    emptyHint: (config) =>
      config.format === 'csv' ? ' (a csv payload is the header row, then the rows)' : undefined,
  },
  starter: {
    id: 'inbox',
    text: (
      id,
      o,
    ) => `  # A folder a PC drops exports into (docs/inputs.md, "files"; how the PC gets them there:
  # docs/operations.md, "The inbox"). Read files move to processed/<date>/, unreadable ones to failed/.
  - id: ${id}
    type: files
    dir: ${o.dataDir}/${id}
    format: csv                  # lines | csv | ndjson | json
    barcodeColumn: barcode       # csv: the header of the barcode column
    timeColumn: read_at          # csv: the header of the read time (ISO 8601); without it: the time the file is read
    dcp: DCP-01
    # usePolling: true           # on an SMB or NFS mount, where inotify sees no changes
`,
  },
  runHint: (config) => `drop ${config.format} files for DCP ${config.dcp} into ${config.dir}`,
};
