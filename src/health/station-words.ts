/**
 * Plain words for the station screen: what a refused read means for the person holding
 * the scanner, and what to do, from the reason the mapper stored (src/mapping/mapper.ts writes
 * those reasons; the technical one stays on the screen in small type, and in `failures`). A reason
 * that names its rule (`rule <name>: …`) gets that rule named in the hint, so the line lead knows
 * which rule of the configuration refused it.
 */

export interface PlainWords {
  /** One short sentence, for a person 2 m away. */
  words: string;
  /** What to do next. */
  hint: string;
}

/** Plain words for a read that was not taken (`rejected`, `duplicate`, `noRead`), from its stored reason. */
export function plainWords(outcome: string, reason: string | null): PlainWords {
  const r = reason ?? '';
  if (outcome === 'duplicate')
    return { words: 'Already scanned a moment ago', hint: 'Counted once; nothing to do.' };
  if (outcome === 'noRead') {
    const again = /container (\S+) at \S+: (\S+) is open already \(([^)]*)\)/.exec(r);
    if (again)
      return {
        words: `${again[2]} is open already (${again[3]})`,
        hint: `The same ${again[1]}: nothing changed; go on with its items.`,
      };
    if (/closing code/.test(r))
      return {
        words: /, incomplete\)/.test(r) ? 'Container closed INCOMPLETE' : 'Container closed',
        hint: 'The next scans start a new container.',
      };
    if (/opens container/.test(r))
      return { words: 'Container opened', hint: 'The next scans are put into it.' };
    return {
      words: 'No barcode read',
      hint: 'Hold the scanner closer to the label and scan again.',
    };
  }
  const rule = /^rule ([^:]+): /.exec(r)?.[1];
  const ruleHint = rule ? ` (rule "${rule}")` : '';
  // The container's own words lead the reason (src/mapping/mapper.ts `shortMessage`).
  const short = /^(\S+) has (\d+ of \d+): finish it first \(container (\S+) at/.exec(r);
  if (short)
    return {
      words: `${short[1]} has ${short[2]}: finish it first`,
      hint: `Scan the rest of ${short[1]}'s items; the label just scanned was not taken. Only a supervisor closes a short ${short[3]}.`,
    };
  const required = /required attribute (\S+) has no value/.exec(r);
  if (required)
    return {
      words: `Data missing: ${required[1]}`,
      hint: `The read lacks ${required[1]}, which this station needs${ruleHint}; check the source (label or system) and send it again.`,
    };
  if (/not valid UTF-8|control byte|the read is empty/.test(r)) {
    return {
      words: 'Not a readable barcode',
      hint: 'Scan the label again; if it keeps failing, the scanner settings need a look.',
    };
  }
  if (/^invalid GS1 data/.test(r) || /check digit/i.test(r)) {
    return {
      words: 'The barcode data is wrong (e.g. a check digit)',
      hint: 'Check the label print and scan again; a damaged label goes to the line lead.',
    };
  }
  if (/no rule matched/.test(r))
    return {
      words: 'This code is not expected at this station',
      hint: 'Scan the item\u2019s own label; is it the right item for this station?',
    };
  if (/DCP .*not configured|not in the configuration/.test(r)) {
    return {
      words: 'This station is not set up in the gateway',
      hint: 'Tell the line lead: the gateway configuration lacks this station.',
    };
  }
  if (/time stamp|implausible|in the future|in the past/.test(r)) {
    return {
      words: 'The scanner\u2019s clock is wrong',
      hint: 'Tell the line lead: the scanner or PLC clock needs setting.',
    };
  }
  if (/product/i.test(r) && /unknown|not known|does not hold/i.test(r)) {
    return {
      words: 'The product of this item is not known upstream',
      hint: `Tell the line lead${ruleHint}: the product key needs creating or fixing.`,
    };
  }
  const needs = /needs an open container \(([^)]+)\)/.exec(r);
  if (needs) {
    // Named by the configuration: "module", or "module or tray" when several apply.
    const name = needs[1] === 'none applies to this input' ? 'container' : needs[1]!;
    const full = /: (\S+) is complete \((\d+ of \d+)\)/.exec(r);
    if (full)
      return {
        words: `${full[1]} is complete (${full[2]}): this item is one too many`,
        hint: `Scan the next ${name}\u2019s label first, then this item again${ruleHint}.`,
      };
    return {
      words: `No ${name} open: scan the ${name}\u2019s label first`,
      hint: `Scan the ${name}\u2019s label, then this item again${ruleHint}.`,
    };
  }
  if (/container/.test(r))
    return {
      words: 'The container could not be opened',
      hint: 'Close a container (closing code) and scan again.',
    };
  if (rule)
    return {
      words: 'The code does not fit what this station expects',
      hint: `Check the label against rule "${rule}" of the configuration; scan again.`,
    };
  return {
    words: 'Not taken',
    hint: 'Scan again; if it keeps failing, tell the line lead (the reason is in the gateway\u2019s failures list).',
  };
}
