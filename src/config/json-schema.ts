import { z } from 'zod';
import { configSchema } from './schema.js';
import { ErrorCodes, GatewayError } from '../errors.js';

/**
 * The configuration schema in the forms people and tools read: a JSON Schema (for editors, e.g.
 * yaml-language-server, and for `scan-gateway config schema`) and the reference part of
 * docs/configuration.md. Both are generated from the zod schema, the one source; a test fails when
 * the committed docs are stale (`npm run docs:config` rewrites them).
 */

/** Marks the generated part of docs/configuration.md; text outside the markers is written by hand. */
export const DOCS_BEGIN =
  '<!-- BEGIN GENERATED: scan-gateway config docs (npm run docs:config) -->';
export const DOCS_END = '<!-- END GENERATED -->';

type Json = Record<string, unknown>;

/** JSON Schema (draft 2020-12) of the configuration file as written: defaults make keys optional. */
export function configJsonSchema(): Json {
  const schema = z.toJSONSchema(configSchema, { io: 'input', unrepresentable: 'any' }) as Json;
  return {
    $schema: schema.$schema,
    $id: 'https://scan-gateway.invalid/config.schema.json',
    title: 'scan-gateway configuration',
    description:
      'Configuration of scan-gateway: site, upstream service, buffer, delivery, DCPs, inputs and the rules that map reads to Scans.',
    ...Object.fromEntries(Object.entries(schema).filter(([k]) => k !== '$schema')),
  };
}

interface Row {
  path: string;
  type: string;
  required: boolean;
  default?: unknown;
  description: string;
}

/** The generated reference: one section per top-level key, one table row per key at any depth. */
export function renderConfigReference(): string {
  const root = configJsonSchema();
  const props = (root.properties ?? {}) as Record<string, Json>;
  const required = new Set((root.required ?? []) as string[]);
  const out: string[] = [
    '## Reference',
    '',
    'Every key, generated from the schema. *Required* keys have no default; the others may be left out.',
    '',
  ];
  for (const [name, schema] of Object.entries(props)) {
    const items = schema.items as Json | undefined;
    const variants = (items?.oneOf ?? items?.anyOf) as Json[] | undefined;
    const intro = [
      cell(describe(schema)),
      required.has(name) && schema.default === undefined ? '*Required.*' : '',
    ]
      .filter((t) => t !== '')
      .join(' ');
    out.push(`### \`${name}\``, '', ...(intro ? [intro, ''] : []));
    if (name === 'inputs' && variants) {
      // One table per input type: each has its own keys.
      for (const variant of variants) {
        const type =
          ((variant.properties as Record<string, Json>).type?.const as string | undefined) ?? '?';
        out.push(
          `#### \`inputs\` of \`type: ${type}\``,
          '',
          ...table(
            rowsOf(variant, `inputs[]`, true)
              .slice(1)
              .filter((r) => r.path !== 'inputs[].type'),
          ),
          '',
        );
      }
      continue;
    }
    const rows = rowsOf(schema, name, required.has(name));
    const nested = rows.filter((r) => r.path !== name);
    out.push(...table(nested.length > 0 ? nested : rows), '');
  }
  // Shapes used in several places, described once.
  for (const [name, schema] of Object.entries((root.$defs ?? {}) as Record<string, Json>)) {
    out.push(
      `### ${name}`,
      '',
      cell(describe(schema)),
      '',
      ...table(rowsOf(schema, name, false).slice(1)),
      '',
    );
  }
  return `${out.join('\n').trimEnd()}\n`;
}

/** Puts a fresh reference between the markers of `current` (the whole docs file). */
export function renderConfigDocs(current: string): string {
  const begin = current.indexOf(DOCS_BEGIN);
  const end = current.indexOf(DOCS_END);
  if (begin < 0 || end < begin)
    throw new GatewayError(
      ErrorCodes.USAGE,
      `docs/configuration.md has no generated part: add the lines\n${DOCS_BEGIN}\n${DOCS_END}`,
    );
  return `${current.slice(0, begin + DOCS_BEGIN.length)}\n\n${renderConfigReference()}\n${current.slice(end)}`;
}

function rowsOf(schema: Json, path: string, required: boolean): Row[] {
  const rows: Row[] = [
    {
      path,
      type: typeOf(schema),
      required: required && schema.default === undefined,
      ...withDefault(schema),
      description: describe(schema),
    },
  ];
  for (const branch of objectBranches(schema)) {
    const req = new Set((branch.required ?? []) as string[]);
    for (const [k, child] of Object.entries((branch.properties ?? {}) as Record<string, Json>))
      rows.push(...rowsOf(child, `${path}.${k}`, req.has(k)));
    const extra = branch.additionalProperties;
    if (extra && typeof extra === 'object') {
      const inner = extra as Json;
      if (objectBranches(inner).length > 0 || inner.additionalProperties)
        rows.push(...rowsOf(inner, `${path}.<name>`, false));
      else if ((inner.anyOf ?? inner.oneOf) !== undefined)
        rows.push(...rowsOf(inner, `${path}.<key>`, false).slice(1));
    }
  }
  const items = schema.items as Json | undefined;
  if (items && objectBranches(items).length > 0)
    rows.push(...rowsOf(items, `${path}[]`, false).slice(1));
  return rows;
}

/** The object schemas a value may be: itself, or the object branches of a union. */
function objectBranches(schema: Json): Json[] {
  const variants = (schema.anyOf ?? schema.oneOf) as Json[] | undefined;
  if (variants) return variants.flatMap(objectBranches);
  return schema.type === 'object' && schema.properties ? [schema] : [];
}

function typeOf(schema: Json): string {
  if (typeof schema.$ref === 'string') {
    const name = schema.$ref.replace('#/$defs/', '');
    return `[${name}](#${name.toLowerCase()})`;
  }
  const variants = (schema.anyOf ?? schema.oneOf) as Json[] | undefined;
  if (variants) return [...new Set(variants.map(typeOf))].join(' or ');
  if (schema.const !== undefined) return `\`${JSON.stringify(schema.const)}\``;
  if (Array.isArray(schema.enum))
    return (schema.enum as unknown[]).map((v) => `\`${String(v)}\``).join(', ');
  switch (schema.type) {
    case 'string':
      return 'text';
    case 'boolean':
      return 'true/false';
    case 'integer':
    case 'number':
      return `${schema.type === 'integer' ? 'integer' : 'number'}${range(schema)}`;
    case 'array':
      return `list of ${schema.items ? typeOf(schema.items as Json) : 'values'}`;
    case 'object':
      if (schema.properties) return 'object';
      if (schema.additionalProperties && typeof schema.additionalProperties === 'object')
        return `map of text to ${typeOf(schema.additionalProperties as Json)}`;
      return 'object';
    default:
      return 'any';
  }
}

function range(schema: Json): string {
  const safe = (n: unknown) => typeof n === 'number' && Math.abs(n) < Number.MAX_SAFE_INTEGER;
  const parts: string[] = [];
  if (safe(schema.minimum)) parts.push(`≥ ${String(schema.minimum)}`);
  if (safe(schema.exclusiveMinimum)) parts.push(`> ${String(schema.exclusiveMinimum)}`);
  if (safe(schema.maximum)) parts.push(`≤ ${String(schema.maximum)}`);
  if (safe(schema.exclusiveMaximum)) parts.push(`< ${String(schema.exclusiveMaximum)}`);
  return parts.length > 0 ? ` (${parts.join(', ')})` : '';
}

function withDefault(schema: Json): { default?: unknown } {
  return schema.default !== undefined ? { default: schema.default } : {};
}

function describe(schema: Json): string {
  if (typeof schema.description === 'string') return schema.description;
  const items = schema.items as Json | undefined;
  if (items && typeof items.description === 'string') return items.description;
  return '';
}

function table(rows: Row[]): string[] {
  return [
    '| key | type | default | description |',
    '|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| \`${r.path}\` | ${cell(r.type)} | ${r.default !== undefined ? `\`${cell(JSON.stringify(r.default))}\`` : r.required ? '*required*' : ''} | ${cell(r.description)} |`,
    ),
  ];
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}
