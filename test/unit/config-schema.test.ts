import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import {
  configJsonSchema,
  DOCS_BEGIN,
  DOCS_END,
  renderConfigDocs,
  renderConfigReference,
} from '../../src/config/json-schema.js';
import { loadConfig } from '../../src/config/load.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

const DOCS = join(PACKAGE_ROOT, 'docs/configuration.md');

/** Every key path of an object schema, at any depth, as the docs write it (`rules[].match`). */
function keyPaths(schema: Record<string, unknown>, path: string, out: Set<string>): Set<string> {
  const variants = (schema.anyOf ?? schema.oneOf) as Record<string, unknown>[] | undefined;
  for (const v of variants ?? []) keyPaths(v, path, out);
  const props = schema.properties as Record<string, Record<string, unknown>> | undefined;
  for (const [k, child] of Object.entries(props ?? {})) {
    const p = path ? `${path}.${k}` : k;
    out.add(p);
    keyPaths(child, p, out);
  }
  const items = schema.items as Record<string, unknown> | undefined;
  if (items) keyPaths(items, `${path}[]`, out);
  return out;
}

describe('JSON Schema of the configuration', () => {
  const schema = configJsonSchema();
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  const validate = ajv.compile(schema);

  it('accepts the shipped configurations as written', () => {
    for (const file of ['config/example.yaml', 'config/demo.yaml']) {
      const raw: unknown = parse(readFileSync(join(PACKAGE_ROOT, file), 'utf8'));
      expect(validate(raw), `${file}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    }
  });

  it('refuses unknown keys and wrong types, like the loader', () => {
    const raw = parse(readFileSync(join(PACKAGE_ROOT, 'config/example.yaml'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(validate({ ...raw, rulez: [] })).toBe(false);
    expect(validate({ ...raw, rules: [{ name: 'x', match: { regexp: '^A' } }] })).toBe(false);
    expect(validate({ ...raw, timeCheck: { action: 'drop' } })).toBe(false);
  });

  it('describes every key', () => {
    const undescribed: string[] = [];
    const walk = (s: Record<string, unknown>, path: string) => {
      const props = s.properties as Record<string, Record<string, unknown>> | undefined;
      for (const [k, child] of Object.entries(props ?? {})) {
        const p = `${path}.${k}`;
        const ref = typeof child.$ref === 'string';
        // Keys of other engineers' input types are theirs to describe; the mapping sections are checked here.
        if (!ref && typeof child.description !== 'string' && k !== 'type') undescribed.push(p);
        walk(child, p);
        if (child.items) walk(child.items as Record<string, unknown>, `${p}[]`);
      }
    };
    const props = schema.properties as Record<string, Record<string, unknown>>;
    for (const section of [
      'site',
      'dcps',
      'lookups',
      'rules',
      'containers',
      'timeCheck',
      'productCheck',
    ]) {
      const s = props[section]!;
      if (typeof s.description !== 'string') undescribed.push(section);
      walk((s.items as Record<string, unknown> | undefined) ?? s, section);
    }
    for (const def of Object.values(
      (schema.$defs ?? {}) as Record<string, Record<string, unknown>>,
    ))
      walk(def, '$defs');
    expect(undescribed).toEqual([]);
  });
});

describe('docs/configuration.md', () => {
  it('holds the reference generated from the schema (run `npm run docs:config` when this fails)', () => {
    const current = readFileSync(DOCS, 'utf8');
    expect(current).toContain(DOCS_BEGIN);
    expect(current).toContain(DOCS_END);
    expect(renderConfigDocs(current)).toBe(current);
  });

  it('lists every key of the schema', () => {
    const reference = renderConfigReference();
    const paths = keyPaths(configJsonSchema(), '', new Set());
    const missing = [...paths].filter(
      (p) => !reference.includes(`\`${p}\``) && !p.startsWith('inputs[].'),
    );
    expect(missing).toEqual([]);
    for (const def of ['ValueSource', 'Match']) expect(reference).toContain(`### ${def}`);
  });

  it('keeps the hand-written part when renewing', () => {
    const renewed = renderConfigDocs(
      `# Title\n\nProse.\n\n${DOCS_BEGIN}\nold\n${DOCS_END}\n\nAfter.\n`,
    );
    expect(renewed.startsWith('# Title\n\nProse.\n\n')).toBe(true);
    expect(renewed).not.toContain('\nold\n');
    expect(renewed.endsWith(`${DOCS_END}\n\nAfter.\n`)).toBe(true);
    expect(() => renderConfigDocs('# no markers')).toThrow(/no generated part/);
  });

  it('documents the example configuration', () => {
    // The example must load without a secret (config check runs where the secret is not).
    expect(
      loadConfig(join(PACKAGE_ROOT, 'config/example.yaml'), {
        baseDir: PACKAGE_ROOT,
        env: {},
        skipSecret: true,
      }).config.rules.length,
    ).toBeGreaterThan(0);
  });
});
