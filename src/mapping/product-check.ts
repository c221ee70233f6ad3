import type { Logger } from '../log.js';
import { failureFields } from '../failure-log.js';
import type { ProductKeyUse } from './product-keys.js';
import type { Clock } from '../clock.js';

/** What the health page shows of the product check. */
export interface ProductCheckSnapshot {
  /** `ok` every mapped key exists upstream; `missing` some do not; `unchecked` no list fetched yet; `error` the last fetch failed and no list is known. */
  state: 'ok' | 'missing' | 'unchecked' | 'error';
  /** ISO 8601 instant of the last successful fetch. */
  checkedAt?: string;
  /** Products in the last fetched list. */
  products?: number;
  /** Mapped product keys the list does not hold, with where the configuration writes them (or `seen in reads`). */
  missing: ProductKeyUse[];
  /** The last failed fetch; a list fetched before it is still used. */
  lastError?: { message: string; at: string };
  /** Scans refused for an unknown key (`productCheck.rejectUnknown`). */
  rejectUnknown: boolean;
}

/** What {@link ProductCheck} needs: the list call, the keys to check, a logger and a clock. */
export interface ProductCheckOptions {
  /** GET the product list (contract §4.1), e.g. `UpstreamClient.listProducts`. */
  listProducts: () => Promise<ReadonlyArray<{ key: string }>>;
  /** The product keys the running configuration maps to (read at each check, so reloads count). */
  configuredKeys: () => ProductKeyUse[];
  /** Product keys seen on mapped scans (keys taken from reads are only known this way). */
  observedKeys: () => string[];
  /** Told about each fetched list (the mapper, for `rejectUnknown`). */
  onProducts?: (keys: ReadonlySet<string>, at: Date) => void;
  /** Between two fetches, in ms. */
  intervalMs: number;
  rejectUnknown: boolean;
  logger: Logger;
  now?: Clock;
}

/**
 * Checks against upstream: at start and every `intervalMs`, the product list is
 * fetched and the product keys the configuration maps to, plus those seen on scans, are compared
 * with it. Missing keys are reported (health page, log); a scan with such a key would fail upstream
 * or, worse, be filed under a product nobody looks at. A failed fetch keeps the last list.
 */
export class ProductCheck {
  private timer: NodeJS.Timeout | undefined;
  private known: { keys: ReadonlySet<string>; at: Date } | undefined;
  private lastError: { message: string; at: string } | undefined;
  private running: Promise<void> | undefined;
  private lastLoggedMissing = '';
  private readonly now: Clock;

  constructor(private readonly options: ProductCheckOptions) {
    this.now = options.now ?? Date.now;
  }

  /** Checks now (not awaited), then every `intervalMs`. */
  start(): void {
    void this.checkNow();
    this.timer = setInterval(() => void this.checkNow(), this.options.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One fetch and comparison; concurrent calls share one fetch. Never rejects. */
  checkNow(): Promise<void> {
    this.running ??= this.fetch().finally(() => (this.running = undefined));
    return this.running;
  }

  /** The keys of the last fetched list, if one was fetched. */
  knownProducts(): { keys: ReadonlySet<string>; at: Date } | undefined {
    return this.known;
  }

  snapshot(): ProductCheckSnapshot {
    const base = {
      rejectUnknown: this.options.rejectUnknown,
      ...(this.lastError ? { lastError: this.lastError } : {}),
    };
    if (!this.known) return { state: this.lastError ? 'error' : 'unchecked', missing: [], ...base };
    const missing = this.missing(this.known.keys);
    return {
      state: missing.length > 0 ? 'missing' : 'ok',
      checkedAt: this.known.at.toISOString(),
      products: this.known.keys.size,
      missing,
      ...base,
    };
  }

  private missing(keys: ReadonlySet<string>): ProductKeyUse[] {
    const configured = this.options.configuredKeys();
    const out = configured.filter((u) => !keys.has(u.key));
    const listed = new Set(configured.map((u) => u.key));
    for (const k of this.options.observedKeys()) {
      if (keys.has(k) || listed.has(k)) continue;
      out.push({ key: k, where: ['seen in reads'] });
      listed.add(k);
    }
    return out;
  }

  private async fetch(): Promise<void> {
    const log = this.options.logger;
    try {
      const list = await this.options.listProducts();
      const at = new Date(this.now());
      this.known = { keys: new Set(list.map((p) => p.key)), at };
      this.lastError = undefined;
      this.options.onProducts?.(this.known.keys, at);
      const missing = this.missing(this.known.keys);
      const summary = missing.map((m) => m.key).join(', ');
      // Said once per change, not at every interval.
      if (summary !== this.lastLoggedMissing) {
        if (missing.length > 0)
          log.warn({ missing }, `product keys not in the upstream product list: ${summary}`);
        else if (this.lastLoggedMissing !== '')
          log.info('every mapped product key is in the upstream product list again');
        this.lastLoggedMissing = summary;
      }
    } catch (err) {
      this.lastError = { message: (err as Error).message, at: new Date(this.now()).toISOString() };
      // One line with code and cause for a failure of the service; a stack only for a bug.
      const next = new Date(this.now() + this.options.intervalMs).toISOString();
      log.warn(
        { ...failureFields(err), nextAttemptAt: next },
        'product list could not be fetched; keeping the last one',
      );
    }
  }
}
