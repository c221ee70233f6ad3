import { esc, fmtTime, originText, pill, rawHtml, tableHtml } from './page-format.js';

/**
 * The item trace the health page shows under its search box (`GET /api/v1/items/<reference>`):
 * the item's scans and its parents and children as trees. Shipped to the browser by their source
 * like every render function (see page-render.ts).
 */

/** A genealogy tree (src/queries/items.ts `GenealogyNode`) as nested lists; each reference links to its own trace. */
export function genealogyHtml(nodes: unknown, more: unknown, timeZone: string): string {
  const list = Array.isArray(nodes) ? nodes : [];
  const extra = Number(more) || 0;
  if (list.length === 0 && extra === 0) return '';
  const items = list
    .map(
      (n: {
        reference?: unknown;
        scans?: unknown;
        lastDcp?: unknown;
        lastState?: unknown;
        lastAt?: unknown;
        nodes?: unknown;
        more?: unknown;
        cycle?: unknown;
      }) => {
        const what =
          Number(n.scans) > 0
            ? `${esc(n.lastDcp)} ${pill(n.lastState)} <span class="muted small">${esc(fmtTime(n.lastAt, timeZone))}</span>`
            : '<span class="muted small">not scanned here</span>';
        const ref = `<a href="#item" data-item="${esc(n.reference)}"><code>${rawHtml(n.reference)}</code></a>`;
        return `<li>${ref} ${what}${n.cycle ? ' <span class="muted small">(cycle: shown above)</span>' : genealogyHtml(n.nodes, n.more, timeZone)}</li>`;
      },
    )
    .join('');
  return `<ul class="tree">${items}${extra > 0 ? `<li class="muted small">… ${esc(extra)} more</li>` : ''}</ul>`;
}

/**
 * How the query was read as GS1 data (`asked`, `canonical`, `sameItem`) and the items carrying its
 * value (`byValue`, src/queries/key-search.ts `ValueMatches`), shown above the trace.
 */
export function gs1LookupHtml(
  t: {
    reference?: unknown;
    found?: unknown;
    asked?: unknown;
    canonical?: unknown;
    canonicalWhy?: unknown;
    sameItem?: unknown;
    byValue?: unknown;
  },
  timeZone: string,
): string {
  const link = (ref: unknown) =>
    `<a href="#item" data-item="${esc(ref)}"><code>${rawHtml(ref)}</code></a>`;
  const parts: string[] = [];
  if (t.asked !== undefined && t.asked !== null)
    parts.push(
      `<p class="muted small"><code>${rawHtml(t.asked)}</code> found as <code>${rawHtml(t.reference)}</code></p>`,
    );
  if (t.canonical)
    parts.push(
      `<p class="muted small">Canonical GS1 reference: <code>${esc(t.canonical)}</code>${t.canonicalWhy ? ` · ${esc(t.canonicalWhy)}` : ''}</p>`,
    );
  const same = Array.isArray(t.sameItem) ? t.sameItem : [];
  if (same.length > 0)
    parts.push(`<p class="muted small">The same item also under: ${same.map(link).join(', ')}</p>`);
  const groups = Array.isArray(t.byValue) ? t.byValue : [];
  for (const m of groups as {
    ai?: unknown;
    title?: unknown;
    value?: unknown;
    scans?: unknown;
    scansAtLeast?: unknown;
    items?: unknown;
    next?: unknown;
  }[]) {
    const items = Array.isArray(m.items) ? m.items : [];
    if (t.found && items.length === 1) continue;
    const list = items
      .map(
        (i: { reference?: unknown; scans?: unknown; lastAt?: unknown }) =>
          `<li>${link(i.reference)} <span class="muted small">${esc(i.scans)} scan(s), latest ${esc(fmtTime(i.lastAt, timeZone))}</span></li>`,
      )
      .join('');
    parts.push(
      `<p><code>${esc(m.value)}</code> as AI ${esc(m.ai)} (${esc(m.title)}): ${m.scansAtLeast ? 'over ' : ''}${esc(m.scans)} scan(s), ${items.length} item(s) listed${m.next ? ', more through <code>api/v1/items?value=…&amp;cursor=' + esc(m.next) + '</code>' : ''}</p><ul>${list}</ul>`,
    );
  }
  return parts.join('');
}

/** The trace of one item (`GET /api/v1/items/<reference>`, src/queries/items.ts `ItemTrace`) as the page shows it under the search box. */
export function itemHtml(
  t: {
    reference?: unknown;
    found?: unknown;
    scans?: unknown;
    moreScans?: unknown;
    parents?: unknown;
    parentsMore?: unknown;
    children?: unknown;
    childrenMore?: unknown;
    matches?: unknown;
    asked?: unknown;
    canonical?: unknown;
    canonicalWhy?: unknown;
    sameItem?: unknown;
    byValue?: unknown;
  },
  timeZone: string,
): string {
  const matches = Array.isArray(t.matches) ? t.matches : [];
  const gs1 = gs1LookupHtml(t, timeZone);
  if (!t.found) {
    if (Array.isArray(t.byValue) && t.byValue.length > 0) return gs1;
    const list = matches
      .map(
        (m: { reference?: unknown; scans?: unknown; lastAt?: unknown }) =>
          `<li><a href="#item" data-item="${esc(m.reference)}"><code>${rawHtml(m.reference)}</code></a> <span class="muted small">${esc(m.scans)} scan(s), latest ${esc(fmtTime(m.lastAt, timeZone))}</span></li>`,
      )
      .join('');
    return (
      gs1 +
      `<p><code>${rawHtml(t.reference)}</code> is not in the buffer (no scan of it, none naming it as parent).</p>` +
      (list ? `<p class="muted">References starting with it:</p><ul>${list}</ul>` : '')
    );
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
      batch?: {
        id?: unknown;
        route?: unknown;
        requestId?: unknown;
        upstreamState?: unknown;
        state?: unknown;
        finishedAt?: unknown;
        sentAgain?: unknown;
      } | null;
      read?: { inputId?: unknown; raw?: unknown; receivedAt?: unknown; origin?: unknown } | null;
    }) => {
      const attrs = Array.isArray(s.attributes)
        ? s.attributes
            .map((a: { key?: unknown; value?: unknown }) => `${esc(a.key)}=${esc(a.value)}`)
            .join(', ')
        : '';
      const who = [
        s.productModelKey ? `product ${esc(s.productModelKey)}` : '',
        s.supplierKey ? `supplier ${esc(s.supplierKey)}` : '',
        s.clientKey ? `client ${esc(s.clientKey)}` : '',
        attrs,
      ]
        .filter(Boolean)
        .join('<br>');
      const read = s.read
        ? `${esc(s.read.inputId)} <code class="raw">${rawHtml(s.read.raw)}</code><br><span class="muted small">${esc(fmtTime(s.read.receivedAt, timeZone))} ${esc(originText(s.read.origin))}</span>`
        : '—';
      const b = s.batch;
      const batch = b
        ? `${esc(b.id)} · ${esc(b.route)}<br><span class="small">${b.requestId ? `<code>${esc(b.requestId)}</code>` : 'no requestId yet'}</span>`
        : '—';
      const notes = [
        s.failureReason ? `<span class="reason">${esc(s.failureReason)}</span>` : '',
        s.replayedBy !== null && s.replayedBy !== undefined
          ? `replaced by scan ${esc(s.replayedBy)}`
          : '',
        s.replaces !== null && s.replaces !== undefined ? `replay of scan ${esc(s.replaces)}` : '',
        b && typeof b.sentAgain === 'number' && b.sentAgain > 0 && !b.finishedAt
          ? `possible duplicate: batch ${esc(b.id)} was sent again after an answer was lost, until the service's status of it is known`
          : '',
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
  const more =
    Number(t.moreScans) > 0
      ? `<p class="muted small">${esc(t.moreScans)} older scans not shown.</p>`
      : '';
  const parents =
    genealogyHtml(t.parents, t.parentsMore, timeZone) || '<p class="muted empty">none</p>';
  const children =
    genealogyHtml(t.children, t.childrenMore, timeZone) || '<p class="muted empty">none</p>';
  return (
    gs1 +
    `<h3><code>${rawHtml(t.reference)}</code></h3>` +
    tableHtml(
      ['time', 'DCP', 'product · partner · attributes', 'read', 'batch · requestId', 'state'],
      rows,
      'no scan of it here',
    ) +
    more +
    `<div class="pair"><div><h3>Parents</h3>${parents}</div><div><h3>Children</h3>${children}</div></div>`
  );
}
