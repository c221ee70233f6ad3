import { describe, expect, it } from 'vitest';
import { currentShift, readView, stationDelivery } from '../../src/health/station.js';
import { plainWords } from '../../src/health/station-words.js';
import type { GatewayStatus } from '../../src/health/status.js';

const SHIFTS = [
  { name: 'early', start: '06:00' },
  { name: 'late', start: '14:00' },
  { name: 'night', start: '22:00' },
];

describe('station screen: shifts, plain words, stalled', () => {
  it('finds the running shift in the site zone, the night one across midnight and a clock change', () => {
    // 15:30 in Berlin (UTC+1 in November): the late shift, since 14:00 local = 13:00Z.
    expect(currentShift(SHIFTS, Date.parse('2026-11-24T14:30:00Z'), 'Europe/Berlin')).toEqual({
      name: 'late',
      startsAt: '2026-11-24T13:00:00.000Z',
      endsAt: '2026-11-24T21:00:00.000Z',
    });
    // 02:00 local: the night shift that began yesterday at 22:00.
    expect(currentShift(SHIFTS, Date.parse('2026-11-25T01:00:00Z'), 'Europe/Berlin')).toEqual({
      name: 'night',
      startsAt: '2026-11-24T21:00:00.000Z',
      endsAt: '2026-11-25T05:00:00.000Z',
    });
    // The night of the autumn change (25 October 2026, 03:00 CEST → 02:00 CET): nine hours long.
    const night = currentShift(SHIFTS, Date.parse('2026-10-25T03:00:00Z'), 'Europe/Berlin');
    expect(night).toEqual({
      name: 'night',
      startsAt: '2026-10-24T20:00:00.000Z',
      endsAt: '2026-10-25T05:00:00.000Z',
    });
    // One shift a day: it runs from its start to the same time the next day.
    expect(
      currentShift([{ name: 'day', start: '00:00' }], Date.parse('2026-11-24T12:00:00Z'), 'UTC'),
    ).toEqual({
      name: 'day',
      startsAt: '2026-11-24T00:00:00.000Z',
      endsAt: '2026-11-25T00:00:00.000Z',
    });
  });

  it('says in plain words what a refusal means, naming the rule that refused it', () => {
    expect(
      plainWords('rejected', 'invalid GS1 data: check digit of AI 01 is 4, expected 3'),
    ).toMatchObject({ words: 'The barcode data is wrong (e.g. a check digit)' });
    expect(
      plainWords(
        'rejected',
        'the read holds the control byte 0x07 at position 3, which no barcode carries',
      ).words,
    ).toBe('Not a readable barcode');
    expect(
      plainWords('rejected', 'no rule matched the read from input a (rules tried: packs)').words,
    ).toBe('This code is not expected at this station');
    expect(plainWords('rejected', 'rule packs: reference: the code has no AI 21').hint).toMatch(
      /rule "packs"/,
    );
    expect(plainWords('duplicate', 'same reference at EOL-3 within 2000 ms').words).toBe(
      'Already scanned a moment ago',
    );
    expect(plainWords('rejected', 'something new').words).toBe('Not taken');
    const refused = readView({
      id: 7,
      station: 'EOL-3',
      inputId: 'a',
      receivedAt: '2026-11-24T08:00:00.000Z',
      outcome: 'rejected',
      reason: 'the read is empty',
      reference: null,
      raw: '<CR>',
      scanState: null,
      failureReason: null,
    });
    expect(refused).toMatchObject({
      verdict: 'refused',
      text: '<CR>',
      words: 'Not a readable barcode',
      reason: 'the read is empty',
    });
  });

  it('is stalled only while uploads fail and scans wait', () => {
    const status = (delivery: Record<string, unknown>, waiting: number) =>
      ({ delivery, buffer: { undeliveredScans: waiting } }) as unknown as GatewayStatus;
    expect(stationDelivery(status({ circuit: 'closed', consecutiveFailures: 0 }, 5))).toEqual({
      stalled: false,
      paused: false,
      waiting: 5,
    });
    expect(
      stationDelivery(
        status(
          {
            circuit: 'open',
            consecutiveFailures: 3,
            lastError: { at: '2026-11-24T08:00:00.000Z', message: 'x' },
          },
          5,
        ),
      ),
    ).toEqual({
      stalled: true,
      paused: false,
      waiting: 5,
      since: '2026-11-24T08:00:00.000Z',
    });
    expect(stationDelivery(status({ circuit: 'closed', consecutiveFailures: 1 }, 0)).stalled).toBe(
      false,
    );
    expect(stationDelivery(status({ circuit: 'closed', paused: true }, 2))).toEqual({
      stalled: false,
      paused: true,
      waiting: 2,
    });
  });
});
