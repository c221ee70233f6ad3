import { esc, fmtTime, originText, pill, rawHtml, tableHtml } from './page-format.js';

/**
 * The item trace the health page shows under its search box (`GET /api/v1/items/<reference>`):
 * the item's scans and its parents and children as trees. Shipped to the browser by their source
 * like every render function (see page-render.ts).
 */

/** A genealogy tree (src/buffer/items.ts `GenealogyNode`) as nested lists; each reference links to its own trace. */
export function genealogyHtml(nodes: unknown, more: unknown, timeZone: string): string {
  const list = Array.isArray(nodes) ? nodes : [];
  const extra = Number(more) || 0;
  if (list.length === 0 && extra === 0) return '';
  const items = list
    .map((n: { reference?: unknown; scans?: unknown; lastDcp?: unknown; lastState?: unknown; lastAt?: unknown; nodes?: unknown; more?: unknown; cycle?: unknown }) => {
      const what = Number(n.scans) > 0 ? `${esc(n.lastDcp)} ${pill(n.lastState)} <span class="muted small">${esc(fmtTime(n.lastAt, timeZone))}</span>` : '<span class="muted small">not scanned here</span>';
      const ref = `<a href="#item" data-item="${esc(n.reference)}"><code>${rawHtml(n.reference)}</code></a>`;
      return `<li>${ref} ${what}${n.cycle ? ' <span class="muted small">(cycle: shown above)</span>' : genealogyHtml(n.nodes, n.more, timeZone)}</li>`;
    })
    .join('');
  return `<ul class="tree">${items}${extra > 0 ? `<li class="muted small">… ${esc(extra)} more</li>` : ''}</ul>`;
}

/** The trace of one item (`GET /api/v1/items/<reference>`, src/buffer/items.ts `ItemTrace`) as the page shows it under the search box. */
export function itemHtml(t: {
  reference?: unknown;
  found?: unknown;
  scans?: unknown;
  moreScans?: unknown;
  parents?: unknown;
  parentsMore?: unknown;
  children?: unknown;
  childrenMore?: unknown;
  matches?: unknown;
}, timeZone: string): string {
  const matches = Array.isArray(t.matches) ? t.matches : [];
  if (!t.found) {
    const list = matches
      .map((m: { reference?: unknown; scans?: unknown; lastAt?: unknown }) => `<li><a href="#item" data-item="${esc(m.reference)}"><code>${rawHtml(m.reference)}</code></a> <span class="muted small">${esc(m.scans)} scan(s), latest ${esc(fmtTime(m.lastAt, timeZone))}</span></li>`)
      .join('');
    return `<p><code>${rawHtml(t.reference)}</code> is not in the buffer (no scan of it, none naming it as parent).</p>` + (list ? `<p class="muted">References starting with it:</p><ul>${list}</ul>` : '');
  }
  const scans = Array.isArray(t.scans) ? t.scans : [];
  const rows = scans.map(
    (s: {
      id?: unknown;
      dcpKey?: unknown;
      kind?: unknown;
      timeUtc?: unknown;
      productModelKey?: unknown;
      supplierKey?: unknown;
      clientKey?: unknown;
      attributes?: unknown;
      state?: unknown;
      failureReason?: unknown;
      replayedBy?: unknown;
      replaces?: unknown;
      batch?: { id?: unknown; route?: unknown; requestId?: unknown; upstreamState?: unknown; state?: unknown } | null;
      read?: { inputId?: unknown; raw?: unknown; receivedAt?: unknown; origin?: unknown } | null;
    }) => {
      const attrs = Array.isArray(s.attributes) ? s.attributes.map((a: { key?: unknown; value?: unknown }) => `${esc(a.key)}=${esc(a.value)}`).join(', ') : '';
      const who = [s.productModelKey ? `product ${esc(s.productModelKey)}` : '', s.supplierKey ? `supplier ${esc(s.supplierKey)}` : '', s.clientKey ? `client ${esc(s.clientKey)}` : '', attrs].filter(Boolean).join('<br>');
      const read = s.read ? `${esc(s.read.inputId)} <code class="raw">${rawHtml(s.read.raw)}</code><br><span class="muted small">${esc(fmtTime(s.read.receivedAt, timeZone))} ${esc(originText(s.read.origin))}</span>` : '—';
      const b = s.batch;
      const batch = b ? `${esc(b.id)} · ${esc(b.route)}<br><span class="small">${b.requestId ? `<code>${esc(b.requestId)}</code>` : 'no requestId yet'}</span>` : '—';
      const notes = [
        s.failureReason ? `<span class="reason">${esc(s.failureReason)}</span>` : '',
        s.replayedBy !== null && s.replayedBy !== undefined ? `replaced by scan ${esc(s.replayedBy)}` : '',
        s.replaces !== null && s.replaces !== undefined ? `replay of scan ${esc(s.replaces)}` : '',
      ]
        .filter(Boolean)
        .join('<br>');
      return [
        `${esc(fmtTime(s.timeUtc, timeZone))}`,
        `${esc(s.dcpKey)}${s.kind ? ` <span class="muted small">${esc(s.kind)}</span>` : ''}`,
        who || '—',
        read,
        batch,
        `${pill(s.state)}${b && b.upstreamState ? ` ${pill(b.upstreamState)}` : ''}${notes ? `<br>${notes}` : ''}`,
      ];
    },
  );
  const more = Number(t.moreScans) > 0 ? `<p class="muted small">${esc(t.moreScans)} older scans not shown.</p>` : '';
  const parents = genealogyHtml(t.parents, t.parentsMore, timeZone) || '<p class="muted empty">none</p>';
  const children = genealogyHtml(t.children, t.childrenMore, timeZone) || '<p class="muted empty">none</p>';
  return (
    `<h3><code>${rawHtml(t.reference)}</code></h3>` +
    tableHtml(['time', 'DCP', 'product · partner · attributes', 'read', 'batch · requestId', 'state'], rows, 'no scan of it here') +
    more +
    `<div class="pair"><div><h3>Parents</h3>${parents}</div><div><h3>Children</h3>${children}</div></div>`
  );
}
