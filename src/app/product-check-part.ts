import { loadUndici } from '../http-client.js';
import type { ProductCheck } from '../mapping/product-check.js';
import type { Component } from './parts.js';

/**
 * The check of configured product keys against the service's list (`productCheck`): present when
 * enabled and the API can list products. A reload that changes its settings makes a new one.
 */
export class ProductCheckPart implements Component {
  readonly name = 'product check';
  private check: ProductCheck | undefined;
  private started = false;

  /** `make` answers the check for the configuration now in force, or undefined when it is off. */
  constructor(private readonly make: () => ProductCheck | undefined) {
    this.check = make();
  }

  async start(): Promise<void> {
    this.started = true;
    // The HTTP client loads here, so that the first product list is asked for before the inputs
    // open and a read taken at start (a file already in the inbox) is mapped with the list in
    // hand; loaded by the request itself, the ask went out after the inputs had opened.
    if (this.check) await loadUndici();
    this.check?.start();
  }

  /** Replaces the check by one made for the configuration now in force (after a reload). */
  restart(): void {
    this.check?.stop();
    this.check = this.make();
    if (this.started) this.check?.start();
  }

  snapshot(): ReturnType<ProductCheck['snapshot']> | undefined {
    return this.check?.snapshot();
  }

  knownProducts(): ReturnType<ProductCheck['knownProducts']> | undefined {
    return this.check?.knownProducts();
  }

  stop = async (): Promise<void> => {
    this.started = false;
    this.check?.stop();
  };
}
