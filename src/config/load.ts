import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node } from 'yaml';
import type { z } from 'zod';
import { ErrorCodes, GatewayError } from '../errors.js';
import { configSchema, type GatewayConfig } from './schema.js';

/** One problem found in a configuration file, located for a person to fix it. */
export interface ConfigProblem {
  file: string;
  /** 1-based line and column of the offending key or value, when known. */
  line?: number;
  column?: number;
  /** Key path such as `inputs[0].dcp`. */
  path: string;
  message: string;
}

/** A loaded configuration: validated values plus the facts the gateway needs to run it. */
export interface LoadedConfig {
  file: string;
  config: GatewayConfig;
  /** The OAuth client secret, from the environment, a systemd credential or `clientSecretFile`. */
  clientSecret: string;
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
    .map((p) => `${p.file}${p.line ? `:${p.line}:${p.column ?? 1}` : ''}: ${p.path ? `${p.path}: ` : ''}${p.message}`)
    .join('\n');
}

/**
 * Reads, expands, validates and resolves a YAML configuration file.
 *
 * @throws GatewayError `SCANGW_E_CONFIG` with `details.problems: ConfigProblem[]` when the file cannot
 *   be read, is not YAML, or fails the schema; `SCANGW_E_SECRET` when the client secret is missing.
 */
export function loadConfig(file: string, options: LoadConfigOptions): LoadedConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw configError([{ file, path: '', message: `cannot read the file: ${(err as Error).message}` }]);
  }
  const config = parseConfigText(text, file, options);
  const resolved = resolvePaths(config, options.baseDir);
  const clientSecret = options.skipSecret ? '' : readClientSecret(resolved, options.env ?? {});
  return { file, config: resolved, clientSecret };
}

/** Parses and validates configuration text; `file` is only used in messages. */
export function parseConfigText(text: string, file: string, options: Pick<LoadConfigOptions, 'env'> = {}): GatewayConfig {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const at = (offset: number | undefined) => {
    if (offset === undefined) return {};
    const pos = lineCounter.linePos(offset);
    return { line: pos.line, column: pos.col };
  };
  if (doc.errors.length > 0) {
    throw configError(doc.errors.map((e) => ({ file, path: '', ...at(e.pos[0]), message: e.message.split('\n')[0] ?? e.message })));
  }
  const problems: ConfigProblem[] = [];
  const raw: unknown = doc.toJS();
  if (raw === null || typeof raw !== 'object') {
    throw configError([{ file, path: '', message: 'the file is empty or not a YAML mapping' }]);
  }
  const expanded = expandEnv(raw, options.env ?? {}, [], (path, message) => problems.push({ file, path: formatPath(path), ...at(nodeAt(doc, path)?.range?.[0]), message }));
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
  const result = configSchema.safeParse(expanded);
  if (!result.success) problems.push(...zodProblems(result.error, doc, file, at));
  if (problems.length > 0) throw configError(problems);
  if (!result.success) throw configError(problems);
  return result.data;
}

function zodProblems(
  error: z.ZodError,
  doc: Document,
  file: string,
  at: (offset: number | undefined) => { line?: number; column?: number },
): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  for (const issue of error.issues) {
    const path = issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p));
    if (issue.code === 'unrecognized_keys') {
      for (const k of issue.keys) {
        const full = [...path, k];
        out.push({ file, path: formatPath(full), ...at(keyOffset(doc, full)), message: `unknown key "${k}"${suggest(k, knownKeys())}` });
      }
      continue;
    }
    // Point at the deepest node that exists: a missing key is reported at its parent.
    let offset: number | undefined;
    for (let n = path.length; n >= 0 && offset === undefined; n--) offset = nodeAt(doc, path.slice(0, n))?.range?.[0];
    const message = issue.code === 'invalid_type' && issue.message.includes('received undefined') ? `missing required key (${issue.message})` : issue.message;
    out.push({ file, path: formatPath(path), ...at(offset), message });
  }
  return out;
}

function knownKeys(): string[] {
  allKeys ??= [...collectKeys(configSchema, new Set())];
  return allKeys;
}
let allKeys: string[] | undefined;

/** Every object key the schema knows, at any depth: the candidates for "did you mean". */
function collectKeys(schema: unknown, seen: Set<unknown>, out = new Set<string>()): Set<string> {
  if (!schema || typeof schema !== 'object' || seen.has(schema)) return out;
  seen.add(schema);
  const def = (schema as { _zod?: { def?: Record<string, unknown> } })._zod?.def;
  if (!def) return out;
  const shape = def.shape as Record<string, unknown> | undefined;
  if (shape) for (const [k, v] of Object.entries(shape)) { out.add(k); collectKeys(v, seen, out); }
  for (const k of ['innerType', 'element', 'in', 'out', 'schema']) collectKeys(def[k], seen, out);
  for (const o of (def.options as unknown[] | undefined) ?? []) collectKeys(o, seen, out);
  return out;
}

/** "did you mean" against keys the schema knows at this level, when zod tells them. */
function suggest(key: string, known: string[]): string {
  let best: string | undefined;
  let bestDistance = 3;
  for (const k of known) {
    const d = editDistance(key.toLowerCase(), k.toLowerCase());
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  return best ? `; did you mean "${best}"?` : '';
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = tmp;
    }
  }
  return row[b.length]!;
}

function nodeAt(doc: Document, path: (string | number)[]): Node | undefined {
  if (path.length === 0) return doc.contents ?? undefined;
  const node = doc.getIn(path, true);
  return isScalar(node) || isMap(node) || isSeq(node) ? node : undefined;
}

function keyOffset(doc: Document, path: (string | number)[]): number | undefined {
  const parent = nodeAt(doc, path.slice(0, -1));
  if (!isMap(parent)) return nodeAt(doc, path.slice(0, -1))?.range?.[0];
  const last = path[path.length - 1];
  for (const pair of parent.items) {
    if (isScalar(pair.key) && pair.key.value === last) return pair.key.range?.[0];
  }
  return parent.range?.[0];
}

function formatPath(path: (string | number)[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');
}

const ENV_REF = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/** `${VAR}` and `${VAR:-default}` in string values; an unset variable without default is a problem. */
function expandEnv(
  value: unknown,
  env: Record<string, string | undefined>,
  path: (string | number)[],
  problem: (path: (string | number)[], message: string) => void,
): unknown {
  if (typeof value === 'string') {
    return value.replace(ENV_REF, (whole, name: string, fallback: string | undefined) => {
      const v = env[name];
      if (v !== undefined) return v;
      if (fallback !== undefined) return fallback;
      problem(path, `environment variable ${name} is not set (referenced as ${whole})`);
      return whole;
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => expandEnv(v, env, [...path, i], problem));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = expandEnv(v, env, [...path, k], problem);
    return out;
  }
  return value;
}

function resolvePaths(config: GatewayConfig, baseDir: string): GatewayConfig {
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(baseDir, p));
  return {
    ...config,
    upstream: {
      ...config.upstream,
      ...(config.upstream.clientSecretFile ? { clientSecretFile: abs(config.upstream.clientSecretFile) } : {}),
      ...(config.upstream.caFile ? { caFile: abs(config.upstream.caFile) } : {}),
    },
    buffer: { ...config.buffer, path: config.buffer.path === ':memory:' ? ':memory:' : abs(config.buffer.path) },
    inputs: config.inputs.map((input) => (input.type === 'files' ? { ...input, dir: abs(input.dir) } : input)),
  };
}

/**
 * The client secret, first found of: env SCAN_GATEWAY_CLIENT_SECRET, the systemd credential
 * `client-secret` (`$CREDENTIALS_DIRECTORY/client-secret`, from `LoadCredential=`), `clientSecretFile`.
 */
export function readClientSecret(config: GatewayConfig, env: Record<string, string | undefined>): string {
  const fromEnv = env.SCAN_GATEWAY_CLIENT_SECRET;
  if (fromEnv && fromEnv.trim()) return fromEnv.trim();
  const candidates: string[] = [];
  if (env.CREDENTIALS_DIRECTORY) candidates.push(resolve(env.CREDENTIALS_DIRECTORY, 'client-secret'));
  if (config.upstream.clientSecretFile) candidates.push(config.upstream.clientSecretFile);
  for (const file of candidates) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' && file !== config.upstream.clientSecretFile) continue;
      throw new GatewayError(ErrorCodes.SECRET, `cannot read the client secret from ${file}: ${(err as Error).message}`, { cause: err });
    }
    const secret = text.trim();
    if (!secret) throw new GatewayError(ErrorCodes.SECRET, `the client secret file ${file} is empty`);
    return secret;
  }
  throw new GatewayError(
    ErrorCodes.SECRET,
    'no client secret: set SCAN_GATEWAY_CLIENT_SECRET, provide the systemd credential client-secret, or set upstream.clientSecretFile',
  );
}

function configError(problems: ConfigProblem[]): GatewayError {
  return new GatewayError(ErrorCodes.CONFIG, `invalid configuration:\n${formatProblems(problems)}`, { details: { problems } });
}
