import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../paths.js';
import { renderOpenApiYaml } from './openapi.js';

/**
 * Writes docs/upstream-openapi.yaml from the zod contract. Run after a contract change:
 * `npm run build && node dist/src/upstream/generate-openapi.js`. Importing this module writes the file.
 */
export const OPENAPI_FILE = join(PACKAGE_ROOT, 'docs', 'upstream-openapi.yaml');

writeFileSync(OPENAPI_FILE, renderOpenApiYaml());
