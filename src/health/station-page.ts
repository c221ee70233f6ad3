import { inlineOnlyCsp } from './page.js';
import { esc, fmtTime, rawHtml, shown, stationMain } from './page-render.js';
import { browserScript } from './browser-script.js';

/**
 * The station screen at `/station/<dcpKey>`: a page for a monitor or tablet beside a
 * scanner. The server renders the first view from a {@link StationSnapshot}; the inline script
 * then follows `/station/<dcpKey>/events` (Server-Sent Events, src/health/station.ts) and renders
 * again with the same function ({@link stationMain}), which therefore uses nothing but its
 * argument and the page-render helpers inlined with it. Like the health page: no outside script,
 * style or font, and a Content-Security-Policy that allows only this page's own script and style.
 *
 * Sizes are for reading at 2 m on a 1024×600 panel (and on a phone): the last scan's reference
 * and its verdict at 48 px or more, the counts at 36 px or more (the browser test measures them).
 */

/** One read as the screen shows it. */
export interface StationReadView {
  id: number;
  at: string;
  /** taken (a scan), refused (rejected), duplicate, noRead. */
  verdict: 'taken' | 'refused' | 'duplicate' | 'noRead';
  /** The reference of a taken read, else the read as received (printable). */
  text: string;
  inputId: string;
  /** The input's name for people (`name` in its configuration), when it has one. */
  inputName?: string;
  /** For a read not taken: plain words and what to do; the technical reason apart. */
  words?: string;
  hint?: string;
  reason?: string;
  /** The scan's state, for a taken read (pending, batched, delivered, failed, held). */
  scanState?: string | null;
}

/** Everything the screen shows; the `snapshot` event carries it whole. */
export interface StationSnapshot {
  site: string;
  timezone: string;
  dcp: { key: string; kind: string };
  shift: { name: string; startsAt: string; endsAt: string };
  /** Reads of the current shift by verdict. */
  counts: { taken: number; refused: number; duplicate: number; noRead: number };
  /** The last 20 reads, newest first. */
  last: StationReadView[];
  /** The containers open at the station now: "MOD-L2-000124 · 3 of 12". */
  containers?: StationContainer[];
  delivery: StationDelivery;
  generatedAt: string;
}

/** A container open at the station (the `containers` event carries the list). */
export interface StationContainer {
  /** The container's name in the configuration (`module`). */
  name: string;
  /** Its label: the parent its members get. */
  parent: string;
  members: number;
  /** `members` of the configuration, when it holds a fixed count. */
  expected?: number;
  /** The input (scanner) it is kept for, when kept per input. */
  inputId?: string;
}

/** Whether scans get through to the service now (the `delivery` event). */
export interface StationDelivery {
  /** Uploads fail (circuit open or failing) while scans wait: the banner shows. */
  stalled: boolean;
  paused: boolean;
  /** Scans waiting for delivery. */
  waiting: number;
  /** Since when uploads fail, when known. */
  since?: string;
}

/** How many reads the list shows. */
export const STATION_LAST = 20;

const STYLE = `
:root{--bg:#0f1318;--card:#171c23;--fg:#f1f4f8;--muted:#a3adb9;--good:#3fd07a;--good-bg:#0f3a22;--bad:#ff6b5e;--bad-bg:#4a1510;--warn:#ffc94a;--warn-bg:#3d300b}
*{box-sizing:border-box}
html,body{margin:0;height:100%}
body{background:var(--bg);color:var(--fg);font:20px/1.3 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans",sans-serif;display:flex;flex-direction:column}
header{display:flex;align-items:baseline;gap:1rem;padding:.4rem .8rem;background:var(--card)}
header h1{font-size:28px;margin:0}header .site{color:var(--muted)}header .conn{margin-left:auto;font-size:16px;color:var(--muted)}header .conn.bad{color:var(--bad);font-weight:700}
main{flex:1;display:flex;flex-direction:column;gap:.5rem;padding:.5rem;min-height:0}
.stalled{background:var(--warn-bg);color:var(--warn);border:3px solid var(--warn);border-radius:10px;padding:.5rem .8rem;font-size:28px;font-weight:700}
.grid{display:grid;grid-template-columns:2fr 1fr;gap:.5rem}
.hero{border-radius:14px;padding:.6rem 1rem;border:4px solid transparent;min-width:0}
.hero.taken{background:var(--good-bg);border-color:var(--good)}.hero.taken .verdict{color:var(--good)}
.hero.refused{background:var(--bad-bg);border-color:var(--bad)}.hero.refused .verdict{color:var(--bad)}
.hero.duplicate,.hero.noRead,.hero.idle{background:var(--card);border-color:var(--muted)}
.verdict{font-size:56px;font-weight:800;letter-spacing:.02em;line-height:1.05}
.ref{font-size:64px;font-weight:700;font-family:ui-monospace,Menlo,Consolas,monospace;overflow-wrap:anywhere;line-height:1.1}
.words{font-size:36px;font-weight:700;margin-top:.2rem}
.hint{font-size:28px;margin-top:.2rem}
.meta{font-size:20px;color:var(--muted);margin-top:.3rem}.tech{font-size:16px}
.containers{display:flex;flex-wrap:wrap;gap:.6rem;margin:0 0 .8rem}.box{background:var(--card);border-radius:14px;padding:.5rem 1rem;display:flex;align-items:baseline;gap:1rem;flex-wrap:wrap}.box .name{font-size:24px;opacity:.8}.box .label{font-size:36px}.box .fill{font-size:48px;font-variant-numeric:tabular-nums}.box.short .fill{color:#ffcc4d}
.counts{background:var(--card);border-radius:14px;padding:.6rem .8rem;display:flex;flex-direction:column;gap:.3rem}
.shift{font-size:22px;color:var(--muted)}
.count{display:flex;align-items:baseline;gap:.6rem}.count b{font-size:48px;font-variant-numeric:tabular-nums;min-width:2.5ch}.count span{font-size:24px}
.count.taken b{color:var(--good)}.count.refused b{color:var(--bad)}.count.other b{color:var(--muted)}
.list{background:var(--card);border-radius:14px;padding:.4rem .8rem;min-height:0;overflow:auto;flex:1}
.list h2{font-size:20px;margin:.1rem 0 .3rem;color:var(--muted)}
ol{list-style:none;margin:0;padding:0}
li{display:grid;grid-template-columns:8.5ch 7ch minmax(0,1fr) minmax(0,1.2fr);gap:.6rem;align-items:baseline;padding:.2rem 0;border-top:1px solid #2a313a;font-size:22px}
li .v{font-weight:700}li.taken .v{color:var(--good)}li.refused .v{color:var(--bad)}li .why{color:var(--muted);font-size:20px}
code{font-family:ui-monospace,Menlo,Consolas,monospace;overflow-wrap:anywhere}
.ctl{font-size:.7em;padding:0 .2em;border-radius:3px;background:#3b4654}
@media (max-width:700px){.grid{grid-template-columns:1fr}.verdict{font-size:48px}.ref{font-size:48px}.words{font-size:30px}.hint{font-size:24px}.stalled{font-size:24px}
li{grid-template-columns:8.5ch 1fr;font-size:20px}li code,li .why{grid-column:1/-1}}
`;

/** The browser side: follows the event stream and renders again. Plain ES2020, no framework. */
const CLIENT = `
const mainEl = document.getElementById('main');
const conn = document.getElementById('conn');
let state = JSON.parse(document.getElementById('snapshot').textContent);
function draw() { mainEl.innerHTML = stationMain(state); }
function setConn(text, bad) { conn.textContent = text; conn.className = bad ? 'conn bad' : 'conn'; }
const source = new EventSource(location.pathname.replace(/\\/$/, '') + '/events');
source.addEventListener('snapshot', (e) => { state = JSON.parse(e.data); draw(); setConn('live', false); });
source.addEventListener('read', (e) => {
  const r = JSON.parse(e.data);
  if (state.last.some((x) => x.id === r.id)) return;
  state.last = [r].concat(state.last).slice(0, ${STATION_LAST});
  if (r.at >= state.shift.startsAt && state.counts[r.verdict] !== undefined) state.counts[r.verdict]++;
  draw();
});
source.addEventListener('delivery', (e) => { state.delivery = JSON.parse(e.data); draw(); });
source.addEventListener('containers', (e) => { state.containers = JSON.parse(e.data); draw(); });
source.addEventListener('open', () => setConn('live', false));
source.addEventListener('error', () => setConn('gateway not answering; trying again…', true));
`;

/** The functions the browser needs (stationMain and the page-render helpers it calls), inlined by their source. */
const FULL_SCRIPT = browserScript([esc, shown, rawHtml, fmtTime, stationMain], CLIENT);

/** The inline script's source (for a test that runs it in a bare context). */
export const STATION_SCRIPT = FULL_SCRIPT;

/** Content-Security-Policy of the station screen: its own inline script and style, requests to itself only. */
export const STATION_CSP = inlineOnlyCsp(FULL_SCRIPT, STYLE);

/** JSON inside `<script type="application/json">`: `<` escaped so no text can end the element. */
function jsonInScript(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c');
}

/** The whole screen for `s`. */
export function renderStationPage(s: StationSnapshot): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="dark">
<link rel="icon" href="data:,">
<title>${esc(s.dcp.key)} · station · scan-gateway</title>
<style>${STYLE}</style>
</head>
<body>
<header><h1>${esc(s.dcp.key)}</h1><span class="site">${esc(s.dcp.kind)} · ${esc(s.site)}</span><span id="conn" class="conn">connecting…</span></header>
<main id="main">${stationMain(s)}</main>
<script type="application/json" id="snapshot">${jsonInScript(s)}</script>
<script>${FULL_SCRIPT}</script>
</body>
</html>
`;
}

/** A station that is not configured: the DCPs that are, as links. */
export function renderUnknownStation(dcpKey: string, known: readonly string[]): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Unknown station</title><style>${STYLE}</style></head>
<body><main><p class="words">No DCP ${esc(dcpKey)} in this gateway's configuration.</p><p>Stations: ${known.map((k) => `<a href="${esc(encodeURIComponent(k))}">${esc(k)}</a>`).join(' · ')}</p></main></body></html>
`;
}
