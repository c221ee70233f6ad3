import type { GatewayError } from '../../src/errors.js';

/** Awaits a promise that must reject and answers its error; throws when it resolves. */
export async function rejection(promise: Promise<unknown>): Promise<GatewayError> {
  try {
    await promise;
  } catch (err) {
    return err as GatewayError;
  }
  throw new Error('expected a rejection');
}
