import type { InputConfig } from '../config/schema.js';
import { inputKind } from '../inputs/registry.js';
import type { IntakeItem } from '../inputs/types.js';

/**
 * `try --payload`: what an input's own parsing makes of one raw message, by the very functions the
 * live input runs (its kind's `payload.items`), so `try` shows what the input would hand to the
 * mapping: an MQTT message on a topic, an HTTP request body, the content of a dropped file, a
 * framed read of a serial or TCP scanner (each kind's README.md says which).
 *
 * A payload the input would refuse as a whole (an HTTP body that is not JSON, a file in UTF-16)
 * comes back as one rejection with the input's reason.
 */
export async function payloadItems(
  input: InputConfig,
  payload: Buffer,
  options: { receivedAt: Date; topic: string | undefined },
): Promise<IntakeItem[]> {
  return inputKind(input).payload.items(input, payload, options);
}
