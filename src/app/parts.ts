import type { InputConfig } from '../config/schema.js';
import type { Logger } from '../log.js';
import type { InputAdapter, IntakeSink } from '../inputs/types.js';

/**
 * The gateway's parts as {@link Component}s, and the inputs' part. Each other part has its file:
 * `buffer-parts.ts` (buffer, back-pressure, retention, disk guard, intake), `sandbox-part.ts`,
 * `delivery-parts.ts` (upstream client, SFTP route, delivery), `status-events-part.ts`,
 * `product-check-part.ts`, `ha-part.ts`, `http-part.ts`; `part-helpers.ts` what they share. `buildApp` (src/app.ts) constructs every part with its
 * dependencies before anything starts; a part's constructor does no I/O, its `start()` does (opens
 * the buffer, reads a key file, listens), and its `stop()` undoes it. Optional parts (the embedded
 * sandbox, status events, the SFTP route, the product check) are present or absent by
 * construction, decided by the configuration.
 *
 * The modules of optional parts (the embedded sandbox, each input type with its library, the SFTP
 * route, the status-event reader with its Kafka client) are loaded by `import()` when the part
 * starts, so a configuration that does not use them does not pay their memory and start-up time
 * (figures in docs/performance.md, "Footprint"). The Kafka client, the largest of them, is loaded
 * only in the `ready` phase, once the gateway takes reads.
 */

/**
 * One part of the running gateway as the app starts and stops it: the parts start in the order of
 * the list `buildApp` (src/app.ts) makes, then each one's `ready` runs in the same order (the
 * gateway takes reads from then on), and they stop in reverse.
 */
export interface Component {
  /** Names the part in the log and in a failed stop's error (`stopping failed: delivery, input line-3`). */
  readonly name: string;
  start(): Promise<void>;
  /**
   * Runs once every part started: what is not needed to take reads starts here (status events),
   * so it does not delay the start. Not called when the start failed.
   */
  ready?(): void;
  /** Called once the start began, also when it failed half way: it must tolerate a part not (fully) started. */
  stop(): Promise<void>;
}

/** Makes the adapter of one input (src/app/inputs.ts has the default, by `type`). */
export type InputFactory = (
  config: InputConfig,
  sink: IntakeSink,
  logger: Logger,
) => InputAdapter | Promise<InputAdapter>;

/**
 * The inputs that run, in start order: the status lists them, back-pressure pauses them, the HTTP
 * part serves their routes, a reload replaces them.
 */
export class InputSet {
  readonly adapters: InputAdapter[] = [];

  /** Pauses or resumes every input that can wait (`InputAdapter.setPaused`), logging each. */
  setPaused(paused: boolean, why: string, logger: Logger): void {
    for (const input of this.adapters) {
      if (!input.setPaused) continue;
      input.setPaused(paused);
      (paused ? logger.warn.bind(logger) : logger.info.bind(logger))(
        { component: 'buffer', input: input.id, paused, why },
        paused ? 'input paused by back-pressure' : 'input resumed',
      );
    }
  }

  remove(id: string): InputAdapter | undefined {
    const at = this.adapters.findIndex((i) => i.id === id);
    return at < 0 ? undefined : this.adapters.splice(at, 1)[0];
  }
}

/** One input: its adapter is made (its module loaded) at start, and started paused while intake is paused. */
export function inputPart(
  config: InputConfig,
  deps: {
    create: InputFactory;
    sink: IntakeSink;
    inputs: InputSet;
    intakePaused: () => boolean;
    logger: Logger;
  },
): Component {
  let input: InputAdapter | undefined;
  return {
    get name() {
      return `input ${input?.id ?? config.id}`;
    },
    async start() {
      input = await deps.create(config, deps.sink, deps.logger);
      deps.inputs.adapters.push(input);
      await input.start();
      if (deps.intakePaused()) input.setPaused?.(true);
    },
    stop: async () => input?.stop(),
  };
}
