import type * as UndiciModule from 'undici';
import { ErrorCodes, GatewayError } from './errors.js';

/** The undici package's exports (its types only are imported statically). */
export type Undici = typeof UndiciModule;

let loading: Promise<Undici> | undefined;
let loaded: Undici | undefined;

/**
 * Loads undici, once: the upstream client before its first exchange, the etcd client before its
 * first. Not with the daemon's modules, where it was about a third of their loading, so the inputs
 * open before delivery first talks to the service. An `import()`, which the build's bundler
 * (scripts/bundle.mjs) follows: undici is a chunk of the bundle, one copy for both clients.
 *
 * @returns the package's exports (CommonJS: its `module.exports`).
 */
export function loadUndici(): Promise<Undici> {
  return (loading ??= import('undici').then((m) => {
    const exports = (m as unknown as { default?: Undici }).default ?? (m as unknown as Undici);
    loaded = exports;
    return exports;
  }));
}

/**
 * undici, for the synchronous places that run only after a {@link loadUndici} was awaited (a
 * dispatcher built at its first `dispatch`, inside an exchange).
 *
 * @throws GatewayError `INTERNAL` when nothing awaited {@link loadUndici} before.
 */
export function undici(): Undici {
  if (loaded === undefined)
    throw new GatewayError(ErrorCodes.INTERNAL, 'undici is used before loadUndici() was awaited');
  return loaded;
}
