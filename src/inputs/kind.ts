import type { InputConfig, InputKindSpec } from '../config/input-kind.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import type { InputAdapter, IntakeItem, IntakeSink } from './types.js';

/**
 * An input kind: everything the gateway knows of one `type` of input, in one object its folder
 * exports (`src/inputs/<kind>/kind.ts`) and `src/inputs/registry.ts` lists. Beside the
 * configuration's half ({@link InputKindSpec}: schema, resources, field sources, secrets, whether
 * it moves under `ha`) it holds how to make the adapter, what `try --payload` makes of a message,
 * the `config init` starter and what it can acknowledge. Nothing outside the kind's folder branches
 * on an input's `type`; it asks the kind. docs/inputs.md, "Writing an input kind".
 */

/**
 * What an input can tell its source about a read:
 * - `commit`: the read is committed to the buffer (a file moved, a PUBACK, a 202, an ACK byte);
 * - `verdict`: whether the read was taken or refused (a good/bad beep on the scanner).
 */
export type InputAcknowledgement = 'commit' | 'verdict';

/** What every adapter is made with. */
export interface InputDeps {
  /** Where the adapter hands its items. */
  sink: IntakeSink;
  logger: Logger;
  /** The process environment, for secrets named by variable. */
  env: Record<string, string | undefined>;
  /** Cuts known secrets out of text the input writes (the log's scrubber). */
  scrub?: (text: string) => string;
  /** The app's clock: `receivedAt` and dated folders follow a test's time. */
  now?: Clock;
  /** Under `ha`: whether this node may connect now, and the broker will's delay. */
  ha?: { mayConnect: () => boolean; willDelaySec?: number };
}

/** Where `config init` writes an input's starter block (`/var/lib/scan-gateway`, the site id). */
export interface StarterContext {
  dataDir: string;
  siteId: string;
}

/** `try --payload`: one raw message as the live input would take it. */
export interface PayloadTry<C> {
  /** True: the payload is taken as written (JSON escapes its own bytes); false: `\xNN` escapes are read. */
  isJson(config: C): boolean;
  /** The message comes on a topic (`--topic`); without it `--topic` is refused. */
  readonly takesTopic?: boolean;
  /** Why the command line does not fit this input (`--topic` on a non-MQTT input), or undefined. */
  usage?(config: C, options: { topic: string | undefined }): string | undefined;
  /** The items the input's own parsing makes of `payload`; a refusal comes back as a rejection. */
  items(
    config: C,
    payload: Buffer,
    options: { receivedAt: Date; topic: string | undefined },
  ): Promise<IntakeItem[]>;
  /** Said after "makes no read of this payload" (a CSV needs its header row). */
  emptyHint?(config: C): string | undefined;
}

/** One input kind's descriptor. */
export interface InputKind<C extends InputConfig = InputConfig> extends InputKindSpec<C> {
  /** What it can acknowledge to its source. */
  readonly acknowledges: readonly InputAcknowledgement[];
  /**
   * The adapter of one entry. Loads the kind's implementation (and its library) with `import()`,
   * so a kind no entry uses loads nothing.
   */
  create(config: C, deps: InputDeps): Promise<InputAdapter>;
  /** `try --payload`. */
  readonly payload: PayloadTry<C>;
  /** `config init --input <type>`: the entry's id and its commented YAML block (two-space indent, `- id:` first). */
  readonly starter: { id: string; text(id: string, context: StarterContext): string };
  /**
   * Its routes are served by the local HTTP server (`http.listen`): under `ha` a standby registers
   * them from a paused adapter, and its token travels in clear on a plain non-loopback listener.
   */
  readonly localRoutes?: boolean;
  /**
   * Its source may hand a committed message again (an MQTT broker's resend after a lost PUBACK):
   * such messages are counted as redelivered (`scan_gateway_mqtt_redelivered_total`).
   */
  readonly redelivers?: boolean;
  /** A line for a person at a terminal when `run` starts (where to drop files), or undefined. */
  runHint?(config: C): string | undefined;
}
