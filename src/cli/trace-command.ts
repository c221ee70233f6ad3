// The input kinds, before this command reads a configuration (its `inputs` are checked by them).
import '../inputs/registry.js';
import { originWords } from '../format/origin.js';
import type { Command } from 'commander';
import type { GenealogyNode, ItemScan, ItemTrace } from '../queries/items.js';
import { DEFAULT_GENEALOGY_DEPTH, MAX_GENEALOGY_DEPTH } from '../queries/items.js';
import { inertOutput, printableDeep } from '../format/printable.js';
import { fmtTime } from '../health/page-render.js';
import { SecretScrubber } from '../log.js';
import { CommandExit, ExitCodes } from './exit.js';
import { bestEffortScrubber } from './known-secrets.js';
import { fail, open, withBuffer, type BufferOptions, type OpsIo } from './ops-open.js';

/**
 * `scan-gateway trace <reference>`: what happened to one item, from the buffer opened
 * read-only, so it works beside the running daemon and on a stopped one (or on a backup with
 * `--buffer`). The item is found by any form of its GS1 label too (src/queries/item-lookup.ts).
 * Exit 0 when the item is in the buffer or items carrying the value are listed, 1 when not (the references starting
 * with it are listed), 2 for a usage or configuration error.
 */
export function registerTraceCommand(program: Command, io: OpsIo): void {
  withBuffer(
    program
      .command('trace')
      .description(
        'what happened to one item: its reads, scans, batches, upstream states or failures, and its parents and children',
      ),
  )
    .argument(
      '<reference>',
      'the item: its reference, or any form of its GS1 label (bracketed, raw element string with <GS>, Digital Link), or one AI value (serial, SSCC, lot, GTIN); when nothing matches, the references starting with it are listed',
    )
    .option(
      '-d, --depth <levels>',
      `levels of parents and children shown (1–${MAX_GENEALOGY_DEPTH})`,
      String(DEFAULT_GENEALOGY_DEPTH),
    )
    .addHelpText(
      'after',
      `\nExamples:\n  scan-gateway trace PK-000815 --config /etc/scan-gateway/config.yaml\n  scan-gateway trace PK-0008 --json        # no exact match: the references starting with PK-0008\n` +
        `  scan-gateway trace '(01)09521234543213(21)C2611030001234'    # the line under the barcode\n` +
        `  scan-gateway trace ']d2010952123454321310B2611-03<GS>21C2611030001234'\n` +
        `  scan-gateway trace C2611030001234        # a serial; an SSCC, a lot or a GTIN lists its items\n\n` +
        'Exit codes: 0 the item is in the buffer (or items carrying the value are listed), 1 it is not (or the buffer cannot be read), 2 usage or configuration error, 4 the file is no gateway buffer.\n',
    )
    .action(async (reference: string, opts: BufferOptions & { depth: string }) => {
      const depth = Number(opts.depth);
      if (!Number.isInteger(depth) || depth < 1 || depth > MAX_GENEALOGY_DEPTH)
        fail(
          io,
          'trace',
          `--depth must be a whole number from 1 to ${MAX_GENEALOGY_DEPTH}, got "${opts.depth}"`,
          ExitCodes.USAGE,
        );
      const { db, timezone, config } = open(io, opts, 'trace');
      // Raw reads and reasons may quote a secret that landed in an input: cut it out.
      const scrubber = config
        ? await bestEffortScrubber(config, io.env, io.cwd)
        : new SecretScrubber();
      let trace: ItemTrace;
      try {
        const dcpKinds = new Map((config?.dcps ?? []).map((d) => [d.key, d.kind as string]));
        trace = scrubber.scrubDeep(db.reports.trace(reference, { depth, dcpKinds }));
      } finally {
        db.close();
      }
      // Stored data comes from the lines and ingest clients: nothing of it may act on the terminal.
      io.stdout.write(
        inertOutput(
          opts.json ? `${JSON.stringify(trace)}\n` : formatTrace(printableDeep(trace), timezone),
        ),
      );
      throw new CommandExit(
        trace.found ||
          (trace.refusals?.length ?? 0) > 0 ||
          (trace.byValue ?? []).some((m) => m.items.length > 0)
          ? ExitCodes.OK
          : ExitCodes.FAILED,
      );
    });
}

/** The trace for people: one block per scan (latest first), then both trees. */
export function formatTrace(t: ItemTrace, timezone: string): string {
  const time = (iso: string | null | undefined) => fmtTime(iso, timezone);
  const head = gs1Lines(t, time);
  const refused = refusalLines(t, time);
  const boxes = containerLines(t, time);
  if (!t.found) {
    // Items listed by an AI's value, or its refused reads, answer the question: no "not in the
    // buffer" after them.
    const listed = (t.byValue ?? []).some((m) => m.items.length > 0);
    const lines = listed
      ? [...head]
      : refused.length > 0
        ? [...head, `${t.reference}: no scan of it in the buffer; its reads were refused:`]
        : [...head, `${t.reference}: not in the buffer (no scan of it, none naming it as parent).`];
    if (refused.length > 0) lines.push(...refused);
    lines.push(...boxes);
    lines.push(...prunedEarlyLines(t, time));
    if (t.matches.length > 0) {
      lines.push('', `References starting with ${t.reference}:`);
      for (const m of t.matches)
        lines.push(
          `  ${m.reference}  (${m.scans} scan${m.scans === 1 ? '' : 's'}, latest ${time(m.lastAt)})`,
        );
    }
    lines.push(
      '',
      `The buffer keeps scans for buffer.retentionDays; older items are only upstream. Times in ${timezone}.`,
    );
    return `${lines.join('\n')}\n`;
  }
  const total = t.scans.length + t.moreScans;
  const lines = [
    ...head,
    `${t.reference}: ${total} scan${total === 1 ? '' : 's'} in the buffer${t.moreScans > 0 ? ` (the latest ${t.scans.length} shown)` : ''}.`,
  ];
  lines.push(...prunedEarlyLines(t, time));
  lines.push(...boxes);
  if (refused.length > 0) lines.push('', 'Refused reads (not sent):', ...refused);
  for (const s of t.scans) lines.push('', ...scanLines(s, time));
  lines.push('', 'Parents:', ...treeLines(t.parents, t.parentsMore, time));
  lines.push('', 'Children:', ...treeLines(t.children, t.childrenMore, time));
  if (t.slow)
    lines.push(
      '',
      'This buffer predates the lookup indexes (an older gateway wrote it): children were found by a full scan.',
    );
  lines.push('', `Times in ${timezone}.`);
  return `${lines.join('\n')}\n`;
}

/** The item's refused reads: time, station, reason, the read and where it came from. */
function refusalLines(t: ItemTrace, time: (iso: string | null) => string): string[] {
  return (t.refusals ?? []).flatMap((r) => [
    `  ${time(r.at)} at ${r.station !== null ? `${r.station} (input ${r.inputId})` : `input ${r.inputId}`}: REFUSED: ${r.reason}`,
    `    read ${r.id}: ${r.raw}${r.origin ? `   (${originWords(r.origin)})` : ''}`,
  ]);
}

/** The containers the item was the label of: "MOD-1 (module at st20): incomplete, 3 of 12, new label MOD-2". */
function containerLines(t: ItemTrace, time: (iso: string | null) => string): string[] {
  return (t.containers ?? []).map((c) => {
    const fill =
      c.expected !== undefined ? `${c.members} of ${c.expected}` : `${c.members} members`;
    const how =
      c.state === 'open'
        ? `open since ${time(c.openedAt)}`
        : `${c.state.toUpperCase()} at ${time(c.closedAt ?? null)}${c.why ? ` (${c.why})` : ''}${c.by ? ` by ${c.by}` : ''}`;
    return `Container ${c.parent} (${c.container} at ${c.station}): ${fill}, ${how}.`;
  });
}

/** The early prunes that took scans of the item: when, why and what else they took. */
function prunedEarlyLines(t: ItemTrace, time: (iso: string | null) => string): string[] {
  return (t.prunedEarly ?? []).map(
    (p) =>
      `Scans of ${t.reference} were pruned early at ${time(p.at)}, before the end of the audit period, because ${p.reason}` +
      ` (${p.scans} delivered scan${p.scans === 1 ? '' : 's'} pruned then${p.firstReadAt && p.lastReadAt ? `, read between ${time(p.firstReadAt)} and ${time(p.lastReadAt)}` : ''}; the service still has them).`,
  );
}

/** How the query was read as GS1 data, and the items carrying its value: printed before the trace. */
function gs1Lines(t: ItemTrace, time: (iso: string | null) => string): string[] {
  const out: string[] = [];
  if (t.asked !== undefined) out.push(`${t.asked}: found as ${t.reference}`);
  if (t.canonical !== undefined)
    out.push(
      `canonical GS1 reference: ${t.canonical}${t.canonicalWhy ? ` (${t.canonicalWhy})` : ''}`,
    );
  if (t.sameItem && t.sameItem.length > 0)
    out.push(`the same item also under: ${t.sameItem.join(', ')}`);
  for (const m of t.byValue ?? []) {
    if (t.found && m.items.length === 1) continue;
    out.push(
      `${m.value} as AI ${m.ai} (${m.title}): ${m.scansAtLeast ? 'over ' : ''}${m.scans} scan${m.scans === 1 ? '' : 's'}, ${m.items.length} item${m.items.length === 1 ? '' : 's'} listed${m.next ? ` (more: GET /api/v1/items?value=${encodeURIComponent(m.value)}&cursor=${m.next})` : ''}`,
    );
    for (const i of m.items)
      out.push(
        `  ${i.reference}  (${i.scans} scan${i.scans === 1 ? '' : 's'}, latest ${time(i.lastAt)})`,
      );
  }
  if (out.length > 0) out.push('');
  return out;
}

function scanLines(s: ItemScan, time: (iso: string | null) => string): string[] {
  const out = [
    `Scan ${s.id} at DCP ${s.dcpKey}${s.kind ? ` (${s.kind})` : ''}, ${time(s.timeUtc)}: ${stateWords(s)}`,
  ];
  const who = [
    s.productModelKey ? `product ${s.productModelKey}` : '',
    s.supplierKey ? `supplier ${s.supplierKey}` : '',
    s.clientKey ? `client ${s.clientKey}` : '',
  ].filter(Boolean);
  if (who.length > 0) out.push(`  ${who.join(', ')}`);
  if (s.attributes.length > 0)
    out.push(`  attributes: ${s.attributes.map((a) => `${a.key}=${a.value}`).join(', ')}`);
  if (s.parents.length > 0) out.push(`  parents: ${s.parents.join(', ')}`);
  if (s.read) {
    out.push(
      `  read ${s.read.id} from input ${s.read.inputId} at ${time(s.read.receivedAt)}: ${s.read.raw}${s.read.origin ? `   (${originWords(s.read.origin)})` : ''}`,
    );
    if (s.read.note) out.push(`  note: ${s.read.note}`);
    if (s.read.leaderEpoch !== null && s.read.leaderEpoch !== undefined)
      out.push(
        `  taken under leader epoch ${s.read.leaderEpoch}${s.read.possibleDuplicate ? ' (possible duplicate: sent again by the broker after a takeover)' : ''}`,
      );
  }
  if (s.batch) {
    out.push(
      `  batch ${s.batch.id} (${s.batch.route}), ${s.batch.requestId ? `requestId ${s.batch.requestId}` : 'no requestId yet'}, ` +
        `${s.batch.upstreamState ? `service: ${s.batch.upstreamState}` : `batch ${s.batch.state}`}${s.batch.finishedAt ? ` at ${time(s.batch.finishedAt)}` : ''}`,
    );
    if (s.batch.sentAgain > 0)
      out.push(
        s.batch.finishedAt
          ? `  batch ${s.batch.id} was sent again after an upload's answer was lost; the service's status of it is known (${s.batch.upstreamState ?? s.batch.state}), so it is no longer a possible duplicate`
          : `  possible duplicate: batch ${s.batch.id} was sent again after an upload's answer was lost; the service may hold it twice until its status is known`,
      );
  }
  if (s.failureReason) out.push(`  reason: ${s.failureReason}`);
  if (s.replaces !== null) out.push(`  replay of scan ${s.replaces}`);
  if (s.replayedBy !== null) out.push(`  replayed: replaced by scan ${s.replayedBy}`);
  return out;
}

function stateWords(s: ItemScan): string {
  switch (s.state) {
    case 'pending':
      return 'waiting for a batch';
    case 'batched':
      return 'sent, the service has not finished its batch yet';
    case 'delivered':
      return 'delivered (the service processed it)';
    case 'failed':
      return s.replayedBy !== null
        ? 'refused by the service, replayed'
        : 'refused by the service (dead letter)';
    case 'held':
      return s.replayedBy !== null ? 'held, replayed' : 'held (never sent; see the reason)';
    default:
      return s.state;
  }
}

function treeLines(
  nodes: GenealogyNode[],
  more: number,
  time: (iso: string | null) => string,
  indent = '  ',
): string[] {
  if (nodes.length === 0 && more === 0) return indent === '  ' ? [`${indent}none`] : [];
  const out: string[] = [];
  nodes.forEach((n, i) => {
    const last = i === nodes.length - 1 && more === 0;
    const what =
      n.scans === 0
        ? 'not scanned here'
        : `${n.scans} scan${n.scans === 1 ? '' : 's'}, latest at ${n.lastDcp} ${n.lastState} ${time(n.lastAt)}`;
    out.push(
      `${indent}${last ? '└─' : '├─'} ${n.reference}  (${what})${n.cycle ? '  [cycle: shown above]' : ''}`,
    );
    out.push(...treeLines(n.nodes, n.more, time, `${indent}${last ? '   ' : '│  '}`));
  });
  if (more > 0) out.push(`${indent}└─ … ${more} more`);
  return out;
}
