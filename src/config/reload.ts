import { createHash } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from '../log.js';
import { inputKindSpec } from './input-kind.js';
import type { LoadedConfig } from './load.js';
import { readConfigFile } from '@scan-gateway/service-kit/read-file';
import type { GatewayConfig, InputConfig } from './schema.js';

/**
 * Configuration reload: on SIGHUP or when the file changes, the new file is
 * loaded and checked; if valid it is applied without losing a read, else the running configuration
 * stays and the error is shown on the health page and in the log.
 *
 * What a reload changes at once: the mapping (site time zone, DCPs, lookups, rules, containers,
 * time check), and the inputs whose settings changed (only those are restarted; an input stops
 * only after what it handed to the buffer was committed). Sections the running parts were built
 * from (`upstream`, `buffer`, `delivery`, `http`, `sandbox`, `log`, `ha`) need a restart; a reload
 * that changes them applies the rest and says so. Applied at once nonetheless: of `buffer`, the
 * audit period (`retentionDays`) and early pruning's protected window (`earlyPruneKeepHours`); of
 * `upstream`, what is safe with batches in flight ({@link RELOADABLE_UPSTREAM_KEYS}: credentials,
 * bounds, the CA, the proxy), proven by a token first; and every secret (the client secret, the
 * admin, read and ingest tokens), read again at each reload ({@link RESTART_KEYS} lists the rest).
 */

/** Sections whose change needs a restart of the gateway. */
export const RESTART_SECTIONS = [
  'upstream',
  'buffer',
  'delivery',
  'http',
  'sandbox',
  'log',
  'ha',
] as const;

/** What a reload from `current` to `next` does. */
export interface ReloadPlan {
  /** Inputs no longer configured: stopped. */
  removed: string[];
  /** Inputs whose settings changed: stopped, then started with the new settings. */
  changed: string[];
  /** New inputs: started. */
  added: string[];
  /** Inputs left running untouched. */
  unchanged: string[];
  /** Sections that changed but take effect only after a restart. */
  needsRestart: string[];
  /** Whether `productCheck` changed (the check is restarted with the new settings). */
  productCheckChanged: boolean;
  /** Whether `buffer.retentionDays` or `buffer.earlyPruneKeepHours` changed: applied at once. */
  retentionChanged: boolean;
}

/** Keys of `buffer` a reload applies at once (the audit period and early pruning's protected window). */
export const RELOADABLE_BUFFER_KEYS = ['retentionDays', 'earlyPruneKeepHours'] as const;

/**
 * Keys of `upstream` a reload applies at once (`UpstreamClient.reconfigure`): what a batch in
 * flight does not depend on. The addresses (`baseUrl`, `authUrl`), `allowInsecureHttp`,
 * `statusEvents` and `sftp` need a restart: batches in flight and their requestIds belong to the
 * service they were sent to.
 */
export const RELOADABLE_UPSTREAM_KEYS = [
  'clientId',
  'clientSecretFile',
  'caFile',
  'proxyUrl',
  'proxyCredentialsFile',
  'requestTimeoutMs',
  'minUploadBytesPerSec',
  'maxAnswerBytes',
  'maxProductListBytes',
] as const;

/**
 * What a change needs a restart for, in words for `config check` and the docs: every key of the
 * {@link RESTART_SECTIONS} but those a reload applies, and of the inputs, a new `http` input and
 * an `http` input's `maxBodyBytes`.
 */
export const RESTART_KEYS: readonly string[] = [
  'upstream.baseUrl',
  'upstream.authUrl',
  'upstream.allowInsecureHttp',
  'upstream.statusEvents',
  'upstream.sftp',
  'buffer (but retentionDays, earlyPruneKeepHours)',
  'delivery',
  'http (its tokens are read again at each reload)',
  'sandbox',
  'log',
  'ha',
  'a new http input',
  'inputs.<id>.maxBodyBytes of an http input',
];

/** `section` without the keys a reload applies at once. */
function needingRestart(section: Record<string, unknown>, reloadable: readonly string[]) {
  const rest: Record<string, unknown> = { ...section };
  for (const key of reloadable) delete rest[key];
  return rest;
}

/** Compares two validated configurations. Pure. */
export function planReload(current: GatewayConfig, next: GatewayConfig): ReloadPlan {
  const before = new Map(current.inputs.map((i) => [i.id, i]));
  const after = new Map(next.inputs.map((i) => [i.id, i]));
  const plan: ReloadPlan = {
    removed: [],
    changed: [],
    added: [],
    unchanged: [],
    needsRestart: [],
    productCheckChanged: false,
    retentionChanged: false,
  };
  for (const [id, input] of before) {
    const now = after.get(id);
    if (!now) plan.removed.push(id);
    // A name is for people (the page reads it from the configuration in force): no restart.
    else if (isDeepStrictEqual({ ...input, name: undefined }, { ...now, name: undefined }))
      plan.unchanged.push(id);
    else {
      plan.changed.push(id);
      // What its kind applies only at a restart (an http input's body limit).
      if (input.type === now.type)
        plan.needsRestart.push(...(inputKindSpec(now.type)?.restartNeeded?.(input, now) ?? []));
    }
  }
  for (const [id, input] of after) {
    if (before.has(id)) continue;
    plan.added.push(id);
    // What its kind cannot start while running (an http input's routes on the local server).
    plan.needsRestart.push(...(inputKindSpec(input.type)?.restartNeeded?.(undefined, input) ?? []));
  }
  for (const section of RESTART_SECTIONS) {
    if (section === 'upstream') {
      // Named key by key: `config check` and the log say which address waits for a restart.
      const [a, b] = [current.upstream, next.upstream].map(
        (u) => needingRestart(u, RELOADABLE_UPSTREAM_KEYS) as Record<string, unknown>,
      );
      for (const key of new Set([...Object.keys(a!), ...Object.keys(b!)]))
        if (!isDeepStrictEqual(a![key], b![key])) plan.needsRestart.push(`upstream.${key}`);
      continue;
    }
    const same =
      section === 'buffer'
        ? isDeepStrictEqual(
            needingRestart(current.buffer, RELOADABLE_BUFFER_KEYS),
            needingRestart(next.buffer, RELOADABLE_BUFFER_KEYS),
          )
        : isDeepStrictEqual(current[section], next[section]);
    if (!same) plan.needsRestart.push(section);
  }
  plan.retentionChanged = RELOADABLE_BUFFER_KEYS.some((k) => current.buffer[k] !== next.buffer[k]);
  plan.productCheckChanged = !isDeepStrictEqual(current.productCheck, next.productCheck);
  return plan;
}

/** The parts of the running app a reload acts on. */
export interface ReloadTarget {
  /** Stops a running input and forgets it; resolves after what it handed to the buffer settled. */
  stopInput(id: string): Promise<void>;
  /** Creates and starts an input. */
  startInput(config: InputConfig): Promise<void>;
  /** Replaces the mapping (a new mapper that takes over the open containers). */
  swapMapping(): void;
}

/** What a reload did. */
export interface ReloadReport extends ReloadPlan {
  /** Inputs that could not be started again, with why. The rest of the reload stands. */
  inputErrors: { id: string; message: string }[];
  /**
   * Secrets and settings the reload applied without a restart, by name, never by value
   * (`upstream.clientSecret`, `http.adminToken`, `inputs.<id>.token`…); filled in by the app.
   */
  applied: string[];
}

/**
 * Applies a plan: stops removed and changed inputs (each drains first), swaps the mapping, then
 * starts changed and added inputs. Unchanged inputs run on throughout; the mapping swap happens
 * between two submits, so every read is mapped by one configuration or the other, never lost.
 */
export async function applyReload(
  plan: ReloadPlan,
  next: GatewayConfig,
  target: ReloadTarget,
): Promise<ReloadReport> {
  const inputErrors: ReloadReport['inputErrors'] = [];
  for (const id of [...plan.removed, ...plan.changed]) {
    try {
      await target.stopInput(id);
    } catch (err) {
      inputErrors.push({ id, message: `stopping failed: ${(err as Error).message}` });
    }
  }
  target.swapMapping();
  const toStart = new Set([...plan.changed, ...plan.added]);
  for (const input of next.inputs) {
    if (!toStart.has(input.id)) continue;
    try {
      await target.startInput(input);
    } catch (err) {
      inputErrors.push({ id: input.id, message: `starting failed: ${(err as Error).message}` });
    }
  }
  return { ...plan, inputErrors, applied: [] };
}

/** What {@link ConfigReloader} needs: the file, how to load it, and what to do with the result. */
export interface ConfigReloaderOptions {
  /** The configuration file. */
  file: string;
  /** Loads and checks the file; throws (GatewayError CONFIG or SECRET) when it is not valid. */
  load: () => LoadedConfig;
  /** Applies a valid configuration (App.reload). */
  apply: (loaded: LoadedConfig) => Promise<unknown>;
  /** Told about a refused reload (App.reloadRefused): the running configuration stays. */
  refused: (err: unknown) => void;
  logger: Logger;
  /** Watch the file for changes (default true); SIGHUP works either way. */
  watch?: boolean;
  /** Changes within this long are one reload, in ms (editors write in several steps). Default 500. */
  debounceMs?: number;
}

/**
 * Reloads the configuration on request (SIGHUP, via {@link ConfigReloader.trigger}) and when the
 * file changes (its folder is watched, so an editor that replaces the file by renaming is seen).
 * Reloads run one at a time; a change that leaves the content as it was is ignored.
 */
export class ConfigReloader {
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private chain: Promise<void> = Promise.resolve();
  private queued: { reason: string; force: boolean; promise: Promise<void> } | undefined;
  private lastHash: string | undefined;

  constructor(private readonly options: ConfigReloaderOptions) {
    this.lastHash = this.hash();
  }

  start(): void {
    if (this.options.watch === false) return;
    const name = basename(this.options.file);
    try {
      this.watcher = watch(dirname(this.options.file), { persistent: false }, (_event, changed) => {
        if (changed === null || changed === name) this.schedule();
      });
      this.watcher.on('error', (err) =>
        this.options.logger.warn(
          { err },
          'watching the configuration file failed; reload with SIGHUP',
        ),
      );
    } catch (err) {
      this.options.logger.warn({ err }, 'cannot watch the configuration file; reload with SIGHUP');
    }
  }

  stop(): void {
    this.watcher?.close();
    this.watcher = undefined;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /**
   * Reloads now (SIGHUP), even when the file looks unchanged. Resolves when done; never rejects.
   * Requests that come while a reload runs are one reload after it (a flood of SIGHUPs queues at
   * most one): each reload reads the file afresh, so none is lost.
   */
  trigger(reason = 'SIGHUP'): Promise<void> {
    return this.enqueue(reason, true);
  }

  /**
   * At most one reload waits behind the running one; later requests join it, so a burst of them
   * (SIGHUPs, file changes) queues one reload, not one each.
   */
  private enqueue(reason: string, force: boolean): Promise<void> {
    if (this.queued) {
      this.queued.force ||= force;
      return this.queued.promise;
    }
    const queued = { reason, force, promise: Promise.resolve() };
    queued.promise = this.chain.then(() => {
      this.queued = undefined;
      return this.reload(queued.reason, queued.force);
    });
    this.queued = queued;
    this.chain = queued.promise;
    return queued.promise;
  }

  /** Resolves once every reload asked for so far has finished. */
  settled(): Promise<void> {
    return this.chain;
  }

  private schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.enqueue('file changed', false);
    }, this.options.debounceMs ?? 500);
    this.timer.unref();
  }

  private async reload(reason: string, force: boolean): Promise<void> {
    const log = this.options.logger;
    const hash = this.hash();
    if (!force && hash === this.lastHash) return;
    this.lastHash = hash;
    let loaded: LoadedConfig;
    try {
      loaded = this.options.load();
    } catch (err) {
      log.error(
        { err, reason, file: this.options.file },
        'configuration reload refused; the running configuration stays',
      );
      this.options.refused(err);
      return;
    }
    try {
      await this.options.apply(loaded);
    } catch (err) {
      log.error(
        { err, reason, file: this.options.file },
        'configuration reload could not be applied; the running configuration stays',
      );
      this.options.refused(err);
    }
  }

  private hash(): string | undefined {
    try {
      // Bounded like the load: a FIFO or device put in the file's place is refused by the load, not read here.
      return createHash('sha256').update(readConfigFile(this.options.file)).digest('hex');
    } catch {
      return undefined;
    }
  }
}
