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
    if (/closing code/.test(r))
      return { words: 'Container closed', hint: 'The next scans start a new container.' };
    if (/opens container/.test(r))
      return { words: 'Container opened', hint: 'The next scans are put into it.' };
    return {
      words: 'No barcode read',
      hint: 'Hold the scanner closer to the label and scan again.',
    };
  }
  const rule = /^rule ([^:]+): /.exec(r)?.[1];
  const ruleHint = rule ? ` (rule "${rule}")` : '';
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
  if (/needs an open container/.test(r)) {
    return {
      words: 'No container open: scan the container first',
      hint: `Scan the container\u2019s label (e.g. the pack), then this item again${ruleHint}.`,
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
