import type { InputConfig } from '../config/schema.js';
import { inputKind } from '../inputs/registry.js';
import type { InputAdapter, IntakeSink } from '../inputs/types.js';
import type { Logger } from '../log.js';
import type { Clock } from '../clock.js';
import { ErrorCodes, GatewayError } from '../errors.js';

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

/** Makes the adapter of one input ({@link defaultInput} by default, by its kind). */
export type InputFactory = (
  config: InputConfig,
  sink: IntakeSink,
  logger: Logger,
) => InputAdapter | Promise<InputAdapter>;

/** An input whose stop failed, with why. */
export interface InputStopFailure {
  id: string;
  err: unknown;
}

/**
 * The one owner of the running inputs, by id: the app starts the configured ones through it, a
 * reload adds and removes them, `ha` starts them all on taking over and clears them on stepping
 * down; the status lists them, back-pressure pauses them, the HTTP part serves their routes.
 * As a part of the app (without `ha`) it starts the configured inputs in order and stops them
 * in reverse.
 */
export class InputSupervisor {
  readonly name = 'inputs';
  private readonly running: InputAdapter[] = [];

  constructor(
    private readonly deps: {
      /** The inputs the app starts (the configuration at start). */
      configured: readonly InputConfig[];
      create: InputFactory;
      sink: IntakeSink;
      /** True while intake is paused (back-pressure): a new input starts paused. */
      intakePaused: () => boolean;
      logger: Logger;
    },
  ) {}

  /** The running adapters, in start order. */
  get adapters(): readonly InputAdapter[] {
    return this.running;
  }

  /** The running adapter of `id`. */
  get(id: string): InputAdapter | undefined {
    return this.running.find((i) => i.id === id);
  }

  /**
   * Makes and starts the adapter of `config` (its module loaded now), paused while intake is.
   * An adapter whose start fails is kept, so a stop still settles what it began.
   *
   * @throws GatewayError `SCANGW_E_INTERNAL` when an input of that id runs already; whatever the
   *   adapter's start throws.
   */
  async add(config: InputConfig): Promise<void> {
    if (this.get(config.id))
      throw new GatewayError(ErrorCodes.INTERNAL, `input ${config.id} runs already`);
    const input = await this.deps.create(config, this.deps.sink, this.deps.logger);
    this.running.push(input);
    await input.start();
    if (this.deps.intakePaused()) input.setPaused?.(true);
  }

  /** Stops the input `id` and forgets it; nothing when it does not run. Rejects as its stop does. */
  async remove(id: string): Promise<void> {
    const at = this.running.findIndex((i) => i.id === id);
    if (at < 0) return;
    const [input] = this.running.splice(at, 1);
    await input!.stop();
  }

  /** Stops every running input at once and forgets them all; resolves with those whose stop failed. */
  async clear(): Promise<InputStopFailure[]> {
    const inputs = this.running.splice(0);
    const results = await Promise.allSettled(inputs.map((i) => i.stop()));
    return results.flatMap((r, i) =>
      r.status === 'rejected' ? [{ id: inputs[i]!.id, err: r.reason as unknown }] : [],
    );
  }

  /** Pauses or resumes every input that can wait (`InputAdapter.setPaused`), logging each. */
  setPaused(paused: boolean, why: string, logger: Logger): void {
    for (const input of this.running) {
      if (!input.setPaused) continue;
      input.setPaused(paused);
      (paused ? logger.warn.bind(logger) : logger.info.bind(logger))(
        { component: 'buffer', input: input.id, paused, why },
        paused ? 'input paused by back-pressure' : 'input resumed',
      );
    }
  }

  /** Starts the configured inputs in order; the first that fails stops the start. */
  async start(): Promise<void> {
    for (const config of this.deps.configured) await this.add(config);
  }

  /**
   * Stops the running inputs in reverse start order, each even when an earlier one failed.
   *
   * @throws GatewayError `SCANGW_E_STOP` naming the inputs whose stop failed
   *   (`details.parts`: `input <id>` each).
   */
  async stop(): Promise<void> {
    const failed: string[] = [];
    for (const input of this.running.splice(0).reverse()) {
      try {
        await input.stop();
      } catch (err) {
        failed.push(`input ${input.id}`);
        this.deps.logger.error(
          { component: 'app', err, part: `input ${input.id}` },
          'stopping a part failed',
        );
      }
    }
    if (failed.length > 0)
      throw new GatewayError(ErrorCodes.STOP, `stopping failed: ${failed.join(', ')}`, {
        details: { parts: failed },
      });
  }
}
