import {
  cardHtml,
  esc,
  factsHtml,
  fmtBytes,
  fmtCount,
  fmtDuration,
  fmtTime,
  genericTableHtml,
  mdHtml,
  originText,
  pill,
  problemHtml,
  rawHtml,
  reasonHtml,
  shown,
  tableHtml,
  techHtml,
  timeHtml,
  titleOf,
  valueHtml,
} from './page-format.js';
import {
  bannerHtml,
  batchesCard,
  bufferCard,
  bufferCounts,
  configCard,
  deliveryCard,
  extraCards,
  inputsCard,
  problemsCard,
  reloadFacts,
  listenerFacts,
  sessionsCard,
  statusClock,
  tilesHtml,
} from './page-cards.js';
import { haCard } from './page-ha.js';
import { genealogyHtml, gs1LookupHtml, itemHtml } from './page-item.js';
import type { GatewayStatus } from './status.js';
import { deliveredMeans, prunedText, scanCountsText } from '../format/scan-counts.js';
import type { StationSnapshot } from './station-page.js';

/**
 * The health page's content as an HTML string, rendered from a {@link GatewayStatus}, and the
 * station screen's from a {@link StationSnapshot}. The same functions run on the server (first
 * paint) and in the browser (refresh from `/api/v1/status`): `page.ts` and `station-page.ts` put
 * their source into the page's inline script, so each render function (here and in page-format.ts,
 * page-cards.ts and page-item.ts) must use nothing but its arguments, the functions listed in
 * {@link RENDER_FUNCTIONS} and the standard built-ins (no module constants; `shown` alone reads the
 * control-byte names, and its shipped source carries them). Calls between those modules are
 * imports, which the compiled ES modules keep as the functions' bare names, the names the inline
 * script defines. A unit test runs the page's script in a bare context to hold that line.
 *
 * Everything that comes from outside (reads, reasons, ids, error messages) goes through `esc`.
 */

// The building blocks, the cards and the item trace live in their own modules; this one joins them
// and stays the one import for the pages, the CLI and the tests.
export * from './page-format.js';
export * from './page-cards.js';
export * from './page-item.js';
export * from './page-ha.js';

/** The whole content of `<main>`: state banner, summary tiles and every card, in page order. */
export function renderMain(s: GatewayStatus): string {
  return (
    bannerHtml(s) +
    tilesHtml(s) +
    haCard(s) +
    inputsCard(s) +
    `<div class="pair">${bufferCard(s)}${deliveryCard(s)}</div>` +
    batchesCard(s) +
    problemsCard(s) +
    sessionsCard(s) +
    extraCards(s) +
    configCard(s)
  );
}

/** The station screen's content for `s` (src/health/station-page.ts: server first paint and every update in the browser). */
export function stationMain(s: StationSnapshot): string {
  const tz = s.timezone;
  const last = s.last[0];
  const verdictText = {
    taken: 'TAKEN',
    refused: 'REFUSED',
    duplicate: 'ALREADY SCANNED',
    noRead: 'NO READ',
  } as Record<string, string>;
  const hero = last
    ? `<section class="hero ${esc(last.verdict)}" id="last" data-read="${esc(last.id)}"><div class="verdict">${esc(verdictText[last.verdict] ?? last.verdict)}</div>` +
      `<div class="ref">${rawHtml(last.text)}</div>` +
      (last.verdict === 'taken'
        ? ''
        : `<div class="words">${esc(last.words ?? '')}</div><div class="hint">${esc(last.hint ?? '')}</div>`) +
      `<div class="meta">${esc(fmtTime(last.at, tz).slice(11))} · ${esc(last.inputName ?? last.inputId)}${last.reason ? ` · <span class="tech">${esc(last.reason)}</span>` : ''}</div></section>`
    : '<section class="hero idle" id="last"><div class="verdict">WAITING</div><div class="words">No scan at this station in the buffer yet.</div></section>';
  const d = s.delivery;
  const banner = d.stalled
    ? `<div class="stalled" id="stalled" role="alert">The gateway cannot reach the service. Scans are kept safely (${esc(d.waiting)} waiting) and are sent when it is back.${d.since ? ` Since ${esc(fmtTime(d.since, tz).slice(11))}.` : ''}</div>`
    : d.paused
      ? `<div class="stalled paused" id="stalled" role="alert">Sending is paused by an operator. Scans are kept safely (${esc(d.waiting)} waiting).</div>`
      : '';
  const c = s.counts;
  const counts =
    `<section class="counts"><div class="shift">Shift ${esc(s.shift.name)} since ${esc(fmtTime(s.shift.startsAt, tz).slice(11, 16))}</div>` +
    `<div class="count taken"><b id="count-taken">${esc(c.taken)}</b><span>taken</span></div>` +
    `<div class="count refused"><b id="count-refused">${esc(c.refused)}</b><span>refused</span></div>` +
    `<div class="count other"><b>${esc(c.duplicate + c.noRead)}</b><span>repeat / no read</span></div></section>`;
  // The open containers: the label and how full it is, as large as the counts.
  const boxes = (s.containers ?? [])
    .map(
      (b) =>
        `<div class="box${b.expected !== undefined && b.members < b.expected ? ' short' : ''}"><span class="name">${esc(b.name)}${b.inputId ? ` · ${esc(b.inputId)}` : ''}</span>` +
        `<code class="label">${esc(b.parent)}</code><b class="fill">${esc(b.expected !== undefined ? `${b.members} of ${b.expected}` : `${b.members} in it`)}</b></div>`,
    )
    .join('');
  const containers = boxes ? `<section class="containers" id="containers">${boxes}</section>` : '';
  const rows = s.last
    .map(
      (r) =>
        `<li class="${esc(r.verdict)}"><time>${esc(fmtTime(r.at, tz).slice(11))}</time><span class="v">${esc(r.verdict === 'taken' ? 'taken' : r.verdict === 'refused' ? 'refused' : r.verdict === 'duplicate' ? 'repeat' : 'no read')}</span>` +
        `<code>${rawHtml(r.text)}</code><span class="why">${r.verdict === 'taken' ? esc(r.scanState === 'delivered' ? 'delivered' : r.scanState === 'failed' ? 'refused by the service' : 'kept, sending') : esc(r.words ?? '')}</span></li>`,
    )
    .join('');
  return `${banner}${containers}<div class="grid">${hero}${counts}</div><section class="list"><h2>Last ${esc(s.last.length)} reads</h2><ol id="reads">${rows}</ol></section>`;
}

/** Every function the browser needs, in dependency order, for `page.ts` to inline. */
export const RENDER_FUNCTIONS = [
  esc,
  shown,
  rawHtml,
  fmtTime,
  fmtDuration,
  fmtBytes,
  fmtCount,
  deliveredMeans,
  scanCountsText,
  prunedText,
  timeHtml,
  pill,
  tableHtml,
  originText,
  factsHtml,
  valueHtml,
  mdHtml,
  techHtml,
  reasonHtml,
  problemHtml,
  titleOf,
  genericTableHtml,
  reloadFacts,
  listenerFacts,
  statusClock,
  cardHtml,
  bufferCounts,
  bannerHtml,
  tilesHtml,
  haCard,
  inputsCard,
  bufferCard,
  deliveryCard,
  batchesCard,
  problemsCard,
  sessionsCard,
  extraCards,
  configCard,
  renderMain,
  genealogyHtml,
  gs1LookupHtml,
  itemHtml,
];
