import { isDeepStrictEqual } from 'node:util';
import type { LoadedConfig } from '../config/load.js';
import {
  applyReload,
  planReload,
  RELOADABLE_UPSTREAM_KEYS,
  RESTART_SECTIONS,
  type ReloadReport,
} from '../config/reload.js';
import { clientOptionsFromConfig } from '../upstream/client.js';
import { Mapper } from '../mapping/mapper.js';
import type { Gateway } from './gateway.js';
import type { Component } from './parts.js';

/** The local server's tokens as a reload read them again (`resolveSecrets`); undefined: none configured. */
export interface ReloadedTokens {
  adminToken?: string | undefined;
  readToken?: string | undefined;
}

/**
 * Applies a new configuration while running (see `App.reload`): inputs restarted, added and
 * removed through the running list, the mapping swapped, the product check restarted when changed.
 * `inputPartFor` makes the component of one input, as `buildApp` does.
 *
 * Secrets first: the upstream client proves the new credentials, bounds and CA with a token
 * before anything else changes, and a refusal refuses the whole reload (the running configuration
 * stays, the error is on the page). Then `tokens` (when given) replace the admin and read tokens,
 * and each unchanged input reads its own secrets again; a replaced token is still accepted until
 * the new one is used (`RotatingToken`). The log names what changed, never a value.
 */
export async function reloadGateway(
  g: Gateway,
  next: LoadedConfig,
  inputPartFor: (config: LoadedConfig['config']['inputs'][number]) => Component,
  tokens?: ReloadedTokens,
): Promise<ReloadReport> {
  const { live } = g;
  const upstreamChanged = g.api.reconfigure
    ? await g.api.reconfigure(clientOptionsFromConfig(next.config.upstream, next, g.logger))
    : [];
  // SIGHUP is also how a renewed certificate is applied at once (the files are watched too).
  g.listenerTls?.reload('configuration reload');
  const report = await applyReload(planReload(live.current.config, next.config), next.config, {
    stopInput: async (id) => {
      const input = g.inputs.remove(id);
      if (!input) return;
      const entry = g.running.findIndex((s) => s.name === `input ${id}`);
      if (entry >= 0) g.running.splice(entry, 1);
      await input.stop();
    },
    startInput: async (inputConfig) => {
      // Under `ha` a standby runs no input: the configuration in force is started on taking over.
      if (g.ha && g.ha.leadership.mayTake() !== undefined) return;
      const part = inputPartFor(inputConfig);
      g.running.push(part);
      await part.start();
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
  const running: Record<string, unknown> = Object.fromEntries(
    RESTART_SECTIONS.map((section) => [section, previous.config[section]]),
  );
  // What the client took (credentials, bounds, the CA, the proxy); the addresses wait for a restart.
  if (g.api.reconfigure) {
    const upstream: Record<string, unknown> = { ...previous.config.upstream };
    for (const key of RELOADABLE_UPSTREAM_KEYS) upstream[key] = next.config.upstream[key];
    running['upstream'] = upstream;
  }
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
    // Filled in below, as the secrets are read again (the same array).
    applied: report.applied,
  };
  if (report.productCheckChanged) g.productCheck.restart();
  const changed = report.applied;
  changed.push(...upstreamChanged);
  // Status events log in with the client id and secret too: a new login needs a new connection.
  if (upstreamChanged.some((k) => k === 'upstream.clientId' || k === 'upstream.clientSecret'))
    void g.statusEvents?.feed.reconnect();
  if (tokens) {
    if (g.serverTokens.admin.replace(tokens.adminToken)) changed.push('http.adminToken');
    if (g.serverTokens.read.replace(tokens.readToken)) changed.push('http.readToken');
  }
  for (const id of report.unchanged) {
    const input = g.inputs.adapters.find((a) => a.id === id);
    try {
      if (await input?.reloadSecrets?.()) changed.push(`inputs.${id}.token`);
    } catch (err) {
      report.inputErrors.push({
        id,
        message: `its secret could not be read again, the one in force stays: ${(err as Error).message}`,
      });
    }
  }
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
      // Secrets and settings applied without a restart, by name (never a value).
      applied: changed,
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
