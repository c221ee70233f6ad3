import { isDeepStrictEqual } from 'node:util';
import type { LoadedConfig } from '../config/load.js';
import { applyReload, planReload, RESTART_SECTIONS, type ReloadReport } from '../config/reload.js';
import { Mapper } from '../mapping/mapper.js';
import type { LiveState } from './gateway.js';
import type { InputSupervisor } from './inputs.js';
import type { ProductCheckPart } from './product-check-part.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import type { ListenerTls } from '../listener/listener-tls.js';
import type { Leadership } from '../ha/leadership.js';
import type { Intake } from '../intake/intake.js';
import type { Retention } from '../buffer/retention.js';
import type { DiskGuard } from '../buffer/disk-guard.js';

/** What a reload changes: the live state, the running inputs, and the parts whose settings apply at once. */
export interface ReloadParts {
  readonly live: LiveState;
  readonly listenerTls: Pick<ListenerTls, 'reload'> | undefined;
  readonly inputs: Pick<InputSupervisor, 'add' | 'remove'>;
  readonly ha: { readonly leadership: Pick<Leadership, 'mayTake'> } | undefined;
  readonly productCheck: Pick<ProductCheckPart, 'knownProducts' | 'restart'>;
  readonly intake: Pick<Intake, 'setMapping'>;
  readonly retention: Pick<Retention, 'setRetentionDays'>;
  readonly diskGuard: Pick<DiskGuard, 'setKeepRecentHours'>;
  readonly now: Clock;
  readonly logger: Logger;
}

/**
 * Applies a new configuration while running (see `App.reload`): inputs restarted, added and
 * removed by id through the input supervisor, the mapping swapped, the product check restarted
 * when changed.
 */
export async function reloadGateway(g: ReloadParts, next: LoadedConfig): Promise<ReloadReport> {
  const { live } = g;
  // SIGHUP is also how a renewed certificate is applied at once (the files are watched too).
  g.listenerTls?.reload('configuration reload');
  const report = await applyReload(planReload(live.current.config, next.config), next.config, {
    stopInput: (id) => g.inputs.remove(id),
    startInput: async (inputConfig) => {
      // Under `ha` a standby runs no input: the configuration in force is started on taking over.
      if (g.ha && g.ha.leadership.mayTake() !== undefined) return;
      await g.inputs.add(inputConfig);
    },
    swapMapping: () => {
      const fresh = new Mapper(next.config);
      fresh.adoptSessions(live.mapper);
      const known = g.productCheck.knownProducts();
      if (known) fresh.setKnownProducts(known.keys, known.at);
      live.mapper = fresh;
      g.intake.setMapping(fresh);
    },
  });
  // What runs: the new file, except the sections that only a restart applies. The next reload
  // compares with this, so needsRestart stays listed until the file matches what runs again.
  const previous = live.current;
  const running = Object.fromEntries(
    RESTART_SECTIONS.map((section) => [section, previous.config[section]]),
  );
  // The audit period and early pruning's window are applied at once (the rest of `buffer` waits).
  running['buffer'] = {
    ...previous.config.buffer,
    retentionDays: next.config.buffer.retentionDays,
    earlyPruneKeepHours: next.config.buffer.earlyPruneKeepHours,
  };
  live.current = { ...next, config: { ...next.config, ...running } };
  if (report.retentionChanged) {
    g.retention.setRetentionDays(next.config.buffer.retentionDays);
    g.diskGuard.setKeepRecentHours(next.config.buffer.earlyPruneKeepHours);
  }
  live.configLoadedAt = new Date(g.now());
  delete live.lastReloadError;
  live.lastReload = {
    at: live.configLoadedAt.toISOString(),
    needsRestart: report.needsRestart,
    inputErrors: report.inputErrors,
  };
  if (report.productCheckChanged) g.productCheck.restart();
  const log = g.logger.child({ component: 'config' });
  const mappedBy = (c: LoadedConfig['config']) => ({
    dcps: c.dcps,
    rules: c.rules,
    lookups: c.lookups,
    containers: c.containers,
    site: c.site,
  });
  log.info(
    {
      file: next.file,
      restarted: report.changed,
      added: report.added,
      removed: report.removed,
      unchanged: report.unchanged,
      // The mapping is swapped on every reload; say whether what it maps by changed.
      mappingChanged: !isDeepStrictEqual(mappedBy(previous.config), mappedBy(next.config)),
    },
    'configuration reloaded',
  );
  if (report.needsRestart.length > 0)
    log.warn(
      { sections: report.needsRestart },
      'changed sections take effect only after a restart',
    );
  for (const e of report.inputErrors)
    log.error({ input: e.id }, `input after reload: ${e.message}`);
  return report;
}
