import type { ContainerConfig, MatchConfig, RuleConfig } from '../config/schema.js';
import { compileTimeFormat, type TimeFormat } from '../format/time-format.js';
import {
  compileValue,
  type CompiledValue,
  type LookupTables,
  type ReadView,
} from './value-source.js';
import { ErrorCodes, GatewayError } from '../errors.js';

/** Named groups a regex captured; `{}` when the match has no regex. */
export type Groups = Readonly<Record<string, string | undefined>>;

/** A compiled `match`: answers the captured groups when the read matches, else undefined. */
export interface CompiledMatch {
  test(view: ReadView): Groups | undefined;
}

const NO_GROUPS: Groups = Object.freeze({});

/** Compiles a `match` (rules-schema.ts): every condition given must hold; none given matches all. */
export function compileMatch(config: MatchConfig): CompiledMatch {
  const regex = config.regex !== undefined ? new RegExp(config.regex, 'u') : undefined;
  const mustBeGs1 = config.gs1 === true || config.ais !== undefined;
  const mustBePlain = config.gs1 === false;
  const ais = config.ais ?? [];
  return {
    test(view) {
      if (mustBeGs1 && view.barcode.kind !== 'gs1') return undefined;
      if (mustBePlain && view.barcode.kind !== 'plain') return undefined;
      for (const ai of ais) if (!view.elements.has(ai)) return undefined;
      if (!regex) return NO_GROUPS;
      const m = regex.exec(view.data);
      return m ? (m.groups ?? NO_GROUPS) : undefined;
    },
  };
}

/** Where a rule applies: its `inputs` and `dcps` (either suffices); neither = everywhere. */
export interface Scope {
  inputs?: readonly string[] | undefined;
  dcps?: readonly string[] | undefined;
}

/** True when an item with this scope applies to the input `inputId` whose configured DCP is `inputDcp`. */
export function inScope(scope: Scope, inputId: string, inputDcp: string): boolean {
  if (scope.inputs === undefined && scope.dcps === undefined) return true;
  return (scope.inputs?.includes(inputId) ?? false) || (scope.dcps?.includes(inputDcp) ?? false);
}

/** A rule ready to run. */
export interface CompiledRule {
  name: string;
  scope: Scope;
  match: CompiledMatch;
  reference: CompiledValue;
  dcp?: CompiledValue;
  productModelKey?: CompiledValue;
  supplierKey?: CompiledValue;
  clientKey?: CompiledValue;
  attributes: ReadonlyArray<readonly [string, CompiledValue]>;
  /** true = every field the source supplied; false = none; a set = these fields. */
  sourceAttributes: boolean | ReadonlySet<string>;
  /** Fields used for Scan fields other than attributes: never also sent as attributes. */
  consumedFields: ReadonlySet<string>;
  parents: readonly CompiledValue[];
  /** A read this rule maps needs an open container: `true` any that applies, a name that one. */
  requireContainer?: true | string;
  timeFormat?: TimeFormat;
}

/** Compiles a rule of the (validated) configuration. */
export function compileRule(config: RuleConfig, lookups: LookupTables): CompiledRule {
  const value = (v: RuleConfig['dcp']) => (v === undefined ? undefined : compileValue(v, lookups));
  const single = {
    dcp: value(config.dcp),
    productModelKey: value(config.productModelKey),
    supplierKey: value(config.supplierKey),
    clientKey: value(config.clientKey),
  };
  const parents = config.parents.map((p) => compileValue(p, lookups));
  const consumedFields = new Set<string>();
  for (const v of [...Object.values(single), ...parents])
    if (v?.field !== undefined) consumedFields.add(v.field);
  const rule: CompiledRule = {
    name: config.name,
    scope: { inputs: config.inputs, dcps: config.dcps },
    match: compileMatch(config.match),
    reference: compileValue(config.reference, lookups),
    attributes: Object.entries(config.attributes).map(
      ([k, v]) => [k, compileValue(v, lookups)] as const,
    ),
    sourceAttributes:
      typeof config.sourceAttributes === 'boolean'
        ? config.sourceAttributes
        : new Set(config.sourceAttributes),
    consumedFields,
    parents,
    ...(single.dcp ? { dcp: single.dcp } : {}),
    ...(single.productModelKey ? { productModelKey: single.productModelKey } : {}),
    ...(single.supplierKey ? { supplierKey: single.supplierKey } : {}),
    ...(single.clientKey ? { clientKey: single.clientKey } : {}),
    ...(config.requireContainer !== undefined ? { requireContainer: config.requireContainer } : {}),
  };
  if (config.timeFormat !== undefined) {
    const format = compileTimeFormat(config.timeFormat);
    // Validated by the schema; a string here would be a bug, not a configuration mistake.
    if (typeof format === 'string')
      throw new GatewayError(ErrorCodes.INTERNAL, `rule ${config.name}: ${format}`);
    rule.timeFormat = format;
  }
  return rule;
}

/** The mapping of an input without rules: the code as read, the source's or input's DCP, the DCP's keys. */
export const DEFAULT_RULE_NAME = '(default)';

/** The rule of an input that no configured rule applies to (the mapping of the first version). */
export function defaultRule(): CompiledRule {
  return {
    name: DEFAULT_RULE_NAME,
    scope: {},
    match: { test: () => NO_GROUPS },
    reference: compileValue({ code: 'whole' }, {}),
    attributes: [],
    sourceAttributes: true,
    consumedFields: new Set(),
    parents: [],
  };
}

/** A container (`containers` of the configuration) ready to run. */
export interface CompiledContainer {
  name: string;
  scope: Scope;
  per: 'input' | 'dcp';
  open: CompiledMatch;
  reference: CompiledValue;
  close?: CompiledMatch;
  idleTimeoutMs: number;
  sendParent: boolean;
  /** Members after which the container closes; undefined = no limit. */
  closeAfter?: number;
  /** Exactly this many members: it closes by itself at the last; fewer is incomplete. */
  members?: number;
  /** What a new label (or a closing code) does while a container of `members` is short. */
  onIncomplete: 'refuse' | 'close';
}

/** Compiles a container of the (validated) configuration. */
export function compileContainer(
  config: ContainerConfig,
  lookups: LookupTables,
): CompiledContainer {
  return {
    name: config.name,
    scope: { inputs: config.inputs, dcps: config.dcps },
    per: config.per,
    open: compileMatch(config.open),
    reference: compileValue(config.reference, lookups),
    ...(config.close ? { close: compileMatch(config.close) } : {}),
    idleTimeoutMs: config.idleTimeoutMs,
    sendParent: config.sendParent,
    ...(config.closeAfter !== undefined ? { closeAfter: config.closeAfter } : {}),
    ...(config.members !== undefined ? { members: config.members } : {}),
    onIncomplete: config.onIncomplete,
  };
}
