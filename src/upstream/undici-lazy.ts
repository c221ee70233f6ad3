import { createRequire } from 'node:module';
import type * as UndiciModule from 'undici';

/** The undici package's exports (its types only are imported statically). */
export type Undici = typeof UndiciModule;

const requireHere = createRequire(import.meta.url);
let loaded: Undici | undefined;

/**
 * undici, loaded at its first use rather than when the daemon's modules load: about a third of
 * the module loading at start, and the inputs open before delivery first talks to the service.
 * undici is CommonJS, so a synchronous `require` loads it where a caller cannot wait (a
 * dispatcher's `dispatch`). Cached after the first call; never throws once installed.
 */
export function undici(): Undici {
  return (loaded ??= requireHere('undici') as Undici);
}
