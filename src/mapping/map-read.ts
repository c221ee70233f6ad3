import type { GatewayConfig } from '../config/schema.js';
import type { Read } from '../inputs/types.js';
import { Mapper } from './mapper.js';
import type { MapOutcome } from './outcome.js';

/**
 * The entry points the intake and the benchmarks have used since the first version, kept as thin
 * wrappers of {@link Mapper}: `mappingContext(config)` builds the mapper of a configuration and
 * `mapRead(read, ctx)` maps one read with it.
 */

export type { MapOutcome } from './outcome.js';

/** The mapping of one configuration: a {@link Mapper}. */
export type MappingContext = Mapper;

/** Builds the mapper of a (validated) configuration. */
export function mappingContext(config: GatewayConfig): MappingContext {
  return new Mapper(config);
}

/**
 * Maps a read into a Scan (contract §2.5), a no-read, or a rejection with a reason a person can act
 * on. Without `rules` in the configuration: the reference is the barcode text exactly as read (AIM
 * symbology identifier and GS bytes included); the DCP is the one the source named, else the
 * input's; the product, supplier (Goods In) and client (Goods Out) keys come from the DCP. A code
 * that announces itself as GS1 (symbology identifier, bracketed form or Digital Link) must be valid
 * GS1. See {@link Mapper.map}.
 */
export function mapRead(read: Read, ctx: MappingContext): MapOutcome {
  return ctx.map(read);
}
