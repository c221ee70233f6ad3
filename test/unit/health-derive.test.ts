import { describe, expect, it } from 'vitest';
import { catalogueEntry, HealthCodes } from '../../src/error-catalogue.js';
import { ErrorCodes } from '../../src/errors.js';
import { deriveHealth, HEALTH_THRESHOLDS, type HealthFacts } from '../../src/health/derive.js';

const AT = '2026-11-18T06:00:00.000Z';

/** A healthy gateway: every rule quiet. Each test changes one signal. */
function facts(over: { [K in keyof HealthFacts]?: Partial<HealthFacts[K]> } = {}): HealthFacts {
  const base: HealthFacts = {
    inputs: [{ id: 'gi-scanner', type: 'serial', state: 'up' }],
    delivery: {
      paused: false,
      circuit: 'closed',
      consecutiveFailures: 0,
      statusChecks: { consecutiveFailures: 0 },
    },
    buffer: { waitingScans: 0, oldestWaitingAgeMs: null, heldScans: 0, failedScans: 0 },
    recent: {
      reads: 100,
      rejections: 0,
      rejectionsByInput: [],
      failedScans: 0,
      filesRefused: [],
      filesRefusedCount: 0,
    },
    stuckBatches: [],
    config: {},
  };
  return {
    ...base,
    ...(over.inputs ? { inputs: over.inputs as HealthFacts['inputs'] } : {}),
    ...(over.stuckBatches
      ? { stuckBatches: over.stuckBatches as HealthFacts['stuckBatches'] }
      : {}),
    delivery: { ...base.delivery!, ...over.delivery },
    buffer: { ...base.buffer, ...over.buffer },
    recent: { ...base.recent, ...over.recent },
    config: { ...base.config, ...over.config },
    ...(over.products ? { products: over.products as HealthFacts['products'] } : {}),
  };
}

/** The one problem a rule gives (fails when there are none or several). */
function only(f: HealthFacts) {
  const h = deriveHealth(f);
  expect(h.problems, JSON.stringify(h.problems)).toHaveLength(1);
  return { state: h.state, ...h.problems[0]! };
}

describe('deriveHealth: one rule at a time', () => {
  it('healthy facts give ok and no problems', () => {
    expect(deriveHealth(facts())).toEqual({ state: 'ok', problems: [] });
  });

  it('every problem carries the hint of its code from the catalogue', () => {
    const p = only(facts({ buffer: { heldScans: 4 } }));
    expect(p.hint).toBe(catalogueEntry(HealthCodes.SCANS_HELD)!.whatToDo);
  });

  it('a failing buffer commit is down, with the message as detail only', () => {
    const p = only(
      facts({
        buffer: { commitError: { message: 'SQLITE_FULL: database or disk is full', at: AT } },
      }),
    );
    expect(p).toMatchObject({
      state: 'down',
      code: ErrorCodes.BUFFER,
      severity: 'down',
      detail: 'SQLITE_FULL: database or disk is full',
    });
    expect(p.sentence).not.toContain('SQLITE');
  });

  it('a delivery step failing on a full disk is down; on anything else degraded', () => {
    expect(
      only(facts({ delivery: { stepError: { message: 'SQLITE_FULL', at: AT, diskFull: true } } }))
        .state,
    ).toBe('down');
    expect(
      only(facts({ delivery: { stepError: { message: 'SQLITE_BUSY', at: AT, diskFull: false } } }))
        .state,
    ).toBe('degraded');
  });

  it('delivered scans pruned early under disk pressure are a warning, with when and the free-space mark', () => {
    const p = only(
      facts({
        buffer: {
          disk: {
            prunedEarlyScans: 1200,
            lastEarlyPrune: { at: AT, scans: 400 },
            lowFreeBytes: 12_582_912,
          },
        },
      }),
    );
    expect(p).toMatchObject({
      state: 'degraded',
      code: HealthCodes.AUDIT_PRUNED_EARLY,
      severity: 'degraded',
      since: AT,
    });
    expect(p.sentence).toContain(
      '1,200 delivered scans were pruned before the end of the audit period',
    );
    expect(p.hint).toContain('retentionDays');
    expect(
      deriveHealth(facts({ buffer: { disk: { prunedEarlyScans: 0, lowFreeBytes: 1 } } })).problems,
    ).toEqual([]);
  });

  it('audit lost early, as remembered in the buffer, is a warning with the count, the span and why', () => {
    const p = only(
      facts({
        buffer: {
          disk: {
            prunedEarlyScans: 0,
            lowFreeBytes: 12_582_912,
            auditLost: {
              scans: 456,
              firstReadAt: '2026-11-20T06:00:00.000Z',
              lastReadAt: '2026-11-20T14:00:00.000Z',
              at: AT,
              reason: 'the disk ran low: 10301440 bytes free, below the mark of 12582912',
            },
          },
        },
      }),
    );
    expect(p).toMatchObject({
      state: 'degraded',
      code: HealthCodes.AUDIT_PRUNED_EARLY,
      severity: 'degraded',
      since: AT,
      detail: 'the disk ran low: 10301440 bytes free, below the mark of 12582912',
    });
    expect(p.sentence).toContain(
      '456 delivered scans (read between 2026-11-20T06:00:00.000Z and 2026-11-20T14:00:00.000Z) were pruned',
    );
  });

  it('a low disk that pruning cannot help is a warning of its own, saying nothing was pruned', () => {
    const p = only(
      facts({
        buffer: {
          disk: {
            prunedEarlyScans: 0,
            lowFreeBytes: 12_582_912,
            pruneCannotHelp:
              'pruning cannot help: 2281472 bytes needed, at most 524288 recoverable from delivered scans older than 24 h; nothing was pruned',
          },
        },
      }),
    );
    expect(p).toMatchObject({
      state: 'degraded',
      code: HealthCodes.BUFFER_DISK_LOW,
      severity: 'degraded',
    });
    expect(p.sentence).toContain('nothing was pruned');
    expect(p.detail).toContain('2281472 bytes needed');
  });

  it('a full disk seen by back-pressure, the quota reached, and near it, degrade', () => {
    const quota = {
      level: 'ok' as const,
      usedRatio: 0.2,
      undeliveredScans: 20,
      maxPendingScans: 100,
    };
    expect(
      only(
        facts({ buffer: { quota: { ...quota, diskFull: { since: AT, message: 'SQLITE_FULL' } } } }),
      ),
    ).toMatchObject({ state: 'degraded', code: ErrorCodes.BUFFER, since: AT });
    const full = only(
      facts({
        buffer: { quota: { ...quota, level: 'full', usedRatio: 1, undeliveredScans: 100 } },
      }),
    );
    expect(full).toMatchObject({ state: 'degraded', code: HealthCodes.BUFFER_QUOTA });
    expect(full.sentence).toContain('quota reached (100 undelivered scans of 100 allowed)');
    expect(
      only(facts({ buffer: { quota: { ...quota, level: 'paused', usedRatio: 0.92 } } })).sentence,
    ).toContain('at 92 % of its quota');
    expect(deriveHealth(facts({ buffer: { quota } })).problems).toEqual([]);
  });

  it('an input down degrades, naming the input; its error text is the detail', () => {
    const p = only(
      facts({
        inputs: [
          {
            id: 'gi-scanner',
            type: 'serial',
            state: 'down',
            lastError: "ENOENT: no such file or directory, open '/dev/ttyUSB0'",
            lastErrorAt: AT,
          },
        ],
      }),
    );
    expect(p).toMatchObject({ state: 'degraded', code: ErrorCodes.INPUT });
    expect(p.since).toBeUndefined(); // the time of its latest error is no start
    expect(p.sentence).toBe('Input gi-scanner (serial) is not reading; it retries by itself.');
    expect(p.detail).toContain('ENOENT');
    // Paused (back-pressure) and connecting are not problems of their own.
    expect(
      deriveHealth(
        facts({
          inputs: [
            { id: 'a', type: 'files', state: 'paused' },
            { id: 'b', type: 'mqtt', state: 'connecting' },
          ],
        }),
      ).problems,
    ).toEqual([]);
  });

  it('a TCP server input with fewer readers than expectReaders degrades; without expectReaders waiting is no problem', () => {
    const tcp = (count: number, expected: number) =>
      facts({
        inputs: [
          {
            id: 'st10',
            type: 'tcp',
            state: count > 0 ? 'up' : 'waiting for reader',
            readers: { count, expected },
          },
        ],
      });
    const none = only(tcp(0, 1));
    expect(none).toMatchObject({ state: 'degraded', code: HealthCodes.INPUT_NO_READER });
    expect(none.sentence).toBe(
      "Input st10 (tcp) is waiting for its reader: none is connected, so its station's scans do not arrive.",
    );
    expect(only(tcp(1, 2)).sentence).toBe('Input st10 (tcp) has 1 of 2 readers connected.');
    expect(deriveHealth(tcp(0, 0)).problems).toEqual([]);
    expect(deriveHealth(tcp(2, 2)).problems).toEqual([]);
  });

  it('failing uploads degrade with the code of the failure, worded by its kind', () => {
    const open = (kind: string, code?: string) =>
      only(
        facts({
          delivery: {
            circuit: 'open',
            consecutiveFailures: 3,
            lastError: {
              message:
                'POST /oauth2/token failed: ECONNREFUSED connect ECONNREFUSED 127.0.0.1:8099',
              at: AT,
              kind,
              ...(code ? { code } : {}),
            },
          },
        }),
      );
    const token = open('token', ErrorCodes.UPSTREAM_NETWORK);
    expect(token).toMatchObject({ state: 'degraded', code: ErrorCodes.UPSTREAM_NETWORK });
    expect(token.sentence).toMatch(
      /^No access token from the auth server, so nothing is uploaded\. Scans wait safely/,
    );
    expect(token.sentence).not.toMatch(/ECONNREFUSED|Circuit/i);
    expect(token.detail).toContain('ECONNREFUSED');
    expect(open('token', ErrorCodes.UPSTREAM_TOKEN).code).toBe(ErrorCodes.UPSTREAM_TOKEN);
    expect(open('network').code).toBe(ErrorCodes.UPSTREAM_NETWORK);
    expect(open('network').sentence).toMatch(/^The upstream service cannot be reached/);
    expect(open('auth').code).toBe(ErrorCodes.UPSTREAM_AUTH);
    expect(open('answer').code).toBe(ErrorCodes.UPSTREAM_RESPONSE);
    expect(open('http').code).toBe(ErrorCodes.UPSTREAM_HTTP);
    expect(only(facts({ delivery: { circuit: 'half-open', consecutiveFailures: 4 } })).code).toBe(
      ErrorCodes.UPSTREAM_NETWORK,
    );
    // Fewer failures than open the circuit: retried quietly.
    expect(
      deriveHealth(
        facts({
          delivery: {
            consecutiveFailures: 2,
            lastError: { message: 'x', at: AT, kind: 'network' },
          },
        }),
      ).problems,
    ).toEqual([]);
  });

  it('a pause by an operator degrades', () => {
    expect(only(facts({ delivery: { paused: true } }))).toMatchObject({
      state: 'degraded',
      code: HealthCodes.DELIVERY_PAUSED,
      sentence: 'Delivery is paused by an operator: nothing is uploaded until it is resumed.',
    });
  });

  it('status checks degrade from 3 failures in a row', () => {
    const lastError = { message: 'HTTP 503', at: AT, code: ErrorCodes.UPSTREAM_HTTP };
    expect(
      deriveHealth(facts({ delivery: { statusChecks: { consecutiveFailures: 2, lastError } } }))
        .problems,
    ).toEqual([]);
    const p = only(facts({ delivery: { statusChecks: { consecutiveFailures: 3, lastError } } }));
    expect(p).toMatchObject({
      state: 'degraded',
      code: HealthCodes.STATUS_CHECKS_FAILING,
      detail: 'SCANGW_E_UPSTREAM_HTTP: HTTP 503',
    });
  });

  it('stuck batches degrade, naming batch and request id', () => {
    const p = only(
      facts({ stuckBatches: [{ id: 7, state: 'uploaded', requestId: '1723', createdAt: AT }] }),
    );
    expect(p).toMatchObject({ state: 'degraded', code: HealthCodes.BATCHES_STUCK, since: AT });
    expect(p.sentence).toBe(
      '1 batch is not finished 30 minutes after it was formed: 7 (request 1723).',
    );
  });

  it('delivery behind degrades only when no failure or pause explains it', () => {
    const late = { waitingScans: 12, oldestWaitingAgeMs: HEALTH_THRESHOLDS.oldestWaitingMs };
    expect(only(facts({ buffer: late }))).toMatchObject({
      code: HealthCodes.DELIVERY_BEHIND,
      sentence: 'Delivery is behind: the oldest of 12 waiting scans has waited 15 minutes.',
    });
    expect(
      deriveHealth(
        facts({ buffer: { ...late, oldestWaitingAgeMs: HEALTH_THRESHOLDS.oldestWaitingMs - 1 } }),
      ).problems,
    ).toEqual([]);
    expect(
      deriveHealth(facts({ buffer: late, delivery: { paused: true } })).problems.map((p) => p.code),
    ).toEqual([HealthCodes.DELIVERY_PAUSED]);
  });

  it('held scans degrade from the first', () => {
    const p = only(facts({ buffer: { heldScans: 1 } }));
    expect(p).toMatchObject({
      state: 'degraded',
      code: HealthCodes.SCANS_HELD,
      sentence:
        '1 scan is held: the service refused its batch, so it is not delivered until someone replays it.',
    });
    expect(only(facts({ buffer: { heldScans: 4 } })).sentence).toMatch(/^4 scans are held/);
  });

  it('scans refused by the service in the last hour degrade; older ones waiting for a replay are only noted', () => {
    expect(only(facts({ recent: { failedScans: 2 }, buffer: { failedScans: 5 } }))).toMatchObject({
      state: 'degraded',
      code: HealthCodes.SCANS_FAILED,
      sentence:
        'The service refused 2 scans in the last 60 minutes; they are kept and can be replayed once the cause is fixed.',
    });
    expect(only(facts({ buffer: { failedScans: 5 } }))).toMatchObject({
      state: 'ok',
      severity: 'info',
      code: HealthCodes.SCANS_FAILED,
    });
  });

  it('a file refused in the last hour degrades, naming the latest file; its reason is the detail', () => {
    const file = {
      inputId: 'goods-in-pc',
      file: 'export.csv',
      reason: 'the header has no column "barcode" (barcodeColumn)',
      at: AT,
    };
    const p = only(facts({ recent: { filesRefused: [file], filesRefusedCount: 1 } }));
    expect(p).toMatchObject({
      state: 'degraded',
      code: HealthCodes.FILES_REFUSED,
      detail: file.reason,
    });
    expect(p.sentence).toBe(
      '1 file was refused in the last 60 minutes and moved to failed/; the latest: export.csv from input goods-in-pc.',
    );
  });

  it('rejections degrade at 10 % of at least 20 reads; fewer are only noted', () => {
    const byInput = [{ inputId: 'gi-scanner', count: 2 }];
    const high = only(facts({ recent: { reads: 20, rejections: 2, rejectionsByInput: byInput } }));
    expect(high).toMatchObject({ state: 'degraded', code: HealthCodes.REJECTION_RATE });
    expect(high.sentence).toBe(
      '2 reads of 20 (10 %) could not be made into scans in the last 60 minutes (gi-scanner 2).',
    );
    expect(
      only(facts({ recent: { reads: 21, rejections: 2, rejectionsByInput: byInput } })).severity,
    ).toBe('info');
    // A quiet hour: 3 of 5 is no trend yet.
    expect(
      only(facts({ recent: { reads: 5, rejections: 3, rejectionsByInput: byInput } })).severity,
    ).toBe('info');
  });

  it('product keys missing upstream degrade, naming them', () => {
    expect(
      only(facts({ products: { state: 'missing', missing: [{ key: 'PACK-NOPE' }] } })),
    ).toMatchObject({
      state: 'degraded',
      code: HealthCodes.PRODUCTS_UNKNOWN,
      sentence:
        'Product keys not in the upstream product list: PACK-NOPE; the service will refuse their scans.',
    });
  });

  it('a refused reload degrades with its first problem as detail; a pending restart is only noted', () => {
    const p = only(
      facts({
        config: {
          lastReloadError: {
            message: 'configuration invalid:\n  c.yaml:4:3: rules.0: bad\n  c.yaml:9:1: x: bad',
            at: AT,
          },
        },
      }),
    );
    expect(p).toMatchObject({
      state: 'degraded',
      code: ErrorCodes.CONFIG,
      detail: 'configuration invalid: c.yaml:4:3: rules.0: bad (and 1 more)',
    });
    expect(only(facts({ config: { needsRestart: ['http.listen'] } }))).toMatchObject({
      state: 'ok',
      severity: 'info',
      code: HealthCodes.RESTART_NEEDED,
    });
  });

  it('the local listener: a certificate near or past its end degrades, a refused renewal degrades, tokens in clear text are noted', () => {
    const cert = { validTo: '2026-12-01T00:00:00.000Z', serialNumber: '1002' };
    const listener = (
      tls: NonNullable<HealthFacts['listener']>['tls'],
      tokensInClear: string[] = [],
    ) => ({ ...facts(), listener: { ...(tls ? { tls } : {}), tokensInClear } });
    expect(deriveHealth(listener({ daysLeft: 14, certificate: cert })).problems).toEqual([]);
    expect(only(listener({ daysLeft: 13, certificate: cert }))).toMatchObject({
      state: 'degraded',
      code: HealthCodes.LISTENER_CERT_ENDING,
      sentence:
        "The certificate of this gateway's page and ingest ends in 13 days: renew it before browsers, station screens and ingest clients refuse it.",
      detail: 'serial 1002, valid until 2026-12-01T00:00:00.000Z',
    });
    expect(only(listener({ daysLeft: 0, certificate: cert })).sentence).toMatch(
      /ends in less than a day/,
    );
    expect(only(listener({ daysLeft: -1, certificate: cert })).sentence).toMatch(
      /has ended: browsers, station screens and ingest clients refuse to connect/,
    );
    expect(
      only(
        listener({
          daysLeft: 90,
          certificate: cert,
          lastRefusal: { at: AT, message: 'http.tls.keyFile /k is not the key…' },
        }),
      ),
    ).toMatchObject({
      state: 'degraded',
      code: ErrorCodes.LISTENER_TLS,
      since: AT,
      detail: 'http.tls.keyFile /k is not the key…',
    });
    expect(only(listener(undefined, ['read token', 'ingest token of input mes']))).toMatchObject({
      state: 'ok',
      severity: 'info',
      code: HealthCodes.TOKENS_IN_CLEAR,
      sentence:
        'This page is reachable from the network over plain HTTP, so the read token and ingest token of input mes cross the network in clear text.',
    });
  });

  it('the state is the worst problem, and problems come worst first', () => {
    const h = deriveHealth(
      facts({
        config: { needsRestart: ['http.listen'] },
        delivery: { paused: true },
        buffer: { commitError: { message: 'EACCES', at: AT } },
      }),
    );
    expect(h.state).toBe('down');
    expect(h.problems.map((p) => p.severity)).toEqual(['down', 'degraded', 'info']);
  });

  it('thresholds can be given', () => {
    expect(
      deriveHealth(facts({ buffer: { heldScans: 4 } }), { ...HEALTH_THRESHOLDS, heldScans: 5 })
        .problems,
    ).toEqual([]);
  });
});

describe('deriveHealth: status events', () => {
  const events = (e: NonNullable<HealthFacts['statusEvents']>): HealthFacts => ({
    ...facts(),
    statusEvents: e,
  });

  it('says why events do not flow, with the code of the failure, and that polling covers', () => {
    for (const [code, words] of [
      [ErrorCodes.EVENTS_AUTH, 'refuse the gateway'],
      [ErrorCodes.EVENTS_TLS, 'certificate is not trusted'],
      [ErrorCodes.EVENTS_TOPIC, 'topic is missing'],
      [ErrorCodes.EVENTS_NETWORK, 'cannot be reached'],
    ] as const) {
      const p = only(
        events({
          state: 'down',
          since: AT,
          lag: 0,
          lastError: { code, message: 'library text', at: AT },
        }),
      );
      expect(p).toMatchObject({
        state: 'degraded',
        code,
        severity: 'degraded',
        since: AT,
        detail: 'library text',
      });
      expect(p.sentence).toContain(words);
      expect(p.sentence).toContain('polled at the normal pace');
      expect(p.hint).toBe(catalogueEntry(code)!.whatToDo);
    }
  });

  it('tells of a lagging consumer without degrading, and is quiet while events flow or the consumer connects', () => {
    expect(only(events({ state: 'lagging', since: AT, lag: 1234 }))).toMatchObject({
      state: 'ok',
      code: HealthCodes.EVENTS_LAGGING,
      severity: 'info',
    });
    expect(deriveHealth(events({ state: 'flowing', since: AT, lag: 0 })).problems).toEqual([]);
    expect(deriveHealth(events({ state: 'connecting', since: AT, lag: 0 })).problems).toEqual([]);
  });
});
