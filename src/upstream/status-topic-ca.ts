import { readFileSync } from 'node:fs';
import { ErrorCodes, GatewayError } from '../errors.js';

/**
 * The CA file of the status-event reader, apart from the reader (src/upstream/status-topic.ts) so
 * the daemon checks it at start without loading the Kafka client, which it loads only once it
 * takes reads (docs/performance.md "Footprint").
 */

/**
 * The certificates of a PEM file for the reader's `extraCaPems`.
 *
 * @throws GatewayError `SCANGW_E_CONFIG` when it cannot be read or holds no certificate.
 */
export function readCaFile(file: string): string {
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch (err) {
    throw new GatewayError(
      ErrorCodes.CONFIG,
      `upstream.statusEvents.caFile ${file} cannot be read`,
      { cause: err },
    );
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----'))
    throw new GatewayError(
      ErrorCodes.CONFIG,
      `upstream.statusEvents.caFile ${file} holds no PEM certificate`,
    );
  return pem;
}
