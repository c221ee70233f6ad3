import type { BackPressure } from '../buffer/back-pressure.js';
import type { DiskGuard } from '../buffer/disk-guard.js';
import { DERIVED_QUOTA_MAX_BYTES, derivedQuotaForPath } from '../buffer/disk-guard.js';
import type { BufferStore } from '../buffer/store.js';
import type { BufferQueries } from '../queries/queries.js';
import type { LoadedConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import type { Component } from './parts.js';

/** The parts on the buffer's side of a read's path: the buffer, back-pressure, retention, the disk guard, intake. */

/**
 * The buffer: opened (and migrated) at start, closed at stop; its queries' read-only connection
 * (when it has any: an adopted buffer has none) opened after it (the file exists and is migrated by then) and closed before it.
 */
export function bufferPart(store: BufferStore, queries?: BufferQueries): Component {
  return {
    name: 'buffer',
    start: async () => {
      store.open();
      queries?.open();
    },
    stop: async () => {
      queries?.close();
      store.close();
    },
  };
}

/**
 * Back-pressure on intake. Without `buffer.maxBytes` the byte quota comes from the buffer's disk,
 * examined at start (one statfs); the disk guard rechecks it every second (DERIVED_QUOTA_RECHECK_MS).
 */
export function backPressurePart(
  backPressure: BackPressure,
  buffer: LoadedConfig['config']['buffer'],
  logger: Logger,
): Component {
  return {
    name: 'back-pressure',
    async start() {
      if (buffer.maxBytes === undefined) {
        let derived: { bytes: number; ceilingBytes: number };
        try {
          derived = derivedQuotaForPath(buffer.path);
        } catch (err) {
          logger.warn(
            { component: 'buffer', err },
            "cannot examine the buffer's disk for its byte quota; using the largest default until the disk guard can",
          );
          derived = { bytes: DERIVED_QUOTA_MAX_BYTES, ceilingBytes: DERIVED_QUOTA_MAX_BYTES };
        }
        backPressure.setByteQuota(derived.bytes, derived.ceilingBytes);
      }
      backPressure.start();
    },
    stop: async () => backPressure.stop(),
  };
}

/** A part whose start and stop are one synchronous call each (retention, the product check). */
export function timerPart(
  name: string,
  part: { start(): void; stop(): void | Promise<void> },
): Component {
  return { name, start: async () => part.start(), stop: async () => part.stop() };
}

/** Reserve, early pruning of the audit under disk pressure, pages returned (src/buffer/disk-guard.ts). */
export function diskGuardPart(diskGuard: DiskGuard): Component {
  return {
    name: 'disk guard',
    start: async () => diskGuard.start(),
    stop: async () => diskGuard.stop(),
  };
}

/** Intake: opened at start (the duplicate window is restored from the buffer), closed at stop. */
export function intakePart(intake: { open(): void; close(): void | Promise<void> }): Component {
  return { name: 'intake', start: async () => intake.open(), stop: async () => intake.close() };
}
