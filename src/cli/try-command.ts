import type { Command } from 'commander';
import { didYouMean } from '../config/cross-check.js';
import { loadConfig } from '../config/load.js';
import { fieldSourceNotes } from '../config/field-sources.js';
import type { InputConfig } from '../config/schema.js';
import { inputKind, inputKinds } from '../inputs/registry.js';
import { C0_NAMES, inertOutput, printableDeep, printableRaw } from '../format/printable.js';
import type { Read } from '../inputs/types.js';
import { DuplicateWindow } from '../mapping/duplicate-window.js';
import { canonicalReference, type BarcodeParse } from '../gs1/index.js';
import { Mapper } from '../mapping/mapper.js';
import { payloadItems } from './try-payload.js';
import type { MapOutcome } from '../mapping/outcome.js';
import { CommandExit, ExitCodes } from './exit.js';
import type { Clock } from '../clock.js';

/** The process edge `try` needs (main.ts provides it). */
export interface TryCommandIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  cwd: string;
  env: Record<string, string | undefined>;
  /** Clock for the reads' receive time when `--at` is not given. */
  now?: Clock;
}

/** What `try` found for one read; the `--json` output is an array of these. */
export interface TryResult {
  /** The read as given, control bytes shown as `failures` shows them: `<GS>`, `<CR>`, `\xHH` (not UTF-8). */
  read: string;
  outcome: MapOutcome['outcome'] | 'duplicate';
  reason?: string;
  /** A refusal's stable code (`containerShort`, `requiredAttribute`…), when it has one. */
  code?: string;
  rule?: string;
  tried?: string[];
  scan?: unknown;
  /** UTC instant of the scan's time stamp. */
  instant?: string;
  timeWarning?: string;
  /** Attributes of the rule not sent, each with why (their source had no value in this read). */
  notes?: string[];
  /** With `--payload`: what the input's own parsing gave the mapping besides the code (DCP, time, parents, attributes, origin). */
  fromInput?: {
    dcp?: string;
    time?: string;
    parents?: string[];
    attributes?: Record<string, string>;
    origin?: Record<string, string | number>;
  };
  container?: unknown;
  gs1?: {
    kind: BarcodeParse['kind'];
    symbology?: string;
    form?: string;
    elements?: { ai: string; title: string; value: string; date?: string; decimal?: string }[];
    reason?: string;
    /** The canonical GS1 reference (`{ gs1: canonical }`, src/gs1/canonical.ts) and which AIs made it. */
    canonical?: { reference: string; why: string };
  };
}

/** `<NUL>` … `<US>` as `failures` and the health page print them (printableRaw), and `<FNC1>` (= GS). */
const NAMED_BYTES = new Map<string, number>([
  ...C0_NAMES.map((n, i) => [n, i] as const),
  ['FNC1', 0x1d],
]);
const ESCAPE = new RegExp(`<(${[...NAMED_BYTES.keys()].join('|')})>|\\\\x([0-9A-Fa-f]{2})`, 'gi');

/**
 * Turns a read typed on a command line into the bytes a scanner sends: `<GS>`, `<CR>` and every
 * other C0 name (`<FNC1>` = GS) and `\xHH` become single bytes, so a raw read that `failures`
 * prints (`\xe9`, `<CR>`) pasted here reproduces it byte for byte, invalid UTF-8 included.
 * Everything else is taken as written, in UTF-8.
 */
export function unescapeRead(text: string): Buffer {
  const parts: Buffer[] = [];
  let last = 0;
  for (const m of text.matchAll(ESCAPE)) {
    parts.push(Buffer.from(text.slice(last, m.index), 'utf8'));
    parts.push(
      Buffer.from([
        m[1] !== undefined ? NAMED_BYTES.get(m[1].toUpperCase())! : parseInt(m[2]!, 16),
      ]),
    );
    last = m.index + m[0].length;
  }
  parts.push(Buffer.from(text.slice(last), 'utf8'));
  return Buffer.concat(parts);
}

interface TryOptions {
  config: string;
  input: string;
  dcp?: string;
  time?: string;
  field: string[];
  parent: string[];
  at?: string;
  json?: boolean;
  payload?: string;
  topic?: string;
}

/**
 * `scan-gateway try --config FILE --input ID 'READ'…`: what reads would become, without sending or
 * storing anything. Several reads are mapped in order, so container sessions and the duplicate
 * window show as they would at the line. Exit 0 when no read was rejected, 1 when one was, 2 on a
 * configuration or usage error.
 */
export function registerTryCommand(program: Command, io: TryCommandIo): void {
  program
    .command('try')
    .description(
      'show what reads become (the Scan, or the rejection and why), without sending or storing anything',
    )
    .argument(
      '[reads...]',
      'the read(s) as the scanner sends them; a byte as \\xHH or by name: <GS>, <CR>, <STX>, <FNC1>',
    )
    .requiredOption('-i, --input <id>', 'input the reads come from (its id in the configuration)')
    .option('-c, --config <file>', 'configuration file', '/etc/scan-gateway/config.yaml')
    .option(
      '--dcp <key>',
      'the DCP the source names (topic level, CSV column), as the input would pass it',
    )
    .option('--time <stamp>', "the source's time stamp, as the input would pass it")
    .option(
      '--field <name=value>',
      'a field the source supplies (MQTT JSON attribute, CSV column); repeatable',
      collect,
      [],
    )
    .option(
      '--parent <reference>',
      'a parent reference the source supplies; repeatable',
      collect,
      [],
    )
    .option('--at <iso>', 'when the gateway received the read (default: now)')
    .option(
      '--payload <message>',
      "a whole raw message, parsed by the input's own parsing: an MQTT payload, an HTTP ingest body, a dropped file's content, a framed serial/TCP read",
    )
    .option(
      '--topic <topic>',
      'with --payload on an mqtt input: the topic the message comes on (default: the first topic filter)',
    )
    .option('--json', 'print the results as JSON')
    .addHelpText(
      'after',
      "\nExamples:\n  scan-gateway try --config /etc/scan-gateway/config.yaml --input gi-scanner ']d2010952123454321310B2611-03<GS>21C2611030001234'\n" +
        "  scan-gateway try -c config.yaml -i line3-cameras --dcp EOL-3 --field cellVoltage=3.652 ']d1C24A0K3B0712345' --json\n" +
        '  scan-gateway try -c config.yaml -i eol-vision --topic plant/EOL-3/scans --payload \'{"code":"PK-000815","ts":"2026-11-27T10:00:00Z","voltage":3.652}\'\n\n' +
        'Exit codes: 0 no read rejected, 1 a read was rejected, 2 configuration or usage error.',
    )
    .action(async (reads: string[], opts: TryOptions) => {
      const loaded = loadConfig(opts.config, { baseDir: io.cwd, env: io.env, skipSecret: true });
      const mapper = new Mapper(loaded.config);
      const usage = (message: string): never => {
        io.stderr.write(`scan-gateway try: ${message}\n`);
        throw new CommandExit(ExitCodes.USAGE);
      };
      const input = loaded.config.inputs.find((i) => i.id === opts.input);
      if (!mapper.inputs.has(opts.input) || !input) {
        const ids = [...mapper.inputs.keys()];
        usage(
          `no input "${opts.input}" in ${opts.config}${didYouMean(opts.input, ids)}; inputs: ${ids.join(', ') || 'none'}`,
        );
      }
      const receivedAt =
        opts.at !== undefined ? new Date(opts.at) : new Date((io.now ?? Date.now)());
      if (Number.isNaN(receivedAt.getTime())) usage(`--at "${opts.at}" is not a time stamp`);
      const attributes: Record<string, string> = {};
      for (const f of opts.field) {
        const eq = f.indexOf('=');
        if (eq <= 0) usage(`--field "${f}" must be name=value`);
        attributes[f.slice(0, eq)] = f.slice(eq + 1);
      }
      const dedupe = new DuplicateWindow();
      let results: TryResult[];
      if (opts.payload !== undefined) {
        if (reads.length > 0) usage('give either reads or --payload, not both');
        const given =
          opts.field.length > 0 ||
          opts.dcp !== undefined ||
          opts.time !== undefined ||
          opts.parent.length > 0;
        if (given)
          usage(
            '--payload takes the DCP, time, parents and fields from the message as the input does: leave out --dcp, --time, --parent and --field',
          );
        const kind = inputKind(input!);
        if (opts.topic !== undefined && kind.payload.takesTopic !== true) {
          const onTopics = inputKinds().filter((k) => k.payload.takesTopic === true);
          usage(
            `--topic applies to an ${onTopics.map((k) => k.type).join(' or ')} input; ${input!.id} is ${input!.type}`,
          );
        }
        const unfit = kind.payload.usage?.(input!, { topic: opts.topic });
        if (unfit !== undefined) usage(unfit);
        // A JSON message is taken as written (JSON escapes its own control bytes as \u001d); a byte stream as a read is.
        const payload = kind.payload.isJson(input!)
          ? Buffer.from(opts.payload, 'utf8')
          : unescapeRead(opts.payload);
        const items = await payloadItems(input!, payload, { receivedAt, topic: opts.topic });
        // Nothing to show is said, not printed as an empty list (a file of blank lines, a CSV header alone).
        if (items.length === 0)
          usage(
            `input ${input!.id} makes no read of this payload${kind.payload.emptyHint?.(input!) ?? ''}`,
          );
        results = items.map((item) => {
          if (item.kind === 'rejection')
            return {
              read: printableRaw(item.rejection.raw),
              outcome: 'rejected' as const,
              reason: `the input refuses it: ${item.rejection.reason}`,
            };
          const read = item.read;
          const tooLong = lengthLimit(input!, read.raw.length);
          if (tooLong !== undefined)
            return { read: printableRaw(read.raw), outcome: 'rejected' as const, reason: tooLong };
          return {
            ...toResult(read.raw, mapper.map(read), mapper, dedupe),
            fromInput: fromInputOf(read),
          };
        });
      } else {
        if (reads.length === 0) usage('give the read(s) to try, or --payload with a whole message');
        results = reads.map((given) => {
          const raw = unescapeRead(given);
          const tooLong = lengthLimit(input!, raw.length);
          if (tooLong !== undefined)
            return { read: printableRaw(raw), outcome: 'rejected' as const, reason: tooLong };
          const read: Read = {
            inputId: opts.input,
            raw,
            receivedAt,
            ...(opts.time !== undefined ? { sourceTime: opts.time } : {}),
            ...(opts.dcp !== undefined ? { dcpKey: opts.dcp } : {}),
            ...(opts.parent.length > 0 ? { parents: opts.parent } : {}),
            ...(opts.field.length > 0 ? { attributes } : {}),
          };
          return toResult(raw, mapper.map(read), mapper, dedupe);
        });
      }
      // What no read can change: a rule's field this input never supplies.
      const notes = fieldSourceNotes(loaded.config, input!.id)
        .map((n) => `note: ${n.where}: ${n.message}\n`)
        .join('');
      if (opts.json) io.stderr.write(notes);
      else io.stdout.write(notes === '' ? '' : `${notes}\n`);
      // What the payload holds is shown, never passed to the terminal as control sequences; the
      // scan keeps its strings (its JSON escapes them), the rest is made printable.
      io.stdout.write(
        inertOutput(
          opts.json
            ? `${JSON.stringify(results, null, 2)}\n`
            : results
                .map((r) =>
                  describeResult({ ...printableDeep(r), ...('scan' in r ? { scan: r.scan } : {}) }),
                )
                .join('\n'),
        ),
      );
      throw new CommandExit(
        results.some((r) => r.outcome === 'rejected') ? ExitCodes.FAILED : ExitCodes.OK,
      );
    });
}

/** What the input's parsing handed the mapping besides the code. */
function fromInputOf(read: Read): NonNullable<TryResult['fromInput']> {
  return {
    ...(read.dcpKey !== undefined ? { dcp: read.dcpKey } : {}),
    ...(read.sourceTime !== undefined ? { time: read.sourceTime } : {}),
    ...(read.parents ? { parents: read.parents } : {}),
    ...(read.attributes ? { attributes: read.attributes } : {}),
    ...(read.origin ? { origin: read.origin } : {}),
  };
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/**
 * What the input itself refuses before any mapping: a serial/TCP read over `maxReadLength`, an
 * MQTT payload over `maxPayloadBytes` (the input stores it as a rejection).
 */
function lengthLimit(input: InputConfig, bytes: number): string | undefined {
  if (
    'maxReadLength' in input &&
    typeof input.maxReadLength === 'number' &&
    bytes > input.maxReadLength
  ) {
    return `read longer than ${input.maxReadLength} bytes (maxReadLength of input ${input.id}): the input stores it as a rejection`;
  }
  if (
    'maxPayloadBytes' in input &&
    typeof input.maxPayloadBytes === 'number' &&
    bytes > input.maxPayloadBytes
  ) {
    return `payload larger than ${input.maxPayloadBytes} bytes (maxPayloadBytes of input ${input.id}): the input stores it as a rejection`;
  }
  return undefined;
}

function toResult(
  raw: Buffer,
  outcome: MapOutcome,
  mapper: Mapper,
  dedupe: DuplicateWindow,
): TryResult {
  const barcode =
    outcome.outcome === 'noRead' || outcome.outcome === 'rejected' || outcome.outcome === 'scan'
      ? outcome.barcode
      : undefined;
  const result: TryResult = {
    read: printableRaw(raw),
    outcome: outcome.outcome,
    ...(barcode ? { gs1: gs1Of(barcode) } : {}),
  };
  if (outcome.outcome === 'rejected')
    return {
      ...result,
      reason: outcome.reason,
      ...(outcome.code ? { code: outcome.code } : {}),
      ...(outcome.tried ? { tried: outcome.tried } : {}),
    };
  if (outcome.outcome === 'noRead')
    return {
      ...result,
      ...(outcome.reason ? { reason: outcome.reason } : {}),
      ...(outcome.container ? { container: outcome.container } : {}),
    };
  const { scan, instant } = outcome;
  const windowMs = mapper.duplicateWindowMs(scan.dcpKey);
  const more = {
    ...(outcome.rule ? { rule: outcome.rule } : {}),
    ...(outcome.tried ? { tried: outcome.tried } : {}),
    scan,
    instant: instant.toISOString(),
    ...(outcome.timeWarning ? { timeWarning: outcome.timeWarning } : {}),
    ...(outcome.notes ? { notes: outcome.notes } : {}),
    ...(outcome.container ? { container: outcome.container } : {}),
  };
  if (dedupe.check(scan.dcpKey, scan.reference, instant.getTime(), windowMs)) {
    return {
      ...result,
      ...more,
      outcome: 'duplicate',
      reason: `same reference at ${scan.dcpKey} within ${windowMs} ms: counted, not sent again`,
    };
  }
  return { ...result, ...more };
}

function gs1Of(b: BarcodeParse): NonNullable<TryResult['gs1']> {
  const symbology = b.symbology ? `${b.symbology.name} (${b.symbology.identifier})` : undefined;
  const base = { kind: b.kind, ...(symbology ? { symbology } : {}) };
  if (b.kind === 'plain') return base;
  const elements = b.elements.map((e) => ({
    ai: e.ai,
    title: e.title,
    value: e.value,
    ...(e.date ? { date: e.date } : {}),
    ...(e.decimal ? { decimal: e.decimal } : {}),
  }));
  const canonical = b.kind === 'gs1' ? canonicalReference(b.elements) : undefined;
  return {
    ...base,
    form: b.form,
    elements,
    ...(b.kind === 'invalid' ? { reason: b.reason } : {}),
    ...(canonical ? { canonical: { reference: canonical.uri, why: canonical.why } } : {}),
  };
}

/** The result for a person: the read, the GS1 data found, then the scan or why not. */
export function describeResult(r: TryResult): string {
  const lines = [`read: ${r.read}`];
  if (r.gs1) {
    const what =
      r.gs1.kind === 'plain'
        ? 'not GS1 (a plain code)'
        : r.gs1.kind === 'gs1'
          ? `GS1 ${r.gs1.form}`
          : `invalid GS1 ${r.gs1.form}`;
    lines.push(`  code: ${r.gs1.symbology ? `${r.gs1.symbology}, ` : ''}${what}`);
    for (const e of r.gs1.elements ?? []) {
      lines.push(
        `    (${e.ai}) ${e.title}: ${e.value}${e.date ? ` = ${e.date}` : ''}${e.decimal ? ` = ${e.decimal}` : ''}`,
      );
    }
    if (r.gs1.reason) lines.push(`    problem: ${r.gs1.reason}`);
    if (r.gs1.canonical)
      lines.push(
        `  canonical GS1 reference: ${r.gs1.canonical.reference}`,
        `    ${r.gs1.canonical.why}`,
      );
  }
  if (r.fromInput) {
    const f = r.fromInput;
    const parts = [
      f.dcp !== undefined ? `DCP ${f.dcp}` : '',
      f.time !== undefined ? `time ${f.time}` : '',
      f.parents ? `parents ${f.parents.join(', ')}` : '',
      f.attributes
        ? `fields ${Object.entries(f.attributes)
            .map(([k, v]) => `${k}=${v}`)
            .join(', ')}`
        : 'no fields',
    ].filter(Boolean);
    lines.push(
      `  from the input: ${parts.join('; ')}${
        f.origin
          ? `   (${Object.entries(f.origin)
              .map(([k, v]) => `${k} ${v}`)
              .join(', ')})`
          : ''
      }`,
    );
  }
  if (r.tried)
    lines.push(`  rules tried: ${r.tried.join(', ')}${r.rule ? `; mapped by: ${r.rule}` : ''}`);
  if (r.container) lines.push(`  container: ${JSON.stringify(r.container)}`);
  switch (r.outcome) {
    case 'scan':
      lines.push(`  → scan, as it would be sent (time stamp in the site zone; UTC ${r.instant}):`);
      lines.push(
        ...compactJson(r.scan)
          .split('\n')
          .map((l) => `    ${l}`),
      );
      if (r.timeWarning) lines.push(`  warning: ${r.timeWarning}`);
      for (const n of r.notes ?? []) lines.push(`  note: ${n}`);
      break;
    case 'duplicate':
      lines.push(`  → duplicate: ${r.reason}`);
      break;
    case 'noRead':
      lines.push(`  → not sent: ${r.reason ?? 'the scanner could not read a code (no-read text)'}`);
      break;
    case 'rejected':
      lines.push(`  → rejected: ${r.reason}`);
      break;
  }
  return `${lines.join('\n')}\n`;
}

/** JSON with two-space indent, but each attribute `{ "key": …, "value": … }` on one line. */
function compactJson(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(
    /\{\n\s+"key": (".*?"),\n\s+"value": (".*?")\n\s+\}/g,
    '{ "key": $1, "value": $2 }',
  );
}
