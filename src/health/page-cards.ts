import {
  bufferCounts,
  cardHtml,
  esc,
  factsHtml,
  fmtBytes,
  fmtCount,
  fmtDuration,
  pill,
  problemHtml,
  statusClock,
  tableHtml,
  techHtml,
} from './page-format.js';
import type { GatewayStatus } from './status.js';
import { deliveredMeans, prunedText, scanCountsText } from '../format/scan-counts.js';

/**
 * The health page's cards, one render function each, from a {@link GatewayStatus}: the state
 * banner, the summary tiles, inputs, buffer, delivery, batches, rejections, sessions, fields the
 * page has no layout for, and the configuration. The cards that list rows are in
 * page-list-cards.ts, the configuration card in page-config-card.ts, the status clock and the
 * buffer's counts in page-format.ts; all re-exported here. page-render.ts joins them in page
 * order; like every render function they are shipped to the browser by their source (see
 * page-render.ts).
 */

export { statusClock, bufferCounts } from './page-format.js';
export { batchesCard, extraCards, problemsCard, sessionsCard } from './page-list-cards.js';
export { configCard, listenerFacts, reloadFacts } from './page-config-card.js';

/** The state banner: the state, one line on what it means, and each health problem. */
export function bannerHtml(s: GatewayStatus): string {
  const t = statusClock(s);
  const stateText = { ok: 'OK', degraded: 'Degraded', down: 'Down' }[s.state] ?? String(s.state);
  // Each problem as a sentence, its code and what to do; a status without them (older gateway) shows its reasons.
  const found = Array.isArray(s.healthProblems)
    ? s.healthProblems
    : (s.reasons ?? []).map((r) => ({ sentence: r, severity: s.state }));
  const stateLine =
    s.state === 'down'
      ? 'Reads cannot be stored.'
      : s.state === 'degraded'
        ? 'Working, but something needs a look.'
        : found.length > 0
          ? 'Working. Worth knowing:'
          : 'Every input is up and delivery is flowing.';
  const items = found.map((p) => problemHtml(p, t)).join('');
  return `<section class="banner ${esc(s.state)}" aria-live="polite"><div class="state">${esc(stateText)}</div><div><p class="state-line">${esc(
    stateLine,
  )}</p>${items ? `<ul class="reasons">${items}</ul>` : ''}</div></section>`;
}

/** The summary tiles: what is not delivered yet, how old, delivered, refused, the last hour, the last upload. */
export function tilesHtml(s: GatewayStatus): string {
  const t = statusClock(s);
  const b = s.buffer ?? ({} as GatewayStatus['buffer']);
  const d = s.delivery ?? {};
  const scans = b.scans ?? {};
  const { waiting, held, notDelivered } = bufferCounts(b);
  const refusedUpstream = Number(scans.failed ?? 0);
  const oldest = b.oldestPendingAgeMs ?? null;
  const recent = s.recent;
  // A scan waits a second or so normally; minutes mean delivery is stuck or far behind.
  const tiles: [string, string, string, string][] = [
    [
      'Not yet delivered',
      fmtCount(notDelivered),
      notDelivered === 0
        ? 'nothing waiting, nothing held'
        : `${fmtCount(waiting)} waiting for delivery · ${fmtCount(held)} held`,
      held > 0 ? 'bad' : '',
    ],
    [
      'Oldest waiting',
      oldest === null ? '—' : esc(fmtDuration(oldest)),
      'age of the oldest scan waiting for delivery',
      oldest !== null && oldest > 300_000 ? 'warn' : '',
    ],
    [
      'Delivered',
      fmtCount(scans.delivered ?? 0),
      // The same words and counts as `scan-gateway buffer stats` (src/format/scan-counts.ts).
      `${deliveredMeans()}. In the buffer: ${scanCountsText(scans, fmtCount)}. Pruned (lifetime): ${b.pruned ? prunedText(b.pruned, fmtCount) : 'not counted'}`,
      '',
    ],
    [
      'Refused by the service',
      fmtCount(refusedUpstream),
      refusedUpstream ? 'single scans: see below' : 'single scans refused upstream',
      refusedUpstream ? 'bad' : '',
    ],
    ...(recent
      ? ([
          [
            'Rejected in the last hour',
            fmtCount(recent.rejections),
            `of ${fmtCount(recent.reads)} reads · ${fmtCount(recent.filesRefused)} file${recent.filesRefused === 1 ? '' : 's'} refused`,
            recent.filesRefused > 0 ? 'bad' : recent.rejections > 0 ? 'warn' : '',
          ],
        ] as [string, string, string, string][])
      : []),
    [
      'Last upload',
      d.lastSuccessAt ? t(d.lastSuccessAt) : '<span class="muted">none yet</span>',
      '',
      '',
    ],
  ];
  return `<section class="tiles">${tiles
    .map(
      ([k, v, sub, cls]) =>
        `<div class="tile${cls ? ` ${cls}` : ''}"><div class="tile-k">${esc(k)}</div><div class="tile-v">${v}</div>${sub ? `<div class="tile-s">${esc(sub)}</div>` : ''}</div>`,
    )
    .join('')}</section>`;
}

/** The Inputs card: each input's state, last read, counters and source. */
export function inputsCard(s: GatewayStatus): string {
  const t = statusClock(s);
  const inputs = tableHtml(
    [
      'Input',
      'Type',
      'State',
      'Last read',
      'Reads',
      'Scans',
      'No-reads',
      'Rejected',
      'Duplicates',
      'Source',
    ],
    (s.inputs ?? []).map((i) => {
      const c = i.counters;
      const err = i.lastError
        ? `${i.lastErrorAt ? ` <span class="ago">since ${t(i.lastErrorAt)}</span>` : ''}${techHtml(i.lastError)}`
        : '';
      const r = i.readers;
      const readers = r
        ? `<div class="muted">${r.count === 0 ? 'no reader connected' : r.connected.map((x) => `reader ${esc(x.address)} since ${t(x.since)}`).join('<br>')}${r.expected > 0 ? ` (${esc(r.count)} of ${esc(r.expected)} expected)` : ''}</div>`
        : '';
      const p = i.progress;
      const reading = p
        ? `<div class="muted">reading <code>${esc(p.file)}</code>: ${fmtCount(p.rows)} rows so far (file ${esc(fmtBytes(p.bytes))})</div>`
        : '';
      return [
        i.name
          ? `<strong>${esc(i.name)}</strong> <span class="muted">${esc(i.id)}</span>`
          : `<strong>${esc(i.id)}</strong>`,
        esc(i.type),
        pill(i.state) + err + readers + reading,
        t(c?.lastReadAt),
        fmtCount(c?.reads ?? 0),
        fmtCount(c?.scans ?? 0),
        fmtCount(c?.noReads ?? 0),
        fmtCount(c?.rejections ?? 0),
        fmtCount(c?.duplicates ?? 0) +
          (c?.redelivered
            ? `<div class="tile-s">+ ${fmtCount(c.redelivered)} MQTT resends recognised</div>`
            : ''),
        `<code>${esc(i.source ?? '')}</code>`,
      ];
    }),
    'No inputs configured.',
    [4, 5, 6, 7, 8],
  );
  return cardHtml('Inputs', inputs, 'wide');
}

/** The Buffer card: counts with one meaning of waiting, disk and quota, intake, storing reads, the file. */
export function bufferCard(s: GatewayStatus): string {
  const t = statusClock(s);
  const b = s.buffer ?? ({} as GatewayStatus['buffer']);
  const scans = b.scans ?? {};
  const { waiting, held, inBatch, notDelivered } = bufferCounts(b);
  const used = b.undeliveredBytes ?? b.fileBytes ?? 0;
  const quota = b.quotaBytes
    ? ([
        [
          'Quota',
          `${esc(fmtBytes(used))} of ${esc(fmtBytes(b.quotaBytes))} (${esc(Math.round((used / b.quotaBytes) * 100))} %)${b.disk?.derivedQuotaBytes !== undefined ? ' <span class="muted">(derived from the disk: buffer.maxBytes is not set)</span>' : ''}`,
        ],
      ] as [string, string][])
    : [];
  const buffer = factsHtml([
    [
      'Not yet delivered',
      `${fmtCount(notDelivered)}${b.quotaScans ? ` <span class="muted">(the quota allows ${fmtCount(b.quotaScans)} waiting)</span>` : ''}`,
    ],
    [
      'Waiting for delivery',
      `${fmtCount(waiting)} <span class="muted">(${fmtCount(b.pendingScans ?? 0)} not yet in a batch · ${fmtCount(inBatch)} in a batch being sent or processed)</span>`,
    ],
    [
      'Held',
      held
        ? `<span class="err">${fmtCount(held)}</span> <span class="muted">(the service refused their batch; replay after fixing the cause)</span>`
        : '0',
    ],
    [
      'Oldest waiting',
      b.oldestPendingAgeMs === null || b.oldestPendingAgeMs === undefined
        ? '—'
        : esc(fmtDuration(b.oldestPendingAgeMs)),
    ],
    ['Size on disk', esc(fmtBytes(b.fileBytes))],
    ...(b.disk
      ? ([
          [
            'Disk',
            `${b.disk.freeBytes !== undefined ? `${esc(fmtBytes(b.disk.freeBytes))} free` : '—'} <span class="muted">(the audit yields below ${esc(fmtBytes(b.disk.lowFreeBytes))}; reserve ${b.disk.reserveReleased ? '<span class="err">released</span>' : esc(fmtBytes(b.disk.reserveBytes))})</span>` +
              (b.disk.runway
                ? `<div class="tile-s">${esc(b.disk.runway.text)} <span class="muted">(${fmtCount(Math.round(b.disk.runway.scansPerDay))} scans a day, ${esc(fmtBytes(b.disk.runway.bytesPerScan))} each, none delivered)</span></div>`
                : '') +
              (b.disk.prunedEarlyScans > 0
                ? `<div class="tile-s">${fmtCount(b.disk.prunedEarlyScans)} delivered scans pruned before the end of the audit period${b.disk.lastEarlyPrune ? `, last ${t(b.disk.lastEarlyPrune.at)}` : ''}</div>`
                : '') +
              (b.disk.vacuumPending
                ? `<div class="muted">${esc(b.disk.vacuumPending)}</div>`
                : '') +
              (b.disk.quotaTooLarge ? `<div class="err">${esc(b.disk.quotaTooLarge)}</div>` : ''),
          ],
        ] as [string, string][])
      : []),
    ...quota,
    [
      'Intake',
      b.intakePaused
        ? pill('paused') + ' back-pressure: inputs that can wait are not reading'
        : pill('running'),
    ],
    [
      'Scans by state',
      Object.keys(scans).length
        ? Object.entries(scans)
            .map(([k, v]) => `${esc(k)} ${fmtCount(v)}`)
            .join(' · ')
        : '—',
    ],
    ...(b.lastCommitError
      ? ([
          [
            'Storing reads',
            `<span class="err">fails</span> since ${t(b.lastCommitError.at)}${techHtml(b.lastCommitError.message)}`,
          ],
        ] as [string, string][])
      : []),
    ['File', `<code>${esc(b.path)}</code>`],
  ]);
  return cardHtml('Buffer', buffer);
}

/** The Delivery card: whether uploads flow, the last success and error, status checks, the access token. */
export function deliveryCard(s: GatewayStatus): string {
  const t = statusClock(s);
  const d = s.delivery ?? {};
  const token = d.token;
  const checks = d.statusChecks as
    | { consecutiveFailures?: number; lastError?: { message?: string; at?: string; code?: string } }
    | undefined;
  const uploads =
    d.circuit === 'open'
      ? `${pill('stopped')} after ${esc(d.consecutiveFailures ?? 0)} failures in a row${d.nextRetryAt ? `; next try ${t(d.nextRetryAt, true)}` : ''}`
      : d.circuit === 'half-open'
        ? `${pill('trying again')} after ${esc(d.consecutiveFailures ?? 0)} failures in a row`
        : d.circuit === 'closed'
          ? `${pill('flowing')}${d.consecutiveFailures ? ` (${esc(d.consecutiveFailures)} failed, retried)` : ''}`
          : '—';
  const lastError = d.lastError as
    { message?: string; at?: string; batchId?: number; code?: string } | undefined;
  const delivery = factsHtml([
    ['Mode', esc(d.mode ?? '—')],
    ['Uploads', uploads],
    ['Paused by operator', d.paused ? pill('paused') : 'no'],
    ['Last success', t(d.lastSuccessAt)],
    [
      'Last error',
      lastError
        ? `${lastError.code ? `<code class="pcode">${esc(lastError.code)}</code> ` : ''}${t(lastError.at)}${lastError.batchId ? ` · batch ${esc(lastError.batchId)}` : ''}${techHtml(lastError.message)}`
        : '<span class="muted">none</span>',
    ],
    [
      'Status checks',
      checks && checks.consecutiveFailures
        ? `<span class="err">${esc(checks.consecutiveFailures)} failed in a row</span>${checks.lastError?.code ? ` <code class="pcode">${esc(checks.lastError.code)}</code>` : ''}${techHtml(checks.lastError?.message)}`
        : 'answered',
    ],
    [
      'Access token',
      token
        ? `${token.expiresAt ? `expires ${t(token.expiresAt, true)}` : 'none held'} · ${esc(token.refreshes)} obtained`
        : '—',
    ],
    ['Possible duplicates', fmtCount(d.possibleDuplicates ?? 0)],
  ]);
  return cardHtml('Delivery', delivery);
}
