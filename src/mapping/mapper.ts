import type { DcpConfig, GatewayConfig, InputConfig, TimeCheckConfig } from '../config/schema.js';
import type { Read } from '../inputs/types.js';
import type { Scan } from '@scan-gateway/contract';
import {
  ContainerSessions,
  MAX_OPEN_CONTAINERS,
  type ContainerChange,
  type OpenContainer,
} from './container-sessions.js';
import {
  joinContainers,
  missingContainer,
  openParents,
  passContainers,
  type MemberOf,
  type Opened,
} from './container-step.js';
import { parseBarcode } from '../gs1/index.js';
import type { MapOutcome } from './outcome.js';
import { productKeyUses, type ProductKeyUse } from './product-keys.js';
import { knownDcps, mapReadyScan, quoteKey } from './ready-scan.js';
import { readText, readView } from './read-text.js';
import {
  compileContainer,
  compileRule,
  DEFAULT_RULE_NAME,
  defaultRule,
  inScope,
  type CompiledContainer,
  type CompiledRule,
  type Groups,
} from './rules.js';
import { attributesOf, implausibleTime, optionalValue, readInstant } from './scan-fields.js';
import { formatWireTime } from '../format/time.js';
import type { LookupTables, ReadView } from './value-source.js';

export type { ProductKeyUse } from './product-keys.js';
export { shortMessage } from './container-step.js';

/** Distinct product keys remembered from mapped scans, for the product check; bounded memory. */
const MAX_SEEN_PRODUCT_KEYS = 1000;

/**
 * Turns reads into Scans by the configuration's rules: the compiled rules, lookup tables
 * and container sessions of one configuration. Built once per configuration; a reload builds a new
 * one and hands over the open containers ({@link Mapper.adoptSessions}).
 *
 * `map` is deterministic: the same configuration and the same reads in the same order give the same
 * outcomes. Its only state is the open containers, driven by the reads' receive times, and the
 * product list it was told about.
 *
 * Order of work for one read: decode (UTF-8, no-read texts, control bytes); GS1 parse (a code that
 * announces GS1 must be valid GS1, whatever the rules say); containers (a closing code is counted
 * and not sent; an opening code opens its container); the rules in order, the first whose `match`
 * holds and whose reference the read has maps it; then DCP, product, supplier/client, time stamp,
 * parents, attributes.
 */
export class Mapper {
  /** The site's IANA time zone, in which time stamps are written. */
  readonly timeZone: string;
  readonly dcps: ReadonlyMap<string, DcpConfig>;
  readonly inputs: ReadonlyMap<string, InputConfig>;
  private readonly rules: CompiledRule[];
  private readonly containers: CompiledContainer[];
  private readonly rulesByInput = new Map<string, CompiledRule[]>();
  private readonly containersByInput = new Map<string, CompiledContainer[]>();
  private readonly sessions: ContainerSessions;
  /**
   * Station names a source may give that are no DCP key: the keys of lookup tables that rules
   * translate the DCP through (`dcp: { sourceDcp: true, lookup: stations }`). Container sessions
   * are kept only for these and the DCPs, so reads naming ever new stations cannot grow them.
   */
  private readonly stations: ReadonlySet<string>;
  private readonly timeCheck: TimeCheckConfig;
  private readonly rejectUnknownProducts: boolean;
  private known: { keys: ReadonlySet<string>; fetchedAt: string } | undefined;
  private readonly seenProducts = new Set<string>();
  private readonly config: GatewayConfig;

  /** `options.maxOpenContainers`: the cap of open container sessions (default {@link MAX_OPEN_CONTAINERS}). */
  constructor(config: GatewayConfig, options: { maxOpenContainers?: number } = {}) {
    this.config = config;
    this.sessions = new ContainerSessions(options.maxOpenContainers ?? MAX_OPEN_CONTAINERS);
    this.timeZone = config.site.timezone;
    this.dcps = new Map(config.dcps.map((d) => [d.key, d]));
    this.inputs = new Map(config.inputs.map((i) => [i.id, i]));
    const stations = new Set<string>();
    for (const r of config.rules) {
      const lookup = typeof r.dcp === 'object' ? r.dcp.lookup : undefined;
      if (lookup !== undefined)
        for (const k of Object.keys(config.lookups[lookup] ?? {}))
          if (!this.dcps.has(k)) stations.add(k);
    }
    this.stations = stations;
    const lookups: LookupTables = config.lookups;
    this.rules = config.rules.map((r) => compileRule(r, lookups));
    this.containers = config.containers.map((c) => compileContainer(c, lookups));
    this.timeCheck = config.timeCheck;
    this.rejectUnknownProducts = config.productCheck.rejectUnknown;
  }

  /**
   * Maps one read. Never throws. The outcome carries the containers the read changed
   * (`changes`: opened, a member more, closed), which intake commits with it.
   */
  map(read: Read): MapOutcome {
    const outcome = this.mapOne(read);
    const changes = this.sessions.drain();
    if (changes.length > 0) outcome.changes = changes;
    return outcome;
  }

  private mapOne(read: Read): MapOutcome {
    const input = this.inputs.get(read.inputId);
    if (!input)
      return { outcome: 'rejected', reason: `input "${read.inputId}" is not in the configuration` };
    if (read.readyScan) return mapReadyScan(read.readyScan, read, this.dcps, this.timeZone);

    const decoded = readText(read, input.noReadStrings);
    if ('outcome' in decoded) return decoded.outcome;
    const { text } = decoded;

    // The read's own time resolves two-digit years, so a replayed read maps as it did the first time.
    const barcode = parseBarcode(text, { referenceDate: read.receivedAt });
    if (barcode.kind === 'invalid')
      return { outcome: 'rejected', reason: `invalid GS1 data: ${barcode.reason}`, barcode };
    const view = readView(read, text, barcode);

    // Containers: a closing code ends here; an opening code opens and (usually) goes on as a scan.
    const room = { sessions: this.sessions, dcps: this.dcps, stations: this.stations };
    const pass = passContainers(room, this.containersFor(input), input, read, view, barcode);
    if ('done' in pass) return pass.done;
    const { members, opened } = pass;

    const tried: string[] = [];
    for (const rule of this.rulesFor(input)) {
      tried.push(rule.name);
      const groups = rule.match.test(view);
      if (!groups) continue;
      const reference = rule.reference.evaluate(view, groups);
      if (!reference.ok && reference.absent) continue;
      if (!reference.ok)
        return {
          outcome: 'rejected',
          reason: `rule ${rule.name}: reference: ${reference.reason}`,
          barcode,
          tried,
        };
      return this.build({
        rule,
        view,
        groups,
        reference: reference.value,
        input,
        members,
        opened,
        tried,
      });
    }
    return {
      outcome: 'rejected',
      reason: `no rule matched the read from input ${input.id} (rules tried: ${tried.join(', ')})`,
      barcode,
      tried,
    };
  }

  private build(b: {
    rule: CompiledRule;
    view: ReadView;
    groups: Groups;
    reference: string;
    input: InputConfig;
    members: MemberOf[];
    opened: Opened | undefined;
    tried: string[];
  }): MapOutcome {
    const { rule, view, groups, input, tried } = b;
    const { read, barcode } = view;
    const reject = (reason: string): MapOutcome => ({
      outcome: 'rejected',
      reason,
      barcode,
      tried,
    });
    const named = rule.name === DEFAULT_RULE_NAME ? '' : `rule ${rule.name}: `;

    const dcpValue = optionalValue(rule.dcp, view, groups);
    if (dcpValue.error) return reject(`${named}DCP: ${dcpValue.error}`);
    const dcpKey = dcpValue.value ?? (read.dcpKey?.trim() || input.dcp);
    const dcp = this.dcps.get(dcpKey);
    if (!dcp)
      return reject(
        `${named}DCP ${quoteKey(dcpKey)} is not configured (known: ${knownDcps(this.dcps)})`,
      );

    const product = optionalValue(rule.productModelKey, view, groups);
    if (product.error) return reject(`${named}product model key: ${product.error}`);
    const productModelKey = product.value ?? dcp.productModelKey;
    if (productModelKey === undefined) {
      return reject(
        `${named}no product model key: DCP ${dcp.key} has none and ${rule.productModelKey ? `${rule.productModelKey.describe} gave none` : 'the rule sets none'}`,
      );
    }
    if (this.rejectUnknownProducts && this.known && !this.known.keys.has(productModelKey)) {
      return reject(
        `product model key "${productModelKey}" is not in the upstream product list (fetched ${this.known.fetchedAt}); productCheck.rejectUnknown is on`,
      );
    }

    const party: { supplierKey?: string; clientKey?: string } = {};
    if (dcp.kind === 'goodsIn' || dcp.kind === 'goodsOut') {
      const field = dcp.kind === 'goodsIn' ? 'supplierKey' : 'clientKey';
      const v = optionalValue(rule[field], view, groups);
      if (v.error) return reject(`${named}${field}: ${v.error}`);
      const value = v.value ?? dcp[field];
      if (value === undefined) return reject(`${named}no ${field} for ${dcp.kind} DCP ${dcp.key}`);
      party[field] = value;
    }

    const instant = readInstant(read, rule, this.timeZone);
    if (typeof instant === 'string') return reject(instant);
    const timeWarning = implausibleTime(instant, read.receivedAt, this.timeCheck);
    if (timeWarning && this.timeCheck.action === 'reject')
      return reject(`${timeWarning} (timeCheck.action: reject)`);

    const parents: string[] = [];
    const addParent = (p: unknown) => {
      if (typeof p === 'string' && p !== '' && !parents.includes(p)) parents.push(p);
    };
    for (const p of read.parents ?? []) addParent(p);
    for (const p of rule.parents) {
      const v = p.evaluate(view, groups);
      if (v.ok) addParent(v.value);
    }
    const atMs = read.receivedAt.getTime();
    const open = openParents(this.sessions, b.members, atMs);
    const required = rule.requireContainer;
    if (required !== undefined && !b.opened) {
      const station = read.dcpKey?.trim() || input.dcp;
      const missing = missingContainer(this.sessions, required, open, b.reference, station);
      if (missing) {
        const { which, full, message } = missing;
        return {
          ...reject(
            `${named}needs an open container (${which}) at ${missing.station}, and none is open: ${full ? `${message}; ` : ''}scan the container first, then this item again; this read is not sent`,
          ),
          code: full ? 'containerFull' : 'noContainer',
          message,
        } as MapOutcome;
      }
    }
    // Attributes before parents: a read refused for a missing required attribute fills no container.
    const notes: string[] = [];
    const attributes = attributesOf(rule, view, groups, dcp, notes);
    if (typeof attributes === 'string')
      return {
        ...reject(`${named}${attributes}`),
        code: 'requiredAttribute',
        message: attributes.replace(/: .*/, ''),
      } as MapOutcome;
    // Parents are taken only once the read is sure to be a scan, so a refused read fills no container.
    const member = joinContainers(this.sessions, open, b.reference, atMs, addParent);

    const scan: Scan = {
      reference: b.reference,
      timeStamp: formatWireTime(instant, this.timeZone),
      dcpKey: dcp.key,
      productModelKey,
      ...party,
      parents,
      attributes: [...attributes].map(([key, value]) => ({
        key,
        value,
      })),
    };
    if (this.seenProducts.size < MAX_SEEN_PRODUCT_KEYS) this.seenProducts.add(productModelKey);
    const container = b.opened
      ? { ...b.opened, action: 'opened' as const }
      : member
        ? { ...member, action: 'member' as const }
        : undefined;
    return {
      outcome: 'scan',
      scan,
      instant,
      barcode,
      rule: rule.name,
      tried,
      ...(timeWarning ? { timeWarning } : {}),
      ...(notes.length > 0 ? { notes } : {}),
      ...(container ? { container } : {}),
    };
  }

  /** Open container sessions held now, and opens refused at the cap (health, tests). */
  sessionCounts(): { open: number; max: number; refusedAtCap: number } {
    return {
      open: this.sessions.size,
      max: this.sessions.max,
      refusedAtCap: this.sessions.refusedAtCap,
    };
  }

  /** The duplicate window of a DCP, in ms (0 = off or unknown DCP). */
  duplicateWindowMs(dcpKey: string): number {
    return this.dcps.get(dcpKey)?.duplicateWindowMs ?? 0;
  }

  /** The open containers at `nowMs`: per station the open parent and since when (health page). */
  openContainers(nowMs: number): OpenContainer[] {
    return this.sessions.list(nowMs);
  }

  /** Takes over the open containers of the mapper this one replaces (configuration reload). */
  adoptSessions(previous: Mapper): void {
    this.sessions.adopt(previous.sessions, (name) => this.containerSettings(name));
    if (previous.known) this.known = previous.known;
  }

  /**
   * Restores the open containers the buffer kept (at start): those whose container still exists
   * with the same `per`. Answers how many.
   */
  restoreContainers(rows: readonly ContainerChange[]): number {
    return this.sessions.restore(rows, (name) => this.containerSettings(name));
  }

  /**
   * Closes (or abandons) the open container of a station by a supervisor's hand, recorded with
   * who and why. Answers the change, to be written to the buffer, or undefined when none is open.
   */
  closeContainer(
    container: string,
    station: string,
    atMs: number,
    by: { by: string; why: string; abandon?: boolean },
  ): ContainerChange | undefined {
    const change = this.sessions.close(container, station, atMs, by.why, {
      by: by.by,
      ...(by.abandon ? { abandon: true } : {}),
    });
    // Handed out here, not with the next read: the caller writes it at once.
    const pending = this.sessions.drain();
    this.sessions.requeue(pending.filter((c) => c !== change));
    return change;
  }

  private containerSettings(name: string): CompiledContainer | undefined {
    return this.containers.find((c) => c.name === name);
  }

  /**
   * Tells the mapper which product keys the upstream service has (the product check). Used only
   * when `productCheck.rejectUnknown` is on.
   */
  setKnownProducts(keys: ReadonlySet<string>, fetchedAt: Date): void {
    this.known = { keys, fetchedAt: fetchedAt.toISOString() };
  }

  /** Product keys the configuration can give a scan: DCPs, fixed rule values, lookup tables used for products. */
  productKeyUses(): ProductKeyUse[] {
    return productKeyUses(this.config);
  }

  /** Product keys of the scans mapped so far (at most 1000 distinct), including those taken from reads. */
  observedProductKeys(): string[] {
    return [...this.seenProducts];
  }

  private rulesFor(input: InputConfig): CompiledRule[] {
    let rules = this.rulesByInput.get(input.id);
    if (!rules) {
      rules = this.rules.filter((r) => inScope(r.scope, input.id, input.dcp));
      // An input that no rule applies to keeps the default mapping (the code as read).
      if (rules.length === 0) rules = [defaultRule()];
      this.rulesByInput.set(input.id, rules);
    }
    return rules;
  }

  private containersFor(input: InputConfig): CompiledContainer[] {
    let containers = this.containersByInput.get(input.id);
    if (!containers) {
      containers = this.containers.filter((c) => inScope(c.scope, input.id, input.dcp));
      this.containersByInput.set(input.id, containers);
    }
    return containers;
  }
}
