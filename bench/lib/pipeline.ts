import { BackPressure } from '../../src/buffer/back-pressure.js';
import { DERIVED_QUOTA_MAX_BYTES } from '../../src/buffer/disk-guard.js';
import { Intake } from '../../src/intake/intake.js';
import { BufferStore } from '../../src/buffer/store.js';
import type { GatewayConfig } from '../../src/config/schema.js';
import { silentLogger } from '../../src/log.js';
import { mappingContext } from '../../src/mapping/map-read.js';

/**
 * The intake half of the gateway wired as src/app.ts wires it (buffer, back-pressure gate, intake
 * with the configuration's mapping), without inputs, delivery or HTTP. Benchmarks hand reads to
 * `intake` the way input adapters do.
 */
export interface IntakePipeline {
  store: BufferStore;
  intake: Intake;
  /** Commits what is queued and closes everything. */
  close(): void;
}

/** Opens (creating) the buffer at `dbPath` and starts the gate; the mapping is `config`'s. */
export function startIntakePipeline(dbPath: string, config: GatewayConfig): IntakePipeline {
  const logger = silentLogger();
  const store = BufferStore.openAt(dbPath);
  const backPressure = new BackPressure({
    store,
    limits: { ...config.buffer, maxBytes: config.buffer.maxBytes ?? DERIVED_QUOTA_MAX_BYTES },
    logger,
  });
  backPressure.start();
  const intake = new Intake({ store, mapping: mappingContext(config), logger, gate: backPressure });
  intake.open();
  return {
    store,
    intake,
    close() {
      intake.close();
      backPressure.stop();
      store.close();
    },
  };
}
