import {
  cardHtml,
  esc,
  factsHtml,
  fmtBytes,
  fmtCount,
  genericTableHtml,
  originText,
  pill,
  rawHtml,
  reasonHtml,
  statusClock,
  tableHtml,
  techHtml,
  titleOf,
  valueHtml,
} from './page-format.js';
import type { GatewayStatus } from './status.js';

/**
 * The health page's cards that list rows (page-cards.ts re-exports them): the last batches, the
 * rejections, open container sessions, and a generic card for each status field the page has no
 * layout for. Shipped to the browser by their source, like every render function (see
 * page-render.ts).
 */

/** The Last batches card: each batch's request id, size and state (the service's, once it answered). */
export function batchesCard(s: GatewayStatus): string {
  const t = statusClock(s);
  const batches = tableHtml(
    ['Batch', 'Request id', 'Mode', 'Scans', 'Bytes', 'State', 'Failures', 'Created'],
    (s.batches ?? []).map((x) => {
      const state =
        x.upstreamState && (x.state === 'done' || x.state === 'uploaded')
          ? x.upstreamState
          : x.state;
      const err = x.lastError && x.state !== 'done' ? techHtml(x.lastError) : '';
      return [
        esc(x.id),
        `<code>${esc(x.requestId ?? '—')}</code>`,
        esc(x.mode),
        fmtCount(x.scanCount),
        esc(fmtBytes(x.bytes)),
        pill(state) + err,
        x.failed ? `<span class="err">${esc(x.failed)}</span>` : '0',
        t(x.createdAt),
      ];
    }),
    'No batches yet.',
    [0, 3, 4, 6],
  );
  return cardHtml('Last batches', batches, 'wide');
}

/** The rejections card: the latest reads the gateway rejected and scans the service refused, each as received. */
export function problemsCard(s: GatewayStatus): string {
  const t = statusClock(s);
  const problems = tableHtml(
    ['When', 'What', 'Input', 'Reason', 'Read as received'],
    (s.problems ?? []).map((p) => [
      t(p.at),
      pill(p.kind),
      esc(p.inputId),
      `${reasonHtml(p.reason)}${p.reference ? `<div class="muted small">reference <code>${rawHtml(p.reference)}</code></div>` : ''}`,
      `<code class="raw">${rawHtml(p.raw)}</code>${p.origin ? `<div class="muted small">${esc(originText(p.origin))}</div>` : ''}`,
    ]),
    'No rejections or failures.',
  );
  return cardHtml('Latest rejections and upstream failures', problems, 'wide');
}

/** The open container sessions card, when the status has sessions; otherwise nothing. */
export function sessionsCard(s: GatewayStatus): string {
  const tz = s.site?.timezone ?? 'UTC';
  if (!Array.isArray(s.sessions)) return '';
  // A supervisor closes a short container, or abandons one (the admin form above holds the token,
  // name and why): one pair of buttons per open container.
  const canClose = (s.admin?.actions ?? []).includes('close-container');
  const buttons = canClose
    ? (s.sessions as { container: string; station: string; parent: string; fill?: string }[])
        .map((c) => {
          const data = `data-action="close-container" data-container="${esc(c.container)}" data-station="${esc(c.station)}"`;
          return (
            `<p class="admin">${esc(c.parent)} (${esc(c.container)} at ${esc(c.station)}, ${esc(c.fill ?? '')}): ` +
            `<button type="button" ${data} data-abandon="false">Close short</button> ` +
            `<button type="button" class="secondary" ${data} data-abandon="true">Abandon</button></p>`
          );
        })
        .join('')
    : '';
  return cardHtml(
    'Open container sessions',
    genericTableHtml(s.sessions, 'No open sessions.', tz) + buttons,
    'wide',
  );
}

/** A card for each status field the page has no layout for (parts may add fields), shown generically. */
export function extraCards(s: GatewayStatus): string {
  const tz = s.site?.timezone ?? 'UTC';
  const known = [
    'state',
    'reasons',
    'healthProblems',
    'recent',
    'phase',
    'generatedAt',
    'site',
    'version',
    'startedAt',
    'uptimeSec',
    'config',
    'buffer',
    'delivery',
    'inputs',
    'batches',
    'problems',
    'sessions',
    'admin',
    'listener',
    'ha',
  ];
  return Object.keys(s)
    .filter((k) => !known.includes(k) && s[k] !== null && typeof s[k] === 'object')
    .map((k) => {
      const v = s[k];
      return cardHtml(
        titleOf(k),
        Array.isArray(v)
          ? genericTableHtml(v, 'None.', tz)
          : factsHtml(
              Object.entries(v as object).map(([fk, fv]) => [titleOf(fk), valueHtml(fv, tz, 1)]),
            ),
        'wide',
      );
    })
    .join('');
}
