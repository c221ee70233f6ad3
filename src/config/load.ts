import { LineCounter, parseDocument, type Document } from 'yaml';
import { ErrorCodes, GatewayError, isGatewayError } from '../errors.js';
import { withPathBase } from './cross-check.js';
import { inputKindSpec } from './input-kind.js';
import { readableIssues } from './problems.js';
import { readConfigFile } from '@scan-gateway/service-kit/read-file';
export { CONFIG_MAX_BYTES } from '@scan-gateway/service-kit/read-file';
import { readClientSecret, readProxyCredentials } from './secrets.js';
import { configSchema, type GatewayConfig } from './schema.js';
import { expandEnv, hideEnvValues } from './env-expand.js';
import { resolvePaths } from './resolve-paths.js';
import { keepTextAsWritten } from './yaml-scalars.js';
import { yamlMessage } from './yaml-errors.js';
import { checkStructure, keyOffset, MIN_ALIAS_EXPANSION, nodeAt } from './yaml-structure.js';
export { hideEnvValues } from './env-expand.js';

/** One problem found in a configuration file, located for a person to fix it. */
export interface ConfigProblem {
  file: string;
  /** 1-based line and column of the offending key or value, when known. */
  line?: number;
  column?: number;
  /** Key path such as `inputs[0].dcp` (stable, by position: for programs). */
  path: string;
  /**
   * The same path with inputs, DCPs, rules and containers named by their id, key or name, such as
   * `inputs[gi-scanner].dcp` (for people); absent when the path names none of them.
   */
  where?: string;
  message: string;
}

/** A loaded configuration: validated values plus the facts the gateway needs to run it. */
export interface LoadedConfig {
  file: string;
  config: GatewayConfig;
  /** The OAuth client secret, from the environment, a systemd credential or `clientSecretFile`. */
  clientSecret: string;
  /** Proxy credentials `user:password`, from SCAN_GATEWAY_PROXY_CREDENTIALS or `upstream.proxyCredentialsFile`. */
  proxyCredentials?: string;
}

export interface LoadConfigOptions {
  /** Environment for `${VAR}` expansion and secrets; defaults to an empty object. */
  env?: Record<string, string | undefined>;
  /** Relative paths in the file (buffer, folders, secret files) are resolved against this folder. */
  baseDir: string;
  /** Skip reading the client secret (for `config check` on a machine without it). */
  skipSecret?: boolean;
}

/** Formats problems one per line as `file:line:column: path: message`. */
export function formatProblems(problems: ConfigProblem[]): string {
  return problems
    .map((p) => {
      const path = p.where ?? p.path;
      return `${p.file}${p.line ? `:${p.line}:${p.column ?? 1}` : ''}: ${path ? `${path}: ` : ''}${p.message}`;
    })
    .join('\n');
}

/**
 * Reads, expands, validates and resolves a YAML configuration file.
 *
 * @throws GatewayError `SCANGW_E_CONFIG` with `details.problems: ConfigProblem[]` when the file cannot
 *   be read, is not a regular file (a FIFO, a device, a folder; a symbolic link to a regular file is
 *   read), is larger than `CONFIG_MAX_BYTES` (1 MiB, read-file.ts), is not YAML, or fails the schema, or an `http` input's ingest token (when it can be
 *   read here) is shorter than 16 characters; `SCANGW_E_SECRET` when the client secret is missing.
 */
export function loadConfig(file: string, options: LoadConfigOptions): LoadedConfig {
  let text: string;
  try {
    text = readConfigFile(file).toString('utf8');
  } catch (err) {
    // Not a regular file, or larger than CONFIG_MAX_BYTES: the reader's message says which.
    if (isGatewayError(err, ErrorCodes.CONFIG))
      throw configError([{ file, path: '', message: err.message }]);
    throw configError([
      { file, path: '', message: `cannot read the file: ${(err as Error).message}` },
    ]);
  }
  const config = parseConfigText(text, file, options);
  const resolved = resolvePaths(config, options.baseDir);
  // What an input's kind finds beyond the schema (an ingest token too short), before anything
  // starts (and in `config check`).
  const tokenProblems = resolved.inputs.flatMap((input, i) =>
    (inputKindSpec(input.type)?.loadProblems?.(input, options.env ?? {}) ?? []).map((p) => ({
      file,
      path: `inputs[${i}].${p.key}`,
      where: `inputs[${input.id}].${p.key}`,
      message: p.message,
    })),
  );
  if (tokenProblems.length > 0) throw configError(tokenProblems);
  const clientSecret = options.skipSecret ? '' : readClientSecret(resolved, options.env ?? {});
  const proxyCredentials = options.skipSecret
    ? undefined
    : readProxyCredentials(resolved, options.env ?? {});
  return {
    file,
    config: resolved,
    clientSecret,
    ...(proxyCredentials !== undefined ? { proxyCredentials } : {}),
  };
}

/** Parses and validates configuration text; `file` is only used in messages. */
export function parseConfigText(
  text: string,
  file: string,
  options: Pick<LoadConfigOptions, 'env'> & { baseDir?: string } = {},
): GatewayConfig {
  const lineCounter = new LineCounter();
  const at = (offset: number | undefined) => {
    if (offset === undefined) return {};
    const pos = lineCounter.linePos(offset);
    return { line: pos.line, column: pos.col };
  };
  let doc: Document;
  let raw: unknown;
  try {
    // Duplicate keys are found by checkStructure in linear time: the library's `uniqueKeys` check is
    // quadratic in a map's size (a 20,000-entry lookup table took a minute).
    doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: false, merge: true });
    if (doc.errors.length > 0) {
      throw configError(
        doc.errors.map((e) => ({
          file,
          path: '',
          ...at(e.pos[0]),
          message: yamlMessage(e.code, e.message, text, e.pos[0]),
        })),
      );
    }
    keepTextAsWritten(doc.contents, []);
    const structural = checkStructure(doc, lineCounter, Math.max(MIN_ALIAS_EXPANSION, text.length));
    if (structural.length > 0) {
      throw configError(
        structural.map((p) => ({
          file,
          path: formatPath(p.path),
          ...at(p.offset),
          message: p.message,
        })),
      );
    }
    // Aliases are checked above (resolved, not self-containing, not a bomb); the library's own
    // alias count would refuse an anchor used more than 100 times and cannot say where.
    raw = doc.toJS({ maxAliasCount: -1 });
  } catch (err) {
    if (isGatewayError(err, ErrorCodes.CONFIG)) throw err;
    // Whatever else the YAML library throws (a nesting too deep for the stack…) is a problem of the file.
    throw configError([
      { file, path: '', message: `cannot read the YAML: ${(err as Error).message}` },
    ]);
  }
  const problems: ConfigProblem[] = [];
  if (raw === null || typeof raw !== 'object') {
    throw configError([{ file, path: '', message: 'the file is empty or not a YAML mapping' }]);
  }
  const substituted = new Map<string, string>();
  const expanded = expandEnv(
    raw,
    options.env ?? {},
    [],
    (path, message) =>
      problems.push({
        file,
        path: formatPath(path),
        ...at(nodeAt(doc, path)?.range?.[0]),
        message,
      }),
    substituted,
  );
  const upstream = (expanded as { upstream?: Record<string, unknown> }).upstream;
  if (upstream && typeof upstream === 'object' && 'clientSecret' in upstream) {
    problems.push({
      file,
      path: 'upstream.clientSecret',
      ...at(keyOffset(doc, ['upstream', 'clientSecret'])),
      message:
        'a literal secret is refused in the configuration file; put it in a file named by upstream.clientSecretFile, in the environment variable SCAN_GATEWAY_CLIENT_SECRET, or in the systemd credential client-secret',
    });
    delete upstream.clientSecret;
  }
  const result = withPathBase(options.baseDir, () => configSchema.safeParse(expanded));
  if (!result.success) {
    for (const issue of readableIssues(configSchema, expanded, result.error.issues)) {
      // Point at the deepest node that exists: a missing key is reported at its parent.
      let offset = issue.atKey ? keyOffset(doc, issue.path) : undefined;
      for (let n = issue.path.length; n >= 0 && offset === undefined; n--)
        offset = nodeAt(doc, issue.path.slice(0, n))?.range?.[0];
      problems.push({ file, path: formatPath(issue.path), ...at(offset), message: issue.message });
    }
  }
  if (problems.length > 0 || !result.success) {
    throw configError(
      sortProblems(problems).map((p) => {
        // An id may come from the environment too: hidden like any value taken from there.
        const { where } = named(p.path, expanded);
        return {
          ...p,
          ...(where !== undefined ? { where: hideEnvValues(where, substituted) } : {}),
          message: hideEnvValues(p.message, substituted),
        };
      }),
    );
  }
  return result.data;
}

/** In file order, so `config check` reads top to bottom; problems without a line first. */
function sortProblems(problems: ConfigProblem[]): ConfigProblem[] {
  return problems
    .map((p, i) => ({ p, i }))
    .sort(
      (a, b) =>
        (a.p.line ?? 0) - (b.p.line ?? 0) || (a.p.column ?? 0) - (b.p.column ?? 0) || a.i - b.i,
    )
    .map(({ p }) => p);
}

/** Top-level lists whose items people name by a field, and that field. */
const NAMED_LISTS: Record<string, string> = {
  inputs: 'id',
  dcps: 'key',
  rules: 'name',
  containers: 'name',
};

/**
 * `{ where }` with a list item named by its id, key or name (`inputs[gi-scanner].dcp`) instead of
 * its position, when the path starts in such a list and the item has a usable name; else `{}`.
 */
function named(path: string, data: unknown): { where?: string } {
  const m = /^(inputs|dcps|rules|containers)\[(\d+)\]/.exec(path);
  if (!m || data === null || typeof data !== 'object') return {};
  const list = (data as Record<string, unknown>)[m[1]!];
  const item = Array.isArray(list) ? (list[Number(m[2])] as unknown) : undefined;
  const name =
    item !== null && typeof item === 'object'
      ? (item as Record<string, unknown>)[NAMED_LISTS[m[1]!]!]
      : undefined;
  if (typeof name !== 'string' || name === '' || /[[\]\s]/.test(name)) return {};
  return { where: `${m[1]}[${name}]${path.slice(m[0].length)}` };
}

/** `inputs[0].dcp` style. */
export function formatPath(path: readonly (string | number)[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');
}

function configError(problems: ConfigProblem[]): GatewayError {
  return new GatewayError(
    ErrorCodes.CONFIG,
    `invalid configuration:\n${formatProblems(problems)}`,
    { details: { problems } },
  );
}
