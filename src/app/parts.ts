/**
 * The gateway's parts as {@link Component}s. Each part has its file:
 * `buffer-parts.ts` (buffer, back-pressure, retention, disk guard, intake), `sandbox-part.ts`,
 * `delivery-parts.ts` (upstream client, SFTP route, delivery), `status-events-part.ts`,
 * `product-check-part.ts`, `ha-part.ts`, `http-part.ts`, the inputs' supervisor `inputs.ts`; `part-helpers.ts` what they share. `buildApp` (src/app.ts) constructs every part with its
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
