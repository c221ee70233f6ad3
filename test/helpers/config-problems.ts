import { parseConfigText, type ConfigProblem } from '../../src/config/load.js';
import { isGatewayError } from '../../src/errors.js';

/** A minimal valid configuration (one DCP, one serial input) that tests add to. */
export const BASE_CONFIG = `site: { id: s1, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:8090, authUrl: http://127.0.0.1:8090, clientId: c1 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }
inputs:
  - { id: gi, type: serial, path: /dev/null, dcp: GI-01 }
`;

/** The problems `parseConfigText` refuses `text` with (as `site.yaml`); throws when it is accepted. */
export function problemsOf(text: string): ConfigProblem[] {
  try {
    parseConfigText(text, 'site.yaml');
  } catch (err) {
    if (isGatewayError(err) && Array.isArray(err.details.problems))
      return err.details.problems as ConfigProblem[];
    throw err;
  }
  throw new Error('expected the configuration to be refused');
}

/** `line:column path: message` of each problem, for compact expectations. */
export function problemLines(text: string): string[] {
  return problemsOf(text).map((p) => `${p.line}:${p.column} ${p.path}: ${p.message}`);
}
