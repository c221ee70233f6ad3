import type { DcpConfig, GatewayConfig, InputConfig, TimeCheckConfig } from '../config/schema.js';
import type { Read } from '../inputs/types.js';
import type { Scan } from '@scan-gateway/contract';
import {
  ContainerSessions,
  fillWords,
  MAX_OPEN_CONTAINERS,
  type ContainerChange,
  type OpenContainer,
  type SessionView,
} from './container-sessions.js';
import {
  parseBarcode,
  stripSymbologyIdentifier,
  type BarcodeParse,
  type Gs1Element,
} from '../gs1/index.js';
import type { MapOutcome } from './outcome.js';
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
import { formatWireTime, parseSourceTime } from '../format/time.js';
import type { CompiledValue, LookupTables, ReadView } from './value-source.js';

/** A product model key the configuration can give a scan, and where it is written. */
export interface ProductKeyUse {
  key: string;
  /** Places in the configuration, e.g. `dcps GI-01`, `rule gs1-cells`, `lookups.gtinToProduct`. */
  where: string[];
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** C0 control characters other than GS (0x1D, the FNC1 separator), RS (0x1E) and EOT (0x04) of ISO/IEC 15434. */
// eslint-disable-next-line no-control-regex -- the control bytes no barcode carries are what this finds
const FORBIDDEN_CONTROL = /[\u0000-\u0003\u0005-\u001c\u001f\u007f]/;

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
   * A ready Scan from a file of Scans (contract §2.5) is sent as written: no rules, but its DCP
   * must be configured here, its time stamp must be a real wall time at the site, and it is either
   * Goods In (`supplierKey`) or Goods Out (`clientKey`), never both (contract §1, §2.5): the service
   * fails such a scan, so it is refused here, where the operator sees it at once.
   */
  private mapReadyScan(given: Scan, read: Read): MapOutcome {
    const barcode = parseBarcode(given.reference, { referenceDate: read.receivedAt });
    if (!this.dcps.has(given.dcpKey)) {
      return {
        outcome: 'rejected',
        reason: `ready Scan names DCP ${quoteKey(given.dcpKey)}, which is not configured (known: ${this.knownDcps()})`,
        barcode,
      };
    }
    const instant = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$/.test(given.timeStamp)
      ? parseSourceTime(given.timeStamp, this.timeZone)
      : undefined;
    if (!instant)
      return {
        outcome: 'rejected',
        reason: `ready Scan time stamp "${given.timeStamp}" is not yyyy-MM-ddTHH:mm:ss (contract §2.5)`,
        barcode,
      };
    if (given.supplierKey !== undefined && given.clientKey !== undefined) {
      return {
        outcome: 'rejected',
        reason:
          'ready Scan carries both supplierKey (Goods In) and clientKey (Goods Out); a scan is one or the other (contract §1)',
        barcode,
      };
    }
    // Fields in the contract's order, so the body sent is the same whichever order the file used.
    const scan: Scan = {
      reference: given.reference,
      timeStamp: given.timeStamp,
      dcpKey: given.dcpKey,
      productModelKey: given.productModelKey,
      ...(given.supplierKey !== undefined ? { supplierKey: given.supplierKey } : {}),
      ...(given.clientKey !== undefined ? { clientKey: given.clientKey } : {}),
      parents: given.parents,
      attributes: given.attributes,
    };
    return { outcome: 'scan', scan, instant, barcode };
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
    if (read.readyScan) return this.mapReadyScan(read.readyScan, read);

    let text: string;
    try {
      text = utf8.decode(read.raw);
    } catch {
      return {
        outcome: 'rejected',
        reason: `the read is not valid UTF-8 text (${read.raw.length} bytes, kept as raw bytes)`,
      };
    }
    if (text.trim() === '') return { outcome: 'rejected', reason: 'the read is empty' };
    if (input.noReadStrings.includes(text.trim())) return { outcome: 'noRead' };
    const control = FORBIDDEN_CONTROL.exec(text);
    if (control) {
      const code = control[0].charCodeAt(0).toString(16).padStart(2, '0');
      return {
        outcome: 'rejected',
        reason: `the read holds the control byte 0x${code} at position ${control.index}, which no barcode carries`,
      };
    }

    // The read's own time resolves two-digit years, so a replayed read maps as it did the first time.
    const barcode = parseBarcode(text, { referenceDate: read.receivedAt });
    if (barcode.kind === 'invalid')
      return { outcome: 'rejected', reason: `invalid GS1 data: ${barcode.reason}`, barcode };
    const view = readView(read, text, barcode);
    const atMs = read.receivedAt.getTime();

    // Containers: a closing code ends here; an opening code opens and (usually) goes on as a scan.
    const members: { container: CompiledContainer; station: string }[] = [];
    let opened: { name: string; parent: string } | undefined;
    for (const c of this.containersFor(input)) {
      const station = c.per === 'input' ? input.id : read.dcpKey?.trim() || input.dcp;
      // A session is kept per station: only a configured DCP (or a station a rule's DCP lookup
      // knows) may be one, or reads naming ever new DCPs would open sessions without end.
      // Such a read takes no part in containers; the rules then refuse its DCP with the reason.
      if (c.per === 'dcp' && !this.dcps.has(station) && !this.stations.has(station)) continue;
      if (c.close?.test(view)) {
        const open = this.sessions.get(c.name, station, atMs);
        if (open && this.refusesShort(c, open))
          return this.refuseShort(c, station, open, 'closing code', barcode);
        const closed = this.sessions.close(c.name, station, atMs, 'closing code');
        const parent = closed?.parent;
        return {
          outcome: 'noRead',
          reason:
            closed !== undefined
              ? `closing code of container ${c.name} at ${station}: closes ${closed.parent}${closed.expected !== undefined ? ` (${fillWords(closed.members, closed.expected)}${closed.state === 'incomplete' ? ', incomplete' : ''})` : ''}`
              : `closing code of container ${c.name} at ${station}: none was open`,
          barcode,
          container: {
            name: c.name,
            action: 'closed',
            ...(parent !== undefined ? { parent } : {}),
          },
        };
      }
      const groups = c.open.test(view);
      const parent = groups ? c.reference.evaluate(view, groups) : undefined;
      if (parent?.ok) {
        const open = this.sessions.get(c.name, station, atMs);
        // The open container's own label again: the same container, its count unchanged.
        if (open?.parent === parent.value) {
          return {
            outcome: 'noRead',
            reason: `container ${c.name} at ${station}: ${parent.value} is open already (${fillWords(open.reads, open.expected)}); scanned again, nothing changes`,
            barcode,
            container: { name: c.name, action: 'rescanned', parent: parent.value },
          };
        }
        if (open && this.refusesShort(c, open))
          return this.refuseShort(c, station, open, `the label ${parent.value}`, barcode);
        const opening = this.sessions.open(
          c.name,
          c.per,
          station,
          parent.value,
          atMs,
          c.idleTimeoutMs,
          c.members,
        );
        if (!opening.opened)
          return {
            outcome: 'rejected',
            code: 'containerCap',
            reason: `opens container ${c.name} at ${station}, refused: ${opening.reason}`,
            barcode,
          };
        if (!c.sendParent) {
          return {
            outcome: 'noRead',
            reason: `opens container ${c.name} at ${station} with parent ${parent.value}${c.members !== undefined ? ` (0 of ${c.members})` : ''} (sendParent: false)`,
            barcode,
            container: { name: c.name, action: 'opened', parent: parent.value },
          };
        }
        opened = { name: c.name, parent: parent.value };
      } else {
        members.push({ container: c, station });
      }
    }

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
    members: { container: CompiledContainer; station: string }[];
    opened: { name: string; parent: string } | undefined;
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
        `${named}DCP ${quoteKey(dcpKey)} is not configured (known: ${this.knownDcps()})`,
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

    let instant = read.receivedAt;
    if (read.sourceTime !== undefined && read.sourceTime.trim() !== '') {
      const parsed =
        rule.timeFormat?.parse(read.sourceTime, this.timeZone) ??
        parseSourceTime(read.sourceTime, this.timeZone);
      if (!parsed) {
        return reject(
          rule.timeFormat
            ? `time stamp "${read.sourceTime}" fits neither the format "${rule.timeFormat.pattern}" of rule ${rule.name} nor ISO 8601`
            : `time stamp "${read.sourceTime}" is not ISO 8601 (expected e.g. 2026-11-18T06:58:12+01:00)`,
        );
      }
      instant = parsed;
    }
    const timeWarning = this.implausibleTime(instant, read.receivedAt);
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
    let member: { name: string; parent: string; closed?: string } | undefined;
    const atMs = read.receivedAt.getTime();
    const open = b.members.map(({ container, station }) => ({
      container,
      station,
      parent: this.sessions.parentAt(container.name, station, atMs),
    }));
    const required = rule.requireContainer;
    if (required !== undefined && !b.opened) {
      const wanted = open.filter((m) => required === true || m.container.name === required);
      if (!wanted.some((m) => m.parent !== undefined && m.parent !== b.reference)) {
        const which =
          required === true
            ? wanted.map((m) => m.container.name).join(' or ') || 'none applies to this input'
            : required;
        const station = wanted[0]?.station ?? (read.dcpKey?.trim() || input.dcp);
        // Right after a container filled up, say so: the item is one too many for it.
        const full = wanted
          .map((m) => this.sessions.closedLast(m.container.name, m.station))
          .find((c) => c?.state === 'complete');
        const message = full
          ? `${full.parent} is complete (${fillWords(full.members, full.expected)}): scan the next ${full.container}'s label first`
          : `no ${which} open: scan the ${which}'s label first`;
        return {
          ...reject(
            `${named}needs an open container (${which}) at ${station}, and none is open: ${full ? `${message}; ` : ''}scan the container first, then this item again; this read is not sent`,
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
    for (const { container, station, parent } of open) {
      if (parent === undefined || parent === b.reference) continue;
      addParent(parent);
      const reads = this.sessions.touch(container.name, station, atMs, b.reference);
      const limit = container.members ?? container.closeAfter;
      const full = limit !== undefined && reads >= limit;
      // The Nth member closes it: the next member read needs a new container.
      const why =
        container.members !== undefined
          ? `${reads} of ${container.members}: complete`
          : `closeAfter ${container.closeAfter} reached`;
      if (full) this.sessions.close(container.name, station, atMs, why);
      member ??= {
        name: container.name,
        parent,
        ...(full ? { closed: why } : {}),
      };
    }

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

  /** Whether a container short of its `members` refuses what would close it (`onIncomplete: refuse`). */
  private refusesShort(c: CompiledContainer, open: SessionView): boolean {
    return c.members !== undefined && c.onIncomplete === 'refuse' && open.reads < c.members;
  }

  /**
   * The refusal of a label (or closing code) while the open container is short: the open one
   * stays. The reason starts with the words for the operator ("MOD-1 has 3 of 12: finish it
   * first"), which the station screen shows.
   */
  private refuseShort(
    c: CompiledContainer,
    station: string,
    open: SessionView,
    what: string,
    barcode: BarcodeParse,
  ): MapOutcome {
    const message = shortMessage(open);
    return {
      outcome: 'rejected',
      code: 'containerShort',
      message,
      reason: `${message} (container ${c.name} at ${station}, onIncomplete: refuse): ${what} is not taken; the open container stays, a supervisor may close it short`,
      barcode,
    };
  }

  private implausibleTime(instant: Date, receivedAt: Date): string | undefined {
    const drift = instant.getTime() - receivedAt.getTime();
    if (drift > this.timeCheck.maxAheadMs)
      return `time stamp is ${describeDuration(drift)} after the read was received`;
    if (-drift > this.timeCheck.maxBehindMs)
      return `time stamp is ${describeDuration(-drift)} before the read was received`;
    return undefined;
  }

  /** The configured DCP keys for a reason, at most 20 of them (a reason is stored with every refused read). */
  private knownDcps(): string {
    const keys = [...this.dcps.keys()];
    return keys.length <= 20
      ? keys.join(', ')
      : `${keys.slice(0, 20).join(', ')} and ${keys.length - 20} more`;
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
    const uses = new Map<string, Set<string>>();
    const add = (key: string, where: string) => {
      let w = uses.get(key);
      if (!w) uses.set(key, (w = new Set()));
      w.add(where);
    };
    for (const d of this.config.dcps)
      if (d.productModelKey !== undefined) add(d.productModelKey, `dcps ${d.key}`);
    for (const r of this.config.rules) {
      const p = r.productModelKey;
      if (p === undefined) continue;
      if (typeof p === 'string') add(p, `rule ${r.name}`);
      else {
        if (p.value !== undefined) add(p.value, `rule ${r.name}`);
        if (p.default !== undefined) add(p.default, `rule ${r.name} (default)`);
        if (p.lookup !== undefined)
          for (const v of Object.values(this.config.lookups[p.lookup] ?? {}))
            add(v, `lookups.${p.lookup}`);
      }
    }
    return [...uses]
      .map(([key, where]) => ({ key, where: [...where] }))
      .sort((a, b) => a.key.localeCompare(b.key));
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

/** What the operator reads when a short container refuses a new label: `MOD-1 has 3 of 12: finish it first`. */
export function shortMessage(open: {
  parent: string;
  reads: number;
  expected?: number | undefined;
}): string {
  return `${open.parent} has ${fillWords(open.reads, open.expected)}: finish it first`;
}

/** A key taken from a read, quoted for a reason and cut at 64 characters (the read itself is kept whole). */
function quoteKey(key: string): string {
  return JSON.stringify(key.length > 64 ? `${key.slice(0, 64)}…` : key);
}

function readView(read: Read, text: string, barcode: BarcodeParse): ReadView {
  const elements = new Map<string, Gs1Element>();
  if (barcode.kind === 'gs1')
    for (const e of barcode.elements) if (!elements.has(e.ai)) elements.set(e.ai, e);
  const data = barcode.kind === 'plain' ? barcode.data : stripSymbologyIdentifier(text).data;
  return { read, text, data, barcode, elements };
}

/** A rule's optional value: its text, nothing (the rule does not set it or the source is empty), or why not. */
function optionalValue(
  value: CompiledValue | undefined,
  view: ReadView,
  groups: Groups,
): { value?: string; error?: string } {
  if (!value) return {};
  const v = value.evaluate(view, groups);
  if (v.ok) return { value: v.value };
  return v.absent ? {} : { error: v.reason };
}

/**
 * Attributes in order: the DCP's fixed ones, the source's, the rule's; a later one replaces an
 * earlier one of the same key. A rule's attribute whose source gave no value is not sent, and
 * `notes` says so (`attribute voltage: field voltage has no value in this read`), so a dropped
 * attribute is never silent; one marked `optional` is left out without a note, and one marked
 * `required` refuses the read: the answer is then the reason (a string).
 */
function attributesOf(
  rule: CompiledRule,
  view: ReadView,
  groups: Groups,
  dcp: DcpConfig,
  notes: string[],
): Map<string, string> | string {
  const out = new Map<string, string>(Object.entries(dcp.attributes));
  const source = view.read.attributes ?? {};
  if (rule.sourceAttributes !== false) {
    for (const [key, value] of Object.entries(source)) {
      if (rule.consumedFields.has(key)) continue;
      if (rule.sourceAttributes !== true && !rule.sourceAttributes.has(key)) continue;
      if (value === undefined || value === null) continue;
      out.set(key, typeof value === 'string' ? value : String(value));
    }
  }
  for (const [key, value] of rule.attributes) {
    const v = value.evaluate(view, groups);
    if (v.ok) out.set(key, v.value);
    else if (value.required)
      return `required attribute ${key} has no value: ${v.reason}; this read is not sent`;
    else if (!(value.optional && v.absent)) notes.push(`attribute ${key} not sent: ${v.reason}`);
  }
  return out;
}

function describeDuration(ms: number): string {
  if (ms >= 2 * 86_400_000) return `${Math.round(ms / 86_400_000)} days`;
  if (ms >= 2 * 3_600_000) return `${Math.round(ms / 3_600_000)} hours`;
  if (ms >= 120_000) return `${Math.round(ms / 60_000)} minutes`;
  return `${Math.round(ms / 1000)} s`;
}
