import { ErrorCodes, GatewayError } from '../errors.js';

/** What several parts of the app share: a bounded wait, and listening on a configured address. */

/** Waits for `work` at most `ms`; answers false when it gave up (the work goes on unobserved). */
export async function within(ms: number, work: Promise<void> | void | undefined): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([Promise.resolve(work).then(() => true as const), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** `host:port` or `[v6]:port` split into its parts. */
export function splitListen(listen: string): { host: string; port: number } {
  const i = listen.lastIndexOf(':');
  return { host: listen.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(listen.slice(i + 1)) };
}

/**
 * Runs a listen; an address in use or not allowed becomes an error that names the configuration
 * key, instead of a bare `listen EADDRINUSE`.
 */
export async function listening<T>(
  key: string,
  address: string,
  listen: () => Promise<T>,
): Promise<T> {
  try {
    return await listen();
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'EADDRINUSE') {
      throw new GatewayError(
        ErrorCodes.LISTEN,
        `${key} ${address}: the address is in use (another program, or another scan-gateway, listens there); stop it or choose another port`,
        { cause: err },
      );
    }
    if (code === 'EACCES' || code === 'EADDRNOTAVAIL') {
      throw new GatewayError(
        ErrorCodes.LISTEN,
        `${key} ${address}: cannot listen there (${code}: a port below 1024 needs privileges; the host must be an address of this machine)`,
        { cause: err },
      );
    }
    throw err;
  }
}
