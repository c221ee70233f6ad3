import { hostname } from 'node:os';
import { inputKind, inputKinds } from '../inputs/registry.js';

/**
 * `scan-gateway config init`: a commented starter configuration for the inputs named,
 * as Telegraf prints a sample for the plugins you name. It passes `config check` as written
 * (`--offline` for an `http` input, whose ingest token must exist first) and is what the Debian
 * package installs as /etc/scan-gateway/config.yaml (`config init --input files`).
 */

/** Input types `config init --input` knows, in the registry's order (src/inputs/registry.ts). */
export function starterInputTypes(): string[] {
  return inputKinds().map((k) => k.type);
}

export interface StarterOptions {
  /** Input types, in order; repeats get ids with -2, -3… */
  inputs: readonly string[];
  /** Folder for the buffer and the inbox (the unit's StateDirectory): /var/lib/scan-gateway. */
  dataDir: string;
  /** `http.listen`: 127.0.0.1:8080. */
  listen: string;
  /** `site.id`; default this machine's host name. */
  siteId?: string | undefined;
  /** `site.timezone`; default this machine's zone. */
  timezone?: string | undefined;
}

/** A host name as a site id (a key: no white space), falling back to "site". */
function defaultSiteId(): string {
  const h =
    hostname()
      .split('.')[0]
      ?.replace(/[^A-Za-z0-9._-]/g, '-') ?? '';
  return h === '' ? 'site' : h;
}

/** The starter configuration text (YAML with comments). */
export function starterConfig(options: StarterOptions): string {
  const siteId = options.siteId ?? defaultSiteId();
  const timezone = options.timezone ?? Intl.DateTimeFormat().resolvedOptions().timeZone;
  const o = { ...options, siteId };
  const seen = new Map<string, number>();
  const blocks = options.inputs.map((type) => {
    const kind = inputKind(type);
    const base = kind.starter.id;
    const n = (seen.get(base) ?? 0) + 1;
    seen.set(base, n);
    return kind.starter.text(n === 1 ? base : `${base}-${n}`, { dataDir: o.dataDir, siteId });
  });
  return `# scan-gateway configuration (written by: scan-gateway config init${options.inputs.map((t) => ` --input ${t}`).join('')}).
# Every key, with its default: docs/configuration.md (or: scan-gateway config docs).
# After an edit:  scan-gateway config check --config THIS-FILE   (as root: add --as scan-gateway)
# What a read becomes, without sending it:  scan-gateway try --config THIS-FILE --input ID 'CODE'
# The running gateway reloads this file on a change (or systemctl reload scan-gateway).

site:
  id: ${siteId}   # shown on the health page and in logs
  timezone: ${timezone}   # IANA zone of the plant's clocks (scan times are sent as wall time)

# The Battery Product and Traceability Scan Service: addresses and client id from its operator.
# The client secret never goes here: the package's unit hands /etc/scan-gateway/client-secret
# (root only, mode 0600) to the gateway as the systemd credential client-secret. Elsewhere: the
# environment variable SCAN_GATEWAY_CLIENT_SECRET, or clientSecretFile: /path/to/file.
upstream:
  baseUrl: https://scan-service.example.com     # CHANGE-ME
  authUrl: https://auth.scan-service.example.com # CHANGE-ME: /oauth2/token is appended
  clientId: CHANGE-ME
  # proxyUrl: http://proxy.plant.local:3128     # credentials, if any: proxyCredentialsFile
  # caFile: /etc/scan-gateway/site-ca.pem       # a site CA (a TLS-inspecting proxy)

# The durable buffer (SQLite): every read is committed here before it is acknowledged.
buffer:
  path: ${options.dataDir}/buffer.db
  retentionDays: 30              # delivered scans kept this long for audit

# Health page, /healthz, /readyz, /api/v1/status and /metrics. Loopback unless you mean to expose
# it; then set a read token (docs/operations.md, "Read token").
http:
  listen: ${options.listen}

# Data collection points: where in the process a scan happens, keys as the service knows them.
#   kind: goodsIn (needs supplierKey) | startOfProcess | endOfProcess | goodsOut (needs clientKey)
dcps:
  - key: DCP-01                  # CHANGE-ME
    kind: startOfProcess
    productModelKey: CHANGE-ME   # sent with every scan unless a rule takes it from the read

# Where reads come from; each input belongs to a DCP.
inputs:${blocks.length === 0 ? ' []   # scan-gateway config init --input files|serial|tcp|mqtt|http' : ''}
${blocks.join('\n')}
# Rules: how a read becomes a scan (GS1 AIs, regex groups, lookup tables); more, with containers
# (pallets, trays as parents) and the time check: docs/configuration.md.
rules:
  # A GS1 code gets one reference whatever carried it (GS1 DataMatrix or GS1-128, with or without
  # symbology identifier, bracketed text, a Digital Link): the canonical GS1 reference, e.g.
  # https://id.gs1.org/01/09521234543213/21/C2611030001234 (docs/configuration.md, "The canonical
  # GS1 reference"). Batch and expiry go along as attributes.
  - name: gs1-item
    match: { gs1: true }
    reference: { gs1: canonical }
    attributes: { batch: { ai: '10' }, expiry: { ai: '17', as: date } }
  # Any other code: its text without the symbology identifier.
  - name: other-codes
    reference: { code: data }
`;
}
