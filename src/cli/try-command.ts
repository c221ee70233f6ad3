import type { Command } from 'commander';
import { describeResult, fromInputOf, toResult, type TryResult } from './try-result.js';
import { lengthLimit, unescapeRead } from './try-read.js';
import { didYouMean } from '../config/cross-check.js';
import { loadConfig } from '../config/load.js';
import { fieldSourceNotes } from '../config/field-sources.js';
import { inputKind, inputKinds } from '../inputs/registry.js';
import { inertOutput, printableDeep, printableRaw } from '../format/printable.js';
import type { Read } from '../inputs/types.js';
import { DuplicateWindow } from '../mapping/duplicate-window.js';
import { Mapper } from '../mapping/mapper.js';
import { payloadItems } from './try-payload.js';
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

export { describeResult, type TryResult } from './try-result.js';
export { unescapeRead } from './try-read.js';

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

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}
