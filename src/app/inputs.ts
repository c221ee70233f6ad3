import type { InputConfig } from '../config/schema.js';
import type { InputAdapter, IntakeSink } from '../inputs/types.js';
import type { Logger } from '../log.js';
import type { Clock } from '../clock.js';

/**
 * The adapter for one configured input, by its `type`. Each type's module (and its library:
 * chokidar, serialport, mqtt) is loaded on first use only.
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
  const clock = now ? { now } : {};
  switch (config.type) {
    case 'files': {
      const { FilesInput } = await import('../inputs/files/files-input.js');
      return new FilesInput({ config, sink, logger, ...clock, ...(scrub ? { scrub } : {}) });
    }
    case 'serial': {
      const { SerialInput } = await import('../inputs/serial/serial-input.js');
      return new SerialInput({ config, sink, logger, ...clock });
    }
    case 'mqtt': {
      const { MqttInput } = await import('../inputs/mqtt/mqtt-input.js');
      return new MqttInput({ config, sink, logger, env, ...clock, ...(ha ? { ha } : {}) });
    }
    case 'tcp': {
      const { TcpInput } = await import('../inputs/tcp/tcp-input.js');
      return new TcpInput({ config, sink, logger, ...clock });
    }
    case 'http': {
      const { HttpIngestInput } = await import('../inputs/http/http-input.js');
      return new HttpIngestInput({ config, sink, logger, env, ...clock });
    }
  }
}
