/**
 * Why a read was not taken, as a short stable code: what a scanner's NAK can tell apart
 * (`nakBytesByReason` of serial and TCP inputs), and what an MQTT verdict message carries. The
 * intake gives each read its code (src/intake/verdict.ts); this list is the configuration's, so a
 * key of `nakBytesByReason` that names no code is refused when the file is checked.
 */
export const VERDICT_REASONS = [
  /** Nothing between the framing bytes (a bare terminator, STX right before ETX), or only white space. */
  'empty',
  /** Longer than `maxReadLength`. */
  'overlong',
  /** The framing failed: bytes outside STX…ETX, a read without its ETX, a read cut off, the other line end. */
  'framing',
  /** Not text a barcode holds: invalid UTF-8, a control byte. */
  'notText',
  /** A GS1 key with a wrong check digit. */
  'checkDigit',
  /** Other invalid GS1 data (an AI's value, a missing pair). */
  'invalidGs1',
  /** The scanner's no-read text. */
  'noRead',
  /** The same reference at the same DCP within its duplicate window. */
  'duplicate',
  /** The read needs an open container and none is open (or a closing code found none). */
  'noContainer',
  /** The container the read would join is complete (`members: N` reached). */
  'containerFull',
  /** A new container label or closing code while the open container is short (`onIncomplete: refuse`). */
  'containerShort',
  /** Too many containers open at the station. */
  'containerCap',
  /** A container refused the read for another reason (it could not be opened). */
  'container',
  /** A `required: true` attribute has no value. */
  'requiredAttribute',
  /** No rule matched the read. */
  'noRule',
  /** The read names a DCP (or comes from an input) that is not configured. */
  'unknownDcp',
  /** The product model key is missing or not in the upstream product list. */
  'unknownProduct',
  /** The read's time stamp is unreadable or implausible. */
  'time',
  /** The buffer did not take the read (quota, full disk, a failed commit, not the leader): kept and retried. */
  'notTaken',
  /** Refused by a rule for any other reason (its reference, DCP or attribute could not be made). */
  'refused',
] as const;

/** One code of {@link VERDICT_REASONS}. */
export type VerdictReason = (typeof VERDICT_REASONS)[number];

/**
 * `config check`'s notes on acknowledgements: a serial or TCP input that writes `ackBytes` with
 * `ackOn: commit` (the default for now) beeps "good" on a read the mapping refused, and the
 * default becomes `verdict` in a later release. Inputs named by id: `inputs[st20].ackOn`.
 */
export function ackOnNotes(config: {
  inputs: readonly { id: string; type: string; ackBytes?: string; ackOn?: string }[];
}): { severity: 'note'; where: string; message: string }[] {
  return config.inputs.flatMap((input) =>
    (input.type === 'serial' || input.type === 'tcp') &&
    input.ackBytes !== undefined &&
    input.ackOn === 'commit'
      ? [
          {
            severity: 'note' as const,
            where: `inputs[${input.id}].ackOn`,
            message:
              'warning: ackOn is commit (the default for now): the scanner gets ackBytes for every read stored, also one the mapping refused (no container open, a wrong check digit), so the operator hears "good"; set ackOn: verdict to answer nakBytes for those. The default becomes verdict in a later release.',
          },
        ]
      : [],
  );
}
