import { catalogueEntry, HealthCodes } from '../error-catalogue.js';
import { ErrorCodes } from '../errors.js';
import {
  HEALTH_THRESHOLDS,
  type DerivedHealth,
  type HealthFacts,
  type HealthProblem,
  type HealthThresholds,
  type Severity,
} from './health-facts.js';
import { count, EVENTS_WHY, firstProblem, uploadCode, uploadSentence } from './health-words.js';

/**
 * The gateway's health from every signal, in one pure function ({@link deriveHealth}): the app
 * gathers the facts (src/app.ts `gatherStatus`), src/health/compose-status.ts hands them here, this decides the state and words each problem. The rules, their
 * thresholds and codes are tabled in docs/operations.md ("Health rules"); a unit test covers each.
 * The shapes it reads and returns are in health-facts.ts, the words it builds sentences from in
 * health-words.ts; the shapes (and `firstProblem`) are re-exported here, so callers import this
 * file alone.
 */

export type {
  DerivedHealth,
  HealthFacts,
  HealthProblem,
  HealthThresholds,
  Severity,
} from './health-facts.js';
export { HEALTH_THRESHOLDS } from './health-facts.js';
export { firstProblem } from './health-words.js';

const RANK: Record<Severity, number> = { down: 0, degraded: 1, info: 2 };

/**
 * The state and the problems, from the facts. Pure: same facts, same answer; no clock, no I/O.
 * The state is the worst severity among the problems (`ok` when none is worse than `info`).
 */
export function deriveHealth(
  facts: HealthFacts,
  thresholds: HealthThresholds = HEALTH_THRESHOLDS,
): DerivedHealth {
  const problems: HealthProblem[] = [];
  const add = (
    code: string,
    severity: Severity,
    sentence: string,
    extra: { since?: string | undefined; detail?: string | undefined } = {},
  ) => {
    problems.push({
      code,
      severity,
      sentence,
      hint: catalogueEntry(code)?.whatToDo ?? 'see docs/errors.md',
      ...(extra.since ? { since: extra.since } : {}),
      ...(extra.detail ? { detail: extra.detail } : {}),
    });
  };
  const { buffer, recent, delivery } = facts;
  const windowText = `in the last ${Math.round(thresholds.windowMs / 60_000)} minutes`;

  // The buffer: without it, reads cannot be taken at all.
  if (buffer.commitError) {
    add(
      ErrorCodes.BUFFER,
      'down',
      'Reads cannot be stored: writing to the buffer fails, so nothing new is taken in.',
      { detail: buffer.commitError.message },
    );
  }
  if (delivery?.stepError) {
    add(
      ErrorCodes.BUFFER,
      delivery.stepError.diskFull ? 'down' : 'degraded',
      delivery.stepError.diskFull
        ? 'The disk of the buffer is full: delivery cannot record its progress and stops.'
        : 'Delivery cannot work on the buffer; it retries every second.',
      { detail: delivery.stepError.message },
    );
  }
  const quota = buffer.quota;
  if (quota?.diskFull) {
    add(
      ErrorCodes.BUFFER,
      'degraded',
      'The disk of the buffer is full: inputs are paused and nothing new is acknowledged until there is room.',
      { since: quota.diskFull.since, detail: quota.diskFull.message },
    );
  }
  const disk = buffer.disk;
  // Audit lost before its period ended is a warning for as long as that period lasts: the page of
  // an audit trail gone must not say OK.
  const lost = disk?.auditLost;
  if (lost && lost.scans > 0) {
    const span =
      lost.firstReadAt && lost.lastReadAt
        ? ` (read between ${lost.firstReadAt} and ${lost.lastReadAt})`
        : '';
    add(
      HealthCodes.AUDIT_PRUNED_EARLY,
      'degraded',
      `The disk of the buffer ran low: ${count(lost.scans, 'delivered scan')}${span} ${lost.scans === 1 ? 'was' : 'were'} pruned before the end of the audit period to keep room for undelivered data.`,
      { since: lost.at, detail: lost.reason },
    );
  } else if (disk && disk.prunedEarlyScans > 0) {
    add(
      HealthCodes.AUDIT_PRUNED_EARLY,
      'degraded',
      `The disk of the buffer ran low: ${count(disk.prunedEarlyScans, 'delivered scan')} ${disk.prunedEarlyScans === 1 ? 'was' : 'were'} pruned before the end of the audit period to keep room for undelivered data.`,
      { since: disk.lastEarlyPrune?.at, detail: `free space mark ${disk.lowFreeBytes} bytes` },
    );
  }
  if (disk?.pruneCannotHelp) {
    add(
      HealthCodes.BUFFER_DISK_LOW,
      'degraded',
      'The disk of the buffer is low and pruning the delivered scans would not free enough: nothing was pruned, and the disk fills on.',
      { detail: disk.pruneCannotHelp },
    );
  }
  if (quota?.level === 'full') {
    add(
      HealthCodes.BUFFER_QUOTA,
      'degraded',
      `Buffer quota reached (${count(quota.undeliveredScans, 'undelivered scan')} of ${quota.maxPendingScans.toLocaleString('en-US')} allowed): new scans are refused until delivery drains it.`,
    );
  } else if (quota?.level === 'paused') {
    add(
      HealthCodes.BUFFER_QUOTA,
      'degraded',
      `The buffer is at ${Math.round(quota.usedRatio * 100)} % of its quota: inputs that can wait are paused until delivery drains it.`,
    );
  }

  for (const input of facts.inputs) {
    const readers = input.readers;
    if (input.state !== 'down' && readers && readers.count < readers.expected) {
      add(
        HealthCodes.INPUT_NO_READER,
        'degraded',
        readers.count === 0
          ? `Input ${input.id} (${input.type}) is waiting for its reader: none is connected, so its station's scans do not arrive.`
          : `Input ${input.id} (${input.type}) has ${readers.count} of ${readers.expected} readers connected.`,
      );
    }
    if (input.state !== 'down') continue;
    add(
      ErrorCodes.INPUT,
      'degraded',
      `Input ${input.id} (${input.type}) is not reading; it retries by itself.`,
      { detail: input.lastError },
    );
  }

  // Delivery.
  const uploadsFailing = delivery !== undefined && delivery.circuit !== 'closed';
  if (uploadsFailing) {
    add(uploadCode(delivery.lastError), 'degraded', uploadSentence(delivery.lastError?.kind), {
      // When the outage began, not the latest failed retry.
      since: delivery.failingSince,
      detail: delivery.lastError
        ? `${delivery.lastError.message} (${delivery.consecutiveFailures} failures in a row)`
        : undefined,
    });
  }
  if (delivery?.paused)
    add(
      HealthCodes.DELIVERY_PAUSED,
      'degraded',
      'Delivery is paused by an operator: nothing is uploaded until it is resumed.',
    );
  const checks = delivery?.statusChecks;
  if (checks && checks.consecutiveFailures >= thresholds.statusCheckFailures) {
    add(
      HealthCodes.STATUS_CHECKS_FAILING,
      'degraded',
      `The service cannot be asked whether sent batches succeeded (${checks.consecutiveFailures} failures in a row); it is asked again by itself.`,
      {
        detail: checks.lastError
          ? `${checks.lastError.code ? `${checks.lastError.code}: ` : ''}${checks.lastError.message}`
          : undefined,
      },
    );
  }
  if (facts.stuckBatches.length > 0) {
    const oldest = facts.stuckBatches.reduce((a, b) => (a.createdAt <= b.createdAt ? a : b));
    const ids = facts.stuckBatches
      .slice(0, 5)
      .map((b) => `${b.id}${b.requestId ? ` (request ${b.requestId})` : ''}`);
    add(
      HealthCodes.BATCHES_STUCK,
      'degraded',
      `${count(facts.stuckBatches.length, 'batch is', 'batches are')} not finished ${Math.round(thresholds.stuckBatchMs / 60_000)} minutes after it was formed: ${ids.join(', ')}${facts.stuckBatches.length > 5 ? ', …' : ''}.`,
      { since: oldest.createdAt },
    );
  }
  const pastGrace = facts.batchesPastGrace;
  if (pastGrace && pastGrace.batches.length > 0) {
    const ids = pastGrace.batches
      .slice(0, 5)
      .map((b) => `${b.id}${b.requestId ? ` (request ${b.requestId})` : ''}`);
    add(
      HealthCodes.BATCH_STATUS_OVERDUE,
      'degraded',
      `The service has not confirmed ${count(pastGrace.batches.length, 'sent batch', 'sent batches')} ${Math.round(pastGrace.graceMs / 1000)} s after upload: ${ids.join(', ')}${pastGrace.batches.length > 5 ? ', …' : ''}. The gateway asks again and sends a batch the service does not know once more.`,
      { since: pastGrace.batches[0]!.uploadedAt },
    );
  }
  const oldest = buffer.oldestWaitingAgeMs;
  // An open circuit or a pause already says why scans wait; this rule is for slowness without failures.
  if (
    !uploadsFailing &&
    !delivery?.paused &&
    oldest !== null &&
    oldest >= thresholds.oldestWaitingMs
  ) {
    add(
      HealthCodes.DELIVERY_BEHIND,
      'degraded',
      `Delivery is behind: the oldest of ${count(buffer.waitingScans, 'waiting scan')} has waited ${Math.round(oldest / 60_000)} minutes.`,
    );
  }

  // Status events: polling covers for them, but someone should know why they do not flow.
  const events = facts.statusEvents;
  if (events?.state === 'down') {
    const code =
      events.lastError && catalogueEntry(events.lastError.code)
        ? events.lastError.code
        : ErrorCodes.EVENTS_NETWORK;
    add(
      code,
      'degraded',
      `Status events cannot be read: ${EVENTS_WHY[code] ?? EVENTS_WHY[ErrorCodes.EVENTS_NETWORK]}. Batch outcomes are polled at the normal pace meanwhile.`,
      {
        since: events.since,
        detail: events.lastError?.message,
      },
    );
  } else if (events?.state === 'lagging') {
    add(
      HealthCodes.EVENTS_LAGGING,
      'info',
      `Status events are behind (${count(events.lag, 'event')} not read yet, or no read of the topic lately); batch outcomes are polled at the normal pace until they catch up.`,
      { since: events.since },
    );
  }

  // What did not get through.
  if (buffer.heldScans >= thresholds.heldScans) {
    const one = buffer.heldScans === 1;
    add(
      HealthCodes.SCANS_HELD,
      'degraded',
      `${count(buffer.heldScans, 'scan is', 'scans are')} held: the service refused ${one ? 'its batch, so it is' : 'their batches, so they are'} not delivered until someone replays ${one ? 'it' : 'them'}.`,
    );
  }
  if (recent.failedScans >= thresholds.failedScans) {
    add(
      HealthCodes.SCANS_FAILED,
      'degraded',
      `The service refused ${count(recent.failedScans, 'scan')} ${windowText}; they are kept and can be replayed once the cause is fixed.`,
    );
  } else if (buffer.failedScans > 0) {
    add(
      HealthCodes.SCANS_FAILED,
      'info',
      `${count(buffer.failedScans, 'scan')} refused by the service earlier ${buffer.failedScans === 1 ? 'waits' : 'wait'} for a replay.`,
    );
  }
  if (recent.filesRefusedCount >= thresholds.filesRefused) {
    const latest = recent.filesRefused[0];
    const named = latest ? `; the latest: ${latest.file} from input ${latest.inputId}` : '';
    add(
      HealthCodes.FILES_REFUSED,
      'degraded',
      `${count(recent.filesRefusedCount, 'file was', 'files were')} refused ${windowText} and moved to failed/${named}.`,
      {
        detail: latest?.reason,
      },
    );
  }
  if (recent.rejections > 0) {
    const rate = recent.reads > 0 ? recent.rejections / recent.reads : 1;
    const high = recent.reads >= thresholds.minReadsForRate && rate >= thresholds.rejectionRate;
    const where = recent.rejectionsByInput
      .slice(0, 3)
      .map((r) => `${r.inputId} ${r.count.toLocaleString('en-US')}`)
      .join(', ');
    add(
      HealthCodes.REJECTION_RATE,
      high ? 'degraded' : 'info',
      `${count(recent.rejections, 'read')} of ${recent.reads.toLocaleString('en-US')} (${Math.round(rate * 100)} %) could not be made into scans ${windowText}${where ? ` (${where})` : ''}.`,
    );
  }

  const short = facts.containersIncomplete ?? [];
  const latestShort = short[0];
  if (latestShort) {
    add(
      HealthCodes.CONTAINER_INCOMPLETE,
      'degraded',
      `${count(short.length, 'container was', 'containers were')} closed incomplete ${windowText}; the latest: ${latestShort.parent} (${latestShort.container} at ${latestShort.station}) with ${latestShort.members} of ${latestShort.expected ?? '?'} members (${latestShort.why ?? 'closed'}).`,
      { since: short.at(-1)?.closedAt },
    );
  }

  // Configuration and the upstream product list.
  if (facts.products?.state === 'missing' && facts.products.missing.length > 0) {
    add(
      HealthCodes.PRODUCTS_UNKNOWN,
      'degraded',
      `Product keys not in the upstream product list: ${facts.products.missing.map((m) => m.key).join(', ')}; the service will refuse their scans.`,
    );
  }
  const reloadError = facts.config?.lastReloadError;
  if (reloadError) {
    add(
      ErrorCodes.CONFIG,
      'degraded',
      'A changed configuration was refused; the previous one still runs.',
      { since: reloadError.at, detail: firstProblem(reloadError.message) },
    );
  }
  const restart = facts.config?.needsRestart ?? [];
  if (restart.length > 0)
    add(
      HealthCodes.RESTART_NEEDED,
      'info',
      `Changed settings wait for a restart: ${restart.join(', ')}.`,
    );

  listenerRules(facts.listener, thresholds, add);

  problems.sort((a, b) => RANK[a.severity] - RANK[b.severity]);
  const worst = problems[0]?.severity;
  return { state: worst === 'down' ? 'down' : worst === 'degraded' ? 'degraded' : 'ok', problems };
}

/** The local server's rules: its certificate near or past its end, a refused renewal, tokens in clear text. */
function listenerRules(
  listener: HealthFacts['listener'],
  thresholds: HealthThresholds,
  add: (
    code: string,
    severity: Severity,
    sentence: string,
    extra?: { since?: string | undefined; detail?: string | undefined },
  ) => void,
): void {
  const tls = listener?.tls;
  if (tls && tls.daysLeft < thresholds.certificateDays) {
    const ended = tls.daysLeft < 0;
    add(
      HealthCodes.LISTENER_CERT_ENDING,
      'degraded',
      ended
        ? "The certificate of this gateway's page and ingest has ended: browsers, station screens and ingest clients refuse to connect until it is renewed."
        : `The certificate of this gateway's page and ingest ends in ${tls.daysLeft === 0 ? 'less than a day' : count(tls.daysLeft, 'day')}: renew it before browsers, station screens and ingest clients refuse it.`,
      { detail: `serial ${tls.certificate.serialNumber}, valid until ${tls.certificate.validTo}` },
    );
  }
  if (tls?.lastRefusal) {
    add(
      ErrorCodes.LISTENER_TLS,
      'degraded',
      'Changed certificate files were refused; the previous certificate is still served.',
      { since: tls.lastRefusal.at, detail: tls.lastRefusal.message },
    );
  }
  const inClear = listener?.tokensInClear ?? [];
  if (inClear.length > 0) {
    const named =
      inClear.length === 1
        ? inClear[0]!
        : `${inClear.slice(0, -1).join(', ')} and ${inClear[inClear.length - 1]!}`;
    add(
      HealthCodes.TOKENS_IN_CLEAR,
      'info',
      `This page is reachable from the network over plain HTTP, so the ${named} ${inClear.length === 1 ? 'crosses' : 'cross'} the network in clear text.`,
    );
  }
}
