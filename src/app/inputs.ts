import type { InputConfig } from '../config/schema.js';
import { inputKind } from '../inputs/registry.js';
import type { InputAdapter, IntakeSink } from '../inputs/types.js';
import type { Logger } from '../log.js';
import type { Clock } from '../clock.js';

/**
 * The adapter for one configured input, made by its kind (src/inputs/registry.ts). Each kind's
 * module (and its library: chokidar, serialport, mqtt) is loaded on first use only.
 */
export async function defaultInput(
  config: InputConfig,
  sink: IntakeSink,
  logger: Logger,
  extras: {
    env?: Record<string, string | undefined>;
    scrub?: (text: string) => string;
    now?: Clock;
    ha?: { mayConnect: () => boolean; willDelaySec?: number };
  } = {},
): Promise<InputAdapter> {
  const { env = {}, scrub, now, ha } = extras;
  // The app's clock, so a test that sets the app's time sets the inputs' receivedAt and dated folders too.
  return inputKind(config).create(config, {
    sink,
    logger,
    env,
    ...(scrub ? { scrub } : {}),
    ...(now ? { now } : {}),
    ...(ha ? { ha } : {}),
  });
}
