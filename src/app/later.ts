import { ErrorCodes, GatewayError } from '../errors.js';

/**
 * A part built later, for the calls of a part built before it when the two call each other (the
 * back-pressure and the disk guard, status events and delivery, the metrics and the status). The
 * gateway is built in the order of its dependencies (src/app.ts); each call that points the other
 * way goes through one of these, named where the earlier part is built and bound where the later
 * one is. Nothing calls it before the build ends: no part starts until every part exists.
 */
export class Later<T> {
  private value: T | undefined;

  /** @param what names the part in the error of a call made too early: `the disk guard`. */
  constructor(private readonly what: string) {}

  /** Binds the part, once; answers it, so a build reads `const x = later.bind(new X(...))`. */
  bind(value: T): T {
    if (this.value !== undefined)
      throw new GatewayError(ErrorCodes.INTERNAL, `${this.what} is bound twice`);
    this.value = value;
    return value;
  }

  /**
   * The part.
   * @throws GatewayError `NOT_RUNNING` when called before it is built (a bug in the build order).
   */
  get(): T {
    if (this.value === undefined)
      throw new GatewayError(ErrorCodes.NOT_RUNNING, `${this.what} is not built yet`);
    return this.value;
  }
}
