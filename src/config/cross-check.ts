import { resolve } from 'node:path';
import type { z } from 'zod';
import { inputKindSpec } from './input-kind.js';
import { DEFAULT_SANDBOX_KAFKA_LISTEN } from './schema.js';

/**
 * Checks between sections of the configuration that no single key's schema can make: an input's
 * DCP exists, a rule names inputs, DCPs and lookup tables that exist, a `group` is a named group of
 * the rule's regex, a fixed DCP key is a configured DCP, names are unique.
 *
 * Runs even when other parts of the file are invalid (so `config check` reports every mistake at
 * once), so it reads the value defensively: anything not of the expected shape is skipped here,
 * as the schema reports it already.
 */
export function crossCheck(value: unknown, ctx: z.RefinementCtx): void {
  const cfg = asRecord(value);
  if (!cfg) return;
  const add = (path: (string | number)[], message: string) =>
    ctx.addIssue({ code: 'custom', path, message });

  const dcpKeys = uniqueNames(asArray(cfg.dcps), 'key', 'DCP key', ['dcps'], add);
  const inputIds = uniqueNames(asArray(cfg.inputs), 'id', 'input id', ['inputs'], add);
  const lookups = asRecord(cfg.lookups) ?? {};
  const lookupNames = Object.keys(lookups);

  // A route that sends by SFTP needs the server.
  const delivery = asRecord(cfg.delivery);
  const usesSftp =
    delivery?.mode === 'sftp' || (delivery?.mode === 'auto' && delivery.largeBatchRoute === 'sftp');
  if (usesSftp && asRecord(cfg.upstream) && asRecord(asRecord(cfg.upstream)!.sftp) === undefined) {
    add(
      ['upstream', 'sftp'],
      `is required by delivery.${delivery?.mode === 'sftp' ? 'mode sftp' : 'largeBatchRoute sftp'}: host, hostKey (the server's SHA256 fingerprint) and a key or password`,
    );
  }

  asArray(cfg.inputs).forEach((input, i) => {
    const dcp = asRecord(input)?.dcp;
    if (typeof dcp === 'string' && dcpKeys.length > 0 && !dcpKeys.includes(dcp)) {
      add(
        ['inputs', i, 'dcp'],
        `unknown DCP "${dcp}"${didYouMean(dcp, dcpKeys)}; known: ${dcpKeys.join(', ')}`,
      );
    }
  });

  const checkScope = (section: string, i: number, item: Record<string, unknown>) => {
    asArray(item.inputs).forEach((id, n) => {
      if (typeof id === 'string' && !inputIds.includes(id))
        add(
          [section, i, 'inputs', n],
          `unknown input "${id}"${didYouMean(id, inputIds)}; known: ${inputIds.join(', ') || 'none'}`,
        );
    });
    asArray(item.dcps).forEach((k, n) => {
      if (typeof k === 'string' && !dcpKeys.includes(k))
        add(
          [section, i, 'dcps', n],
          `unknown DCP "${k}"${didYouMean(k, dcpKeys)}; known: ${dcpKeys.join(', ')}`,
        );
    });
  };

  const checkValue = (
    path: (string | number)[],
    v: unknown,
    groups: string[] | undefined | null,
    isDcp: boolean,
  ) => {
    if (typeof v === 'string') {
      if (isDcp && dcpKeys.length > 0 && !dcpKeys.includes(v))
        add(path, `unknown DCP "${v}"${didYouMean(v, dcpKeys)}; known: ${dcpKeys.join(', ')}`);
      return;
    }
    const source = asRecord(v);
    if (!source) return;
    if (typeof source.lookup === 'string') {
      if (!lookupNames.includes(source.lookup)) {
        add(
          [...path, 'lookup'],
          `unknown lookup table "${source.lookup}"${didYouMean(source.lookup, lookupNames)}; tables in \`lookups\`: ${lookupNames.join(', ') || 'none'}`,
        );
      } else if (isDcp) {
        const table = asRecord(lookups[source.lookup]) ?? {};
        for (const [from, to] of Object.entries(table)) {
          if (typeof to === 'string' && !dcpKeys.includes(to))
            add(
              ['lookups', source.lookup, from],
              `"${from}" maps to "${to}", which is not a configured DCP`,
            );
        }
      }
    }
    if (isDcp && typeof source.value === 'string' && !dcpKeys.includes(source.value)) {
      add(
        [...path, 'value'],
        `unknown DCP "${source.value}"${didYouMean(source.value, dcpKeys)}; known: ${dcpKeys.join(', ')}`,
      );
    }
    if (typeof source.group === 'string' && groups !== null) {
      if (groups === undefined)
        add(
          [...path, 'group'],
          `takes the regex group "${source.group}", but there is no \`match.regex\` here`,
        );
      else if (!groups.includes(source.group)) {
        add(
          [...path, 'group'],
          `the regex has no group named "${source.group}"${didYouMean(source.group, groups)}; its named groups: ${groups.join(', ') || 'none'}`,
        );
      }
    }
  };

  uniqueNames(asArray(cfg.rules), 'name', 'rule name', ['rules'], add);
  asArray(cfg.rules).forEach((raw, i) => {
    const rule = asRecord(raw);
    if (!rule) return;
    checkScope('rules', i, rule);
    const groups = regexGroups(asRecord(rule.match)?.regex);
    checkValue(['rules', i, 'reference'], rule.reference, groups, false);
    checkValue(['rules', i, 'dcp'], rule.dcp, groups, true);
    for (const k of ['productModelKey', 'supplierKey', 'clientKey'] as const)
      checkValue(['rules', i, k], rule[k], groups, false);
    for (const [name, v] of Object.entries(asRecord(rule.attributes) ?? {}))
      checkValue(['rules', i, 'attributes', name], v, groups, false);
    asArray(rule.parents).forEach((v, n) =>
      checkValue(['rules', i, 'parents', n], v, groups, false),
    );
    // A rule that needs a container refuses every read when there is none to open.
    const containerNames = asArray(cfg.containers).flatMap((c) =>
      typeof asRecord(c)?.name === 'string' ? [asRecord(c)!.name as string] : [],
    );
    if (rule.requireContainer === true && containerNames.length === 0) {
      add(
        ['rules', i, 'requireContainer'],
        'needs an open container, but `containers` defines none: every read of this rule would be refused',
      );
    } else if (
      typeof rule.requireContainer === 'string' &&
      !containerNames.includes(rule.requireContainer)
    ) {
      add(
        ['rules', i, 'requireContainer'],
        `unknown container "${rule.requireContainer}"${didYouMean(rule.requireContainer, containerNames)}; containers: ${containerNames.join(', ') || 'none'}`,
      );
    }
  });

  uniqueNames(asArray(cfg.containers), 'name', 'container name', ['containers'], add);
  asArray(cfg.containers).forEach((raw, i) => {
    const container = asRecord(raw);
    if (!container) return;
    checkScope('containers', i, container);
    checkValue(
      ['containers', i, 'reference'],
      container.reference,
      regexGroups(asRecord(container.open)?.regex),
      false,
    );
  });

  checkClashes(cfg, add);
}

/** Folder relative paths are resolved against while {@link withPathBase} runs; else the working folder. */
let pathBase: string | undefined;

/**
 * Runs `run` (a parse of the configuration schema) with relative folders resolved against
 * `baseDir`, as the loader will resolve them, so that `inbox` and `/etc/scan-gateway/inbox` are
 * known to be the same folder.
 */
export function withPathBase<T>(baseDir: string | undefined, run: () => T): T {
  const before = pathBase;
  pathBase = baseDir;
  try {
    return run();
  } finally {
    pathBase = before;
  }
}

/** Addresses every interface listens on: they clash with any host on the same port. */
const ANY_HOST = new Set(['0.0.0.0', '::', '::0', '']);

interface Listener {
  path: (string | number)[];
  what: string;
  /** As written, for messages. */
  address: string;
  host: string;
  port: number;
}

/**
 * Two `files` inputs on one folder (each file would be ingested twice), two listeners on one
 * address (http.listen, the embedded sandbox, tcp server inputs), two MQTT inputs with one broker
 * and one client id (each would take the other's session over). Reported at the later entry.
 */
function checkClashes(
  cfg: Record<string, unknown>,
  add: (path: (string | number)[], message: string) => void,
): void {
  const listeners: Listener[] = [];
  const listen = (path: (string | number)[], what: string, address: unknown) => {
    if (typeof address !== 'string') return;
    const i = address.lastIndexOf(':');
    const port = Number(address.slice(i + 1));
    if (i < 0 || !Number.isInteger(port)) return;
    listeners.push({ path, what, address, host: address.slice(0, i), port });
  };
  listen(['http', 'listen'], 'the HTTP server (http.listen)', asRecord(cfg.http)?.listen);
  const sandbox = asRecord(cfg.sandbox);
  if (sandbox?.enabled === true)
    listen(['sandbox', 'listen'], 'the embedded sandbox (sandbox.listen)', sandbox.listen);
  if (sandbox?.enabled === true) {
    const kafkaListen = asRecord(sandbox.kafka)?.listen ?? DEFAULT_SANDBOX_KAFKA_LISTEN;
    listen(
      ['sandbox', 'kafka', 'listen'],
      "the embedded sandbox's Kafka endpoint (sandbox.kafka.listen)",
      kafkaListen,
    );
  }

  const folders = new Map<string, string>();
  const sessions = new Map<string, string>();
  asArray(cfg.inputs).forEach((raw, i) => {
    const input = asRecord(raw);
    if (!input || typeof input.type !== 'string') return;
    // What the entry claims, by its kind, once the entry is valid (the schema reports the rest).
    const parsed = inputKindSpec(input.type)?.schema.safeParse(raw);
    if (!parsed?.success) return;
    const name = `input "${parsed.data.id}"`;
    for (const r of inputKindSpec(input.type)?.resources(parsed.data) ?? []) {
      if (r.kind === 'folder') {
        const folder = resolve(pathBase ?? '.', r.path);
        const first = folders.get(folder);
        if (first !== undefined)
          add(
            ['inputs', i, r.key],
            `${first} watches the folder ${folder} too; each file would be ingested twice (one ${input.type} input per folder)`,
          );
        else folders.set(folder, name);
      } else if (r.kind === 'listen') {
        listen(['inputs', i, r.key], `${input.type} server ${name}`, r.address);
      } else if (r.kind === 'session') {
        const first = sessions.get(r.id);
        if (first !== undefined) add(['inputs', i, r.key], `${first} ${r.clash}`);
        else sessions.set(r.id, name);
      }
    }
  });

  const byPort = new Map<number, Listener[]>();
  for (const l of listeners) {
    // Port 0 is a free port chosen when listening: never the same twice.
    if (l.port === 0) continue;
    const host = l.host.replace(/^\[|\]$/g, '').toLowerCase();
    const earlier = byPort.get(l.port) ?? [];
    const clash = earlier.find(
      (e) => e.host === host || ANY_HOST.has(e.host) || ANY_HOST.has(host),
    );
    if (clash)
      add(
        l.path,
        `${l.what} would listen on ${l.address}, where ${clash.what} listens already (${clash.address})`,
      );
    byPort.set(l.port, [...earlier, { ...l, host }]);
  }
}

/**
 * Names of the named groups of a regular expression source; undefined when there is no regex,
 * null when it does not compile (the schema reports that already).
 */
export function regexGroups(source: unknown): string[] | undefined | null {
  if (typeof source !== 'string') return undefined;
  try {
    new RegExp(source, 'u');
  } catch {
    return null;
  }
  return [...source.matchAll(/\(\?<([A-Za-z_$][\w$]*)>/g)].map((m) => m[1]!);
}

function uniqueNames(
  items: unknown[],
  field: string,
  what: string,
  path: (string | number)[],
  add: (path: (string | number)[], message: string) => void,
): string[] {
  const seen: string[] = [];
  items.forEach((item, i) => {
    const name = asRecord(item)?.[field];
    if (typeof name !== 'string') return;
    if (seen.includes(name)) add([...path, i, field], `duplicate ${what} "${name}"`);
    else seen.push(name);
  });
  return seen;
}

function asRecord(v: unknown): Record<string, unknown> | undefined {
  return v && typeof v === 'object' && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}

function asArray(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

/** `; did you mean "X"?` when a candidate is within two edits of `word` (case-insensitive), else ''. */
export function didYouMean(word: string, candidates: readonly string[]): string {
  let best: string | undefined;
  // Two edits at most, and fewer than the word's length, so "id" does not suggest "dcp".
  let bestDistance = Math.min(3, word.length);
  for (const c of candidates) {
    const d = editDistance(word.toLowerCase(), c.toLowerCase());
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best !== undefined && best !== word ? `; did you mean "${best}"?` : '';
}

/** Levenshtein distance. */
export function editDistance(a: string, b: string): number {
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
