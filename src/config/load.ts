import { isAbsolute, resolve } from 'node:path';
import {
  isAlias,
  isMap,
  isNode,
  isScalar,
  isSeq,
  LineCounter,
  parseDocument,
  type Document,
  type Node,
} from 'yaml';
import { ErrorCodes, GatewayError, isGatewayError } from '../errors.js';
import { withPathBase } from './cross-check.js';
import { inputKindSpec } from './input-kind.js';
import { readableIssues } from './problems.js';
import { readConfigFile } from '@scan-gateway/contract/read-file';
export { CONFIG_MAX_BYTES } from '@scan-gateway/contract/read-file';
import { readClientSecret, readProxyCredentials } from './secrets.js';
import { configSchema, type GatewayConfig } from './schema.js';

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

/**
 * A problem's message with every value taken from the environment shown as its `${NAME}` instead
 * because a variable may hold a secret, and messages go to logs, terminals and the health page.
 * Values of 1–2 characters are replaced only where quoted, so they do not garble the message.
 */
export function hideEnvValues(message: string, substituted: ReadonlyMap<string, string>): string {
  let out = message;
  // Longest first, so a value inside another one does not break the longer one's replacement.
  for (const [value, name] of [...substituted].sort((a, b) => b[0].length - a[0].length)) {
    if (value === '') continue;
    const needle = value.length >= 3 ? value : JSON.stringify(value);
    const shown = value.length >= 3 ? `\${${name}}` : `"\${${name}}"`;
    if (out.includes(needle)) out = out.split(needle).join(shown);
    // The same value as a JSON string (zod quotes values in some messages, escaping them).
    const escaped = JSON.stringify(value).slice(1, -1);
    if (escaped !== value && escaped.length >= 3 && out.includes(escaped))
      out = out.split(escaped).join(`\${${name}}`);
  }
  return out;
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

/**
 * Keys whose values are text even when YAML reads them as numbers: keys and names (`4711`), GS1
 * AIs (`ai: 01` is "01", not 1), fixed values. YAML would turn `01` into 1 and `09521234543213`
 * into 9521234543213, losing the leading zeros that GS1 numbers carry.
 */
const TEXT_KEYS = new Set([
  'ai',
  'key',
  'id',
  'dcp',
  'name',
  'productModelKey',
  'supplierKey',
  'clientKey',
  'clientId',
  'value',
  'default',
]);
/** Lists whose items are text: AIs, scope lists, parents, no-read texts. */
const TEXT_LISTS = new Set(['ais', 'inputs', 'dcps', 'parents', 'noReadStrings']);

/**
 * Rewrites plain scalars that YAML read as numbers or booleans back to the text as written, where
 * the schema wants text: see {@link TEXT_KEYS}, {@link TEXT_LISTS}, every key and value of
 * `lookups` tables, and fixed `attributes` values.
 */
function keepTextAsWritten(node: unknown, path: (string | number)[]): void {
  const asText = (scalar: unknown) => {
    if (
      isScalar(scalar) &&
      (typeof scalar.value === 'number' || typeof scalar.value === 'boolean') &&
      typeof scalar.source === 'string'
    ) {
      scalar.value = scalar.source;
    }
  };
  if (isMap(node)) {
    const inTable = path.length === 2 && path[0] === 'lookups';
    for (const pair of node.items) {
      if (inTable) asText(pair.key);
      const k = isScalar(pair.key) ? String(pair.key.value) : '';
      keepTextAsWritten(pair.value, [...path, k]);
    }
    return;
  }
  if (isSeq(node)) {
    node.items.forEach((item, i) => keepTextAsWritten(item, [...path, i]));
    return;
  }
  const last = path[path.length - 1];
  const parent = path[path.length - 2];
  if (
    (typeof last === 'string' && TEXT_KEYS.has(last)) ||
    (typeof last === 'number' &&
      typeof parent === 'string' &&
      TEXT_LISTS.has(parent) &&
      path.length >= 3) ||
    (path.length === 3 && path[0] === 'lookups') ||
    (typeof parent === 'string' && parent === 'attributes')
  ) {
    asText(node);
  }
}

/**
 * The YAML library's errors in plain words, with what to do; the library's own sentence
 * follows in brackets for a search. Codes: the `yaml` package's `ErrorCode`.
 */
const YAML_PLAIN: Record<string, string> = {
  BLOCK_IN_FLOW:
    'a list or map on lines of its own inside { } or [ ]: inside braces and brackets write everything on one line, separated by commas (or close the brace or bracket first; a missing } or ] often causes this)',
  TAB_AS_INDENT: 'a tab indents this line: YAML indents with spaces only',
  BAD_INDENT:
    'the indentation does not line up: the keys of one map start in the same column, list items (-) too',
  MISSING_CHAR: 'something is not closed: a quote, a brace } or a bracket ] is missing',
  MULTILINE_IMPLICIT_KEY:
    'a key runs over more than one line: often a missing colon after a key, or a quote opened on the line before and never closed',
  UNEXPECTED_TOKEN:
    'unexpected text here: often a missing colon after a key, a missing comma inside { } or [ ], or text after a closing quote',
  BLOCK_AS_IMPLICIT_KEY:
    'a list or map stands where a key should be: often a missing space after a colon, or a line indented too far',
  BAD_SCALAR_START:
    'a value cannot start with this character unquoted (@, `, %, | or >): put the value in quotes',
  BAD_DQ_ESCAPE:
    'an unknown backslash escape in "double quotes": write \\\\ for one backslash, or use \'single quotes\' (no escapes)',
  MULTIPLE_DOCS: 'the file holds more than one YAML document (a --- line in the middle): keep one',
  KEY_OVER_1024_CHARS:
    'a key longer than 1024 characters: often a missing colon or a quote that is never closed',
  DUPLICATE_KEY: 'a key is written twice in the same map: keep one',
  BAD_ALIAS: 'an alias (*name) that is not written correctly',
  MULTIPLE_ANCHORS: 'two anchors (&name) on one value: keep one',
  MULTIPLE_TAGS: 'two tags (!tag) on one value: keep one',
  NON_STRING_KEY: 'a key that is not text: keys are names',
};

/** A YAML parse error in plain words, with the line's text when it helps to find the place. */
function yamlMessage(
  code: string,
  message: string,
  text: string,
  offset: number | undefined,
): string {
  const first = message.split('\n')[0] ?? message;
  const unclosed = /end with an? ([}\]])/.exec(first);
  const plain = unclosed
    ? `a ${unclosed[1] === '}' ? '{' : '['} opened on this or an earlier line is not closed with ${unclosed[1]} (or the lines inside it are not indented under its key)`
    : YAML_PLAIN[code];
  if (!plain) return first;
  const lineText =
    offset === undefined
      ? undefined
      : text
          .slice(text.lastIndexOf('\n', offset - 1) + 1)
          .split('\n')[0]
          ?.trim();
  const shown = lineText
    ? `; at \`${lineText.length > 60 ? `${lineText.slice(0, 57)}...` : lineText}\``
    : '';
  return `${plain}${shown} [YAML: ${first}]`;
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

/** Aliases may add at least this many values to the document (more for a larger file) before it is refused. */
const MIN_ALIAS_EXPANSION = 100_000;

interface StructureProblem {
  path: (string | number)[];
  offset: number | undefined;
  message: string;
}

/**
 * What the YAML library leaves to its quadratic or located-nowhere checks, in one pass in
 * document order: a key written twice in one map (the first at which line), an alias without an
 * anchor before it, an alias inside the node it names, a merge key (`<<`) whose value is not a map
 * (or a list of maps), and aliases that expand to more than `maxExpansion` values (an alias bomb,
 * refused before anything walks the expanded tree).
 */
function checkStructure(
  doc: Document,
  lineCounter: LineCounter,
  maxExpansion: number,
): StructureProblem[] {
  const found: StructureProblem[] = [];
  /** The latest node that defined each anchor so far. */
  const anchors = new Map<string, Node>();
  /** Expanded size of anchored nodes whose content is complete. */
  const sizes = new Map<Node, number>();
  const path: (string | number)[] = [];
  let added = 0;
  let stopped = false;
  const lineOf = (node: Node) => (node.range ? lineCounter.linePos(node.range[0]).line : '?');
  const problem = (node: Node, message: string, where = path) =>
    found.push({ path: [...where], offset: node.range?.[0], message });

  /** Counts the values `node` stands for once aliases are expanded. */
  const walk = (node: unknown): number => {
    if (stopped) return 0;
    if (isAlias(node)) {
      const target = anchors.get(node.source);
      if (target === undefined) {
        problem(node, `unresolved alias *${node.source}: no anchor &${node.source} before it`);
        return 1;
      }
      const size = sizes.get(target);
      if (size === undefined) {
        problem(
          node,
          `alias *${node.source} is inside the node &${node.source} it names: it would never end`,
        );
        return 1;
      }
      added += size;
      if (added > maxExpansion) {
        problem(
          node,
          `aliases expand to more than ${maxExpansion} values (an alias bomb?); *${node.source} alone stands for ${size}`,
        );
        stopped = true;
      }
      return size;
    }
    if (!isNode(node)) return 0;
    // An anchor is defined before its content, so an alias inside it finds it without a size.
    if (node.anchor) anchors.set(node.anchor, node);
    let size = 1;
    if (isMap(node)) {
      const keys = new Map<string, Node>();
      for (const pair of node.items) {
        const key = pair.key;
        const isMerge = isScalar(key) && typeof key.value === 'symbol';
        const name = isScalar(key) && !isMerge ? String(key.value) : undefined;
        if (name !== undefined) {
          const first = keys.get(name);
          if (first !== undefined)
            problem(key as Node, `duplicate key "${name}" (first at line ${lineOf(first)})`, [
              ...path,
              name,
            ]);
          else keys.set(name, key as Node);
        }
        size += walk(key);
        path.push(isMerge ? '<<' : (name ?? '?'));
        size += walk(pair.value);
        if (isMerge && !stopped) checkMerge(pair.value);
        path.pop();
      }
    } else if (isSeq(node)) {
      for (let i = 0; i < node.items.length; i++) {
        path.push(i);
        size += walk(node.items[i]);
        path.pop();
      }
    }
    if (node.anchor) sizes.set(node, size);
    return size;
  };

  const isMapLike = (v: unknown) =>
    isMap(v) ||
    (isAlias(v) && (anchors.get(v.source) === undefined || isMap(anchors.get(v.source))));
  const checkMerge = (value: unknown) => {
    const resolved = isAlias(value) ? anchors.get(value.source) : value;
    const ok = isSeq(resolved)
      ? resolved.items.every(isMapLike)
      : resolved === undefined || isMapLike(value);
    if (!ok && isNode(value))
      problem(value, 'a merge key (<<) takes a map, an alias of one (*name), or a list of them');
  };

  walk(doc.contents);
  return found;
}

function nodeAt(doc: Document, path: (string | number)[]): Node | undefined {
  if (path.length === 0) return doc.contents ?? undefined;
  const node = doc.getIn(path, true);
  return isScalar(node) || isMap(node) || isSeq(node) ? node : undefined;
}

/** Offset of the key (not the value) at `path`, else of its parent. */
function keyOffset(doc: Document, path: (string | number)[]): number | undefined {
  const parent = nodeAt(doc, path.slice(0, -1));
  if (!isMap(parent)) return parent?.range?.[0];
  const last = path[path.length - 1];
  for (const pair of parent.items) {
    if (isScalar(pair.key) && String(pair.key.value) === String(last)) return pair.key.range?.[0];
  }
  return parent.range?.[0];
}

/** `inputs[0].dcp` style. */
export function formatPath(path: readonly (string | number)[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');
}

const ENV_REF = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/** `${VAR}` and `${VAR:-default}` in string values; an unset variable without default is a problem. */
function expandEnv(
  value: unknown,
  env: Record<string, string | undefined>,
  path: (string | number)[],
  problem: (path: (string | number)[], message: string) => void,
  substituted: Map<string, string>,
): unknown {
  if (typeof value === 'string') {
    if (!value.includes('${')) return value;
    return value.replace(ENV_REF, (whole, name: string, fallback: string | undefined) => {
      const v = env[name];
      if (v !== undefined) {
        // Remembered so that no problem message shows it (hideEnvValues).
        substituted.set(v, name);
        return v;
      }
      if (fallback !== undefined) return fallback;
      problem(path, `environment variable ${name} is not set (referenced as ${whole})`);
      return whole;
    });
  }
  if (Array.isArray(value))
    return value.map((v, i) => expandEnv(v, env, [...path, i], problem, substituted));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value))
      out[k] = expandEnv(v, env, [...path, k], problem, substituted);
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
      ...(config.upstream.clientSecretFile
        ? { clientSecretFile: abs(config.upstream.clientSecretFile) }
        : {}),
      ...(config.upstream.caFile ? { caFile: abs(config.upstream.caFile) } : {}),
      ...(config.upstream.proxyCredentialsFile
        ? { proxyCredentialsFile: abs(config.upstream.proxyCredentialsFile) }
        : {}),
      statusEvents: {
        ...config.upstream.statusEvents,
        ...(config.upstream.statusEvents.caFile
          ? { caFile: abs(config.upstream.statusEvents.caFile) }
          : {}),
      },
      ...(config.upstream.sftp
        ? {
            sftp: {
              ...config.upstream.sftp,
              ...(config.upstream.sftp.privateKeyFile
                ? { privateKeyFile: abs(config.upstream.sftp.privateKeyFile) }
                : {}),
              ...(config.upstream.sftp.passwordFile
                ? { passwordFile: abs(config.upstream.sftp.passwordFile) }
                : {}),
            },
          }
        : {}),
    },
    buffer: {
      ...config.buffer,
      path: config.buffer.path === ':memory:' ? ':memory:' : abs(config.buffer.path),
    },
    http: {
      ...config.http,
      ...(config.http.adminTokenFile ? { adminTokenFile: abs(config.http.adminTokenFile) } : {}),
      ...(config.http.tls ? { tls: resolveTlsPaths(config.http.tls, abs) } : {}),
    },
    inputs: config.inputs.map((input) => resolveInputPaths(input, abs)),
  };
}

/** The PEM files of `http.tls`, resolved against the base folder. */
function resolveTlsPaths(
  tls: NonNullable<GatewayConfig['http']['tls']>,
  abs: (p: string) => string,
): NonNullable<GatewayConfig['http']['tls']> {
  return {
    certFile: abs(tls.certFile),
    keyFile: abs(tls.keyFile),
    ...(tls.caFile ? { caFile: abs(tls.caFile) } : {}),
    ...(tls.clientCaFile ? { clientCaFile: abs(tls.clientCaFile) } : {}),
  };
}

/** An input's folder and files (`dir`, `caFile`, `passwordFile`, `tokenFile`…), resolved against the base folder. */
function resolveInputPaths<T extends GatewayConfig['inputs'][number]>(
  input: T,
  abs: (p: string) => string,
): T {
  const out: Record<string, unknown> = { ...(input as object) };
  for (const [k, v] of Object.entries(input as object)) {
    if (typeof v === 'string' && (k === 'dir' || k.endsWith('File'))) out[k] = abs(v);
  }
  return out as T;
}

function configError(problems: ConfigProblem[]): GatewayError {
  return new GatewayError(
    ErrorCodes.CONFIG,
    `invalid configuration:\n${formatProblems(problems)}`,
    { details: { problems } },
  );
}
