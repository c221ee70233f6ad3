import { createHash } from 'node:crypto';
import { esc, RENDER_FUNCTIONS, renderMain } from './page-render.js';
import { browserScript } from './browser-script.js';
import type { GatewayStatus } from './status.js';

/**
 * The health page at `/`: one self-contained HTML document (no external assets, no build step).
 * The server renders the first view; a small inline script then fetches `api/v1/status` every
 * {@link REFRESH_MS} ms and re-renders with the same functions (page-render.ts), and drives the
 * admin buttons. A Content-Security-Policy allows only this page's own script and style (by hash)
 * and requests to its own origin, so even a rendering mistake cannot run injected script.
 */

/** How often the page refreshes itself, in ms. */
export const REFRESH_MS = 5000;

const STYLE = `
:root{--bg:#f3f5f8;--card:#fff;--fg:#1b1f24;--muted:#5d6773;--line:#dde2e8;--good:#127a3b;--good-bg:#e3f5e9;--warn:#8a5a00;--warn-bg:#fff3d6;--bad:#b42318;--bad-bg:#fde7e4;--accent:#1f5fbf;--code:#eef1f5}
@media (prefers-color-scheme:dark){:root{--bg:#0f1318;--card:#171c23;--fg:#e6e9ee;--muted:#97a1ad;--line:#2a313a;--good:#4cc27a;--good-bg:#12301f;--warn:#e0b14a;--warn-bg:#33290f;--bad:#ff7b6e;--bad-bg:#3a1714;--accent:#6ea8ff;--code:#222a33}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans",sans-serif}
header.top{background:var(--card);border-bottom:1px solid var(--line)}
header.top .in{max-width:1200px;margin:0 auto;display:flex;flex-wrap:wrap;align-items:baseline;gap:.25rem 1rem;padding:.8rem 1.3rem}
header.top h1{font-size:1.1rem;margin:0}
header.top .site{font-weight:600;color:var(--accent)}
header.top .conn{margin-left:auto;font-size:.85rem;color:var(--muted)}
header.top .conn.bad{color:var(--bad);font-weight:600}
main{max-width:1200px;margin:0 auto;padding:.8rem;display:flex;flex-direction:column;gap:.8rem}
.banner{display:flex;gap:1rem;align-items:center;padding:.9rem 1rem;border-radius:10px;border:1px solid var(--line)}
.banner .state{font-size:1.6rem;font-weight:700;min-width:6.5rem}
.banner.ok{background:var(--good-bg);color:var(--good)}
.banner.degraded{background:var(--warn-bg);color:var(--warn)}
.banner.down{background:var(--bad-bg);color:var(--bad)}
.banner p,.banner ul{margin:0;color:var(--fg)}
.banner ul.reasons{padding-left:1.1rem;margin-top:.25rem}
.problem{margin:.35rem 0}.problem .sentence{font-weight:600}.problem.info .sentence{font-weight:500}
code.pcode{font-size:.75em;color:var(--muted);white-space:nowrap}
.problem .hint{font-size:.9rem;margin-top:.1rem}.problem .since{font-size:.8rem;color:var(--muted)}
details.tech{font-size:.8rem;color:var(--muted);margin-top:.15rem}details.tech summary{cursor:pointer}details.tech code{display:block;margin-top:.2rem;white-space:pre-wrap}
.tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:.6rem}
.tile{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:.6rem .8rem}
.tile-k{font-size:.8rem;color:var(--muted);text-transform:uppercase;letter-spacing:.03em}
.tile-v{font-size:1.5rem;font-weight:650;margin:.1rem 0}
.tile-v .ago,.tile-v time{font-size:1rem}
.tile-s{font-size:.8rem;color:var(--muted)}
.tile.bad{border-color:var(--bad);background:var(--bad-bg)}.tile.bad .tile-v{color:var(--bad)}
.tile.warn{border-color:var(--warn);background:var(--warn-bg)}.tile.warn .tile-v{color:var(--warn)}
.pair{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:.8rem}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:.8rem 1rem;min-width:0}
.card h2{font-size:1rem;margin:0 0 .6rem}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch}
table{border-collapse:collapse;width:100%;font-size:.9rem}
th,td{text-align:left;padding:.4rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-size:.75rem;text-transform:uppercase;letter-spacing:.03em;color:var(--muted);white-space:nowrap}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tbody tr:last-child td{border-bottom:0}
.facts{display:grid;grid-template-columns:max-content 1fr;gap:.35rem 1rem;margin:0}
.facts dt{color:var(--muted)}
.facts dd{margin:0;min-width:0;overflow-wrap:anywhere}
.pill{display:inline-block;padding:.05rem .5rem;border-radius:999px;font-size:.8rem;font-weight:600;white-space:nowrap}
.pill.good{background:var(--good-bg);color:var(--good)}
.pill.warn{background:var(--warn-bg);color:var(--warn)}
.pill.bad{background:var(--bad-bg);color:var(--bad)}
.pill.neutral{background:var(--code);color:var(--muted)}
.muted{color:var(--muted)}
.small{font-size:.8rem}
.empty{margin:.2rem 0}
.err{color:var(--bad);font-size:.85rem;overflow-wrap:anywhere}
.ago{color:var(--muted);font-size:.8rem;white-space:nowrap}
time{white-space:nowrap}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.85em;background:var(--code);padding:.05rem .3rem;border-radius:4px;overflow-wrap:anywhere}
code.raw{display:inline-block;max-width:32rem}
.ctl{display:inline-block;font-size:.7em;font-weight:700;padding:0 .2em;margin:0 .1em;border-radius:3px;background:var(--accent);color:var(--card);vertical-align:middle}
.reason{font-weight:600}
.admin form{display:flex;flex-wrap:wrap;gap:.6rem;align-items:center}
.admin input{font:inherit;padding:.45rem .6rem;border:1px solid var(--line);border-radius:6px;background:var(--bg);color:var(--fg);min-width:14rem}
.admin button{font:inherit;padding:.45rem .9rem;border-radius:6px;border:1px solid var(--accent);background:var(--accent);color:#fff;cursor:pointer}
.admin button.secondary{background:transparent;color:var(--accent)}
.admin .result{flex-basis:100%;margin:.2rem 0 0;min-height:1.2em}
.lookup form{display:flex;flex-wrap:wrap;gap:.6rem;align-items:center}
.lookup input{font:inherit;padding:.45rem .6rem;border:1px solid var(--line);border-radius:6px;background:var(--bg);color:var(--fg);min-width:16rem;flex:1}
.lookup button{font:inherit;padding:.45rem .9rem;border-radius:6px;border:1px solid var(--accent);background:var(--accent);color:#fff;cursor:pointer}
.lookup h3{font-size:.95rem;margin:.8rem 0 .4rem}
ul.tree{list-style:none;margin:0;padding-left:1rem;border-left:1px solid var(--line)}ul.tree li{margin:.2rem 0}
.wrap{max-width:1200px;margin:0 auto;padding:0 .8rem .8rem}
footer{max-width:1200px;margin:0 auto;padding:0 1rem 1.5rem;color:var(--muted);font-size:.8rem}
@media (max-width:560px){body{font-size:14px}main{padding:.5rem}.banner{flex-direction:column;align-items:flex-start;gap:.3rem}
.facts{grid-template-columns:minmax(6.5rem,38%) 1fr;gap:.3rem .7rem}.card{padding:.7rem .8rem}
table,thead,tbody,tr,td{display:block}thead{display:none}
tbody tr{border-bottom:1px solid var(--line);padding:.35rem 0}tbody tr:last-child{border-bottom:0}
td{border:0;padding:.12rem 0 .12rem 38%;position:relative;min-height:1.5em;text-align:left}
td.num{text-align:left}td::before{content:attr(data-label);position:absolute;left:0;width:35%;color:var(--muted);font-size:.8rem;padding-top:.1rem}
code.raw{max-width:100%}}
`;

/** The browser side: refresh, connection state, admin buttons. Plain ES2020, no framework. */
const CLIENT = `
const REFRESH_MS = ${REFRESH_MS};
const mainEl = document.getElementById('main');
const conn = document.getElementById('conn');
let lastOk = Date.now();
function setConn(text, bad) { conn.textContent = text; conn.className = bad ? 'conn bad' : 'conn'; }
async function refresh() {
  if (document.hidden) return;
  try {
    const res = await fetch('api/v1/status', { cache: 'no-store', headers: { accept: 'application/json' } });
    if (!res.ok) throw new Error('HTTP ' + res.status);
    const s = await res.json();
    mainEl.innerHTML = renderMain(s);
    document.title = ({ ok: 'OK', degraded: 'Degraded', down: 'Down' }[s.state] || s.state) + ' · scan-gateway · ' + s.site.id;
    lastOk = Date.now();
    setConn('updated ' + fmtTime(s.generatedAt || new Date().toISOString(), s.site.timezone).slice(11) + ' · every ' + REFRESH_MS / 1000 + ' s', false);
  } catch (err) {
    setConn('gateway not answering since ' + fmtDuration(Date.now() - lastOk) + ' (' + (err && err.message ? err.message : err) + ')', true);
  }
}
setInterval(refresh, REFRESH_MS);
document.addEventListener('visibilitychange', () => { if (!document.hidden) refresh(); });
const lookupForm = document.getElementById('lookup-form');
if (lookupForm) {
  const box = document.getElementById('lookup-ref');
  const out = document.getElementById('lookup-result');
  const tz = lookupForm.dataset.tz || 'UTC';
  async function lookup(ref) {
    if (!ref) { out.innerHTML = ''; return; }
    out.innerHTML = '<p class="muted">Looking up…</p>';
    try {
      const res = await fetch('api/v1/items/' + encodeURIComponent(ref), { cache: 'no-store', headers: { accept: 'application/json' } });
      const body = await res.json().catch(() => ({}));
      out.innerHTML = res.ok || res.status === 404 ? itemHtml(body, tz) : '<p class="err">' + esc('Lookup refused (HTTP ' + res.status + '): ' + (body.message || res.statusText)) + '</p>';
    } catch (err) {
      out.innerHTML = '<p class="err">' + esc('Lookup failed: ' + (err && err.message ? err.message : err)) + '</p>';
    }
  }
  lookupForm.addEventListener('submit', (e) => { e.preventDefault(); lookup(box.value.trim()); });
  out.addEventListener('click', (e) => {
    const a = e.target.closest('a[data-item]');
    if (!a) return;
    e.preventDefault();
    box.value = a.dataset.item;
    lookup(a.dataset.item);
  });
}
const form = document.getElementById('admin-form');
if (form) {
  const result = document.getElementById('admin-result');
  form.addEventListener('submit', (e) => e.preventDefault());
  // The admin buttons, and those of each open container (in the sessions card, drawn on refresh).
  document.addEventListener('click', async (e) => {
    const button = e.target.closest('button[data-action]');
    if (!button) return;
    const token = document.getElementById('admin-token').value.trim();
    if (!token) { result.textContent = 'Enter the admin token first.'; result.className = 'result err'; return; }
    let body;
    if (button.dataset.container) {
      const by = (document.getElementById('admin-by') || {}).value;
      const why = (document.getElementById('admin-why') || {}).value;
      if (!by || !why || !by.trim() || !why.trim()) { result.textContent = 'Enter your name and why first (both are recorded).'; result.className = 'result err'; return; }
      body = JSON.stringify({ container: button.dataset.container, station: button.dataset.station, by: by.trim(), why: why.trim(), abandon: button.dataset.abandon === 'true' });
    }
    button.disabled = true;
    result.textContent = button.textContent + '…'; result.className = 'result muted';
    try {
      const headers = { authorization: 'Bearer ' + token, accept: 'application/json' };
      if (body) headers['content-type'] = 'application/json';
      const res = await fetch('api/v1/admin/' + button.dataset.action, { method: 'POST', headers, body });
      const answer = await res.json().catch(() => ({}));
      result.textContent = (res.ok ? '' : 'Refused (HTTP ' + res.status + '): ') + (answer.message || answer.error || res.statusText);
      result.className = res.ok ? 'result' : 'result err';
    } catch (err) {
      result.textContent = 'Failed: ' + (err && err.message ? err.message : err); result.className = 'result err';
    } finally {
      button.disabled = false;
      refresh();
    }
  });
}
`;

const SCRIPT = browserScript(RENDER_FUNCTIONS, CLIENT);

const hash = (text: string) =>
  `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

/**
 * Content-Security-Policy of a page of the gateway (the health page, the station screen): only its
 * own inline `script` and `style` (by their SHA-256), requests to itself only, no forms, no frames.
 */
export function inlineOnlyCsp(script: string, style: string): string {
  return [
    "default-src 'none'",
    `script-src ${hash(script)}`,
    `style-src ${hash(style)}`,
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** Content-Security-Policy of the page: its own inline script and style only, requests to itself only. */
export const PAGE_CSP = inlineOnlyCsp(SCRIPT, STYLE);

/** The inline script's source (for the test that runs it in a bare context). */
export const PAGE_SCRIPT = SCRIPT;

const ADMIN_LABELS: Record<string, [string, string]> = {
  retry: [
    'Retry now',
    'Send waiting batches and poll statuses now, without waiting for the backoff',
  ],
  pause: ['Pause delivery', 'Stop uploading (intake goes on, scans wait in the buffer)'],
  resume: ['Resume delivery', 'Start uploading again'],
  replay: [
    'Replay failed scans',
    'Map every failed scan again with the current configuration and queue it',
  ],
};

/** The whole page for `status`. */
export function renderPage(status: GatewayStatus): string {
  const stateText = { ok: 'OK', degraded: 'Degraded', down: 'Down' }[status.state] ?? status.state;
  const actions = status.admin?.enabled ? status.admin.actions : [];
  const admin =
    actions.length === 0
      ? ''
      : `<div class="wrap"><section class="card admin"><h2>Actions</h2><form id="admin-form" autocomplete="off">` +
        `<input type="password" id="admin-token" placeholder="Admin token" aria-label="Admin token" autocomplete="off">` +
        (actions.includes('close-container')
          ? `<input id="admin-by" placeholder="Your name (recorded)" aria-label="Your name" autocomplete="off">` +
            `<input id="admin-why" placeholder="Why (recorded)" aria-label="Why" autocomplete="off">`
          : '') +
        actions
          .filter((a) => a !== 'close-container')
          .map((a) => {
            const [label, title] = ADMIN_LABELS[a] ?? [a, a];
            return `<button type="button" data-action="${esc(a)}" title="${esc(title)}"${a === 'resume' ? ' class="secondary"' : ''}>${esc(label)}</button>`;
          })
          .join('') +
        `<p id="admin-result" class="result muted" role="status"></p></form></section></div>`;
  return (
    `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<link rel="icon" href="data:,">
<title>${esc(stateText)} · scan-gateway · ${esc(status.site.id)}</title>
<style>${STYLE}</style>
</head>
<body>
<header class="top"><div class="in"><h1>scan-gateway</h1><span class="site">${esc(status.site.id)}</span><span class="muted">v${esc(status.version)}</span><span id="conn" class="conn">refreshes every ${REFRESH_MS / 1000} s</span></div></header>
<main id="main">${renderMain(status)}</main>
<div class="wrap"><section class="card lookup" id="item"><h2>What happened to an item?</h2><form id="lookup-form" autocomplete="off" data-tz="${esc(status.site.timezone)}" role="search">` +
    `<input type="search" id="lookup-ref" placeholder="Reference or its start, the label (01)…(21)…, a serial, SSCC, lot or GTIN" aria-label="Item reference, GS1 label text or an AI value" maxlength="512">` +
    `<button type="submit">Look up</button></form><div id="lookup-result" aria-live="polite"></div></section></div>
${admin}
<footer>Times in ${esc(status.site.timezone)}. Machine-readable: <a href="api/v1/status">api/v1/status</a> · <a href="metrics">metrics</a> · <a href="healthz">healthz</a> · <a href="readyz">readyz</a>.</footer>
<script>${SCRIPT}</script>
</body>
</html>
`
  );
}
