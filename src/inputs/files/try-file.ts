import { mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rejectionItem } from '../input-items.js';
import type { IntakeItem } from '../types.js';
import type { FilesInputConfig } from './schema.js';
import { parseInboxFile } from './take-file.js';

/**
 * `try --payload` for a files input: the content of one dropped file in the input's `format` (for
 * csv its header row, then rows), parsed from a temporary file by the parser the input uses. A file
 * the input would refuse whole comes back as one rejection with the reason it would move it to
 * failed/ with.
 */
export async function fileItems(
  input: FilesInputConfig,
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
