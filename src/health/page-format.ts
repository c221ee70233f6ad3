import { C0_NAMES } from '../format/printable.js';
import type { GatewayStatus } from './status.js';

/**
 * The building blocks of the health page and the station screen: escaping, printable reads, times,
 * durations, sizes and counts for people, and the HTML pieces every card is made of (pills, tables,
 * facts, cards). Shipped to the browser by their source like every render function, so the rule of
 * page-render.ts holds here: nothing but arguments, other shipped functions and standard built-ins.
 *
 * Everything that comes from outside (reads, reasons, ids, error messages) goes through `esc`.
 */

/** HTML-escapes any value for text and for double- or single-quoted attributes. */
export function esc(value: unknown): string {
  return String(value ?? '').replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c,
  );
}

/** The names of the control bytes 0x00–0x1f: printable.ts's, so the page names a byte as the CLI and the logs do. */
const CONTROL_NAMES: readonly string[] = C0_NAMES;

/** Printable form of a reference or raw read: control characters as `<GS>`-style names (the rule of src/format/printable.ts). */
export function shown(text: unknown): string {
  // eslint-disable-next-line no-control-regex -- control characters are exactly what this makes visible
  return String(text ?? '').replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x20 ? `<${CONTROL_NAMES[code]}>` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

// The pages ship `shown` as its source text (`toString()`: the health page's RENDER_FUNCTIONS, the
// station screen's script), where this module's constant does not exist. So that source carries
// the names themselves, as JSON written from printable.ts's table: one table, in every page.
Object.defineProperty(shown, 'toString', {
  value: () =>
    Function.prototype.toString
      .call(shown)
      .replace(/\bCONTROL_NAMES\b/g, () => JSON.stringify(CONTROL_NAMES)),
});

/** Escaped printable text with the `<GS>`-style markers set apart, so a separator is visible at a glance. */
export function rawHtml(text: unknown): string {
  return esc(shown(text)).replace(/&lt;([A-Z]{2,3}\d?)&gt;/g, '<span class="ctl">$1</span>');
}

/** `yyyy-MM-dd HH:mm:ss` in `timeZone` (the site's), or `—`. */
export function fmtTime(iso: unknown, timeZone: string): string {
  if (iso === undefined || iso === null || iso === '') return '—';
  const d = new Date(iso as string);
  if (Number.isNaN(d.getTime())) return esc(iso);
  try {
    return new Intl.DateTimeFormat('sv-SE', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hour12: false,
    }).format(d);
  } catch {
    return d.toISOString();
  }
}

/** A duration for people: `45 s`, `12 min`, `3 h 20 min`, `4 d 2 h`. */
export function fmtDuration(ms: unknown): string {
  const n = Number(ms);
  if (ms === null || ms === undefined || !Number.isFinite(n)) return '—';
  const s = Math.max(0, Math.round(n / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h} h${m % 60 ? ` ${m % 60} min` : ''}`;
  return `${Math.floor(h / 24)} d${h % 24 ? ` ${h % 24} h` : ''}`;
}

/** `1.2 MiB`-style sizes. */
export function fmtBytes(bytes: unknown): string {
  const n = Number(bytes);
  if (bytes === null || bytes === undefined || !Number.isFinite(n)) return '—';
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

/** A time cell: site-zone time (date left out when it is today) with the age beside it. */
export function timeHtml(iso: unknown, nowMs: number, timeZone: string, future?: boolean): string {
  if (iso === undefined || iso === null || iso === '') return '<span class="muted">—</span>';
  const t = new Date(iso as string).getTime();
  if (Number.isNaN(t)) return esc(iso);
  const full = fmtTime(iso, timeZone);
  const today = fmtTime(new Date(nowMs).toISOString(), timeZone).slice(0, 10);
  const text = full.startsWith(today) ? full.slice(11) : full;
  const delta = future ? t - nowMs : nowMs - t;
  const rel = future
    ? delta > 0
      ? `in ${fmtDuration(delta)}`
      : 'due'
    : `${fmtDuration(delta)} ago`;
  return `<time datetime="${esc(new Date(t).toISOString())}" title="${esc(full)} (${esc(timeZone)})">${esc(text)}</time> <span class="ago">${esc(rel)}</span>`;
}

/** A coloured state label; the colour follows what the state means for an operator. */
export function pill(state: unknown): string {
  const s = String(state ?? 'unknown');
  const good = ['ok', 'up', 'closed', 'Success', 'running', 'yes', 'flowing'];
  const warn = [
    'degraded',
    'starting',
    'connecting',
    'waiting for reader',
    'paused',
    'half-open',
    'ready',
    'uploading',
    'presigned',
    'uploaded',
    'Received',
    'InProgress',
    'HasFailures',
    'stopping',
    'open session',
    'trying again',
  ];
  const bad = ['down', 'open', 'Failed', 'held', 'NotFound', 'stopped', 'failed', 'rejected'];
  const cls = good.includes(s)
    ? 'good'
    : warn.includes(s)
      ? 'warn'
      : bad.includes(s)
        ? 'bad'
        : 'neutral';
  return `<span class="pill ${cls}">${esc(s)}</span>`;
}

/** A table; `rows` are already-escaped HTML cells. */
export function tableHtml(
  headers: string[],
  rows: string[][],
  empty: string,
  numeric?: number[],
): string {
  if (rows.length === 0) return `<p class="muted empty">${esc(empty)}</p>`;
  const num = numeric ?? [];
  const th = headers
    .map((h, i) => `<th${num.includes(i) ? ' class="num"' : ''}>${esc(h)}</th>`)
    .join('');
  // data-label: on a phone each row becomes a small card, every cell labelled with its column.
  const body = rows
    .map(
      (r) =>
        `<tr>${r.map((c, i) => `<td data-label="${esc(headers[i])}"${num.includes(i) ? ' class="num"' : ''}>${c}</td>`).join('')}</tr>`,
    )
    .join('');
  return `<div class="scroll"><table><thead><tr>${th}</tr></thead><tbody>${body}</tbody></table></div>`;
}

/** Where a read came from (stored as JSON such as `{"file":"a.csv","line":3}`), as `file a.csv · line 3`. */
export function originText(origin: unknown): string {
  if (origin === null || origin === undefined || origin === '') return '';
  let value: unknown = origin;
  if (typeof origin === 'string' && origin.startsWith('{')) {
    try {
      value = JSON.parse(origin);
    } catch {
      value = origin;
    }
  }
  // Content hashes identify a file for the gateway, not for a person reading the page.
  if (value && typeof value === 'object')
    return Object.entries(value as object)
      .filter(([k]) => !/sha|hash/i.test(k))
      .map(([k, v]) => `${k} ${String(v)}`)
      .join(' · ');
  return String(value);
}

/** A definition list of label → HTML. */
export function factsHtml(facts: [string, string][]): string {
  return `<dl class="facts">${facts.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${v}</dd>`).join('')}</dl>`;
}

/**
 * Any JSON value, escaped, for fields the page has no special layout for, as readable text: instants
 * in the site zone, booleans as yes/no, lists of plain values as lists, objects as nested labelled
 * facts, lists of objects as tables (never raw JSON). Nesting deeper than three levels is cut
 * (`…`): a status is a few levels deep, and a page must not grow with a hostile value.
 */
export function valueHtml(v: unknown, timeZone?: string, depth?: number): string {
  const level = depth ?? 0;
  if (v === null || v === undefined || v === '') return '<span class="muted">—</span>';
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (Array.isArray(v)) {
    if (v.length === 0) return '<span class="muted">none</span>';
    if (v.every((x) => typeof x !== 'object' || x === null))
      return v.map((x) => valueHtml(x, timeZone, level + 1)).join(', ');
    if (level >= 3) return '<span class="muted">…</span>';
    return genericTableHtml(v, 'None.', timeZone, level + 1);
  }
  if (typeof v === 'object') {
    const entries = Object.entries(v as object);
    if (entries.length === 0) return '<span class="muted">none</span>';
    if (level >= 3) return '<span class="muted">…</span>';
    return factsHtml(entries.map(([k, x]) => [titleOf(k), valueHtml(x, timeZone, level + 1)]));
  }
  if (typeof v === 'string' && timeZone && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(v))
    return esc(fmtTime(v, timeZone));
  if (typeof v === 'number') return fmtCount(v);
  return esc(shown(v));
}

/** Catalogue text (Markdown) as HTML: `code` as code, *words* emphasised, the rest escaped. */
export function mdHtml(text: unknown): string {
  return esc(text)
    .replace(/`([^`]+)`/g, '<code>$1</code>')
    .replace(/\*([^*]+)\*/g, '<em>$1</em>');
}

/** A technical message (an errno, an HTTP answer) folded away: for IT, not in the way of the sentence. */
export function techHtml(detail: unknown): string {
  if (detail === undefined || detail === null || detail === '') return '';
  return `<details class="tech"><summary>technical detail</summary><code>${esc(shown(detail))}</code></details>`;
}

/**
 * A failure reason for people: an HTTP exchange the client describes (`POST /api/… answered HTTP 400
 * (Bad Request: …)`, a held batch's reason) becomes the service's refusal in words, the exchange
 * folded away; any other reason (the service's own, such as `Invalid DCP`) is shown as it is.
 */
export function reasonHtml(reason: unknown): string {
  const text = String(reason ?? '');
  const m = /^(?:GET|POST|PUT|PATCH|DELETE) \S+ answered HTTP (\d{3})(?: \(([\s\S]*)\))?$/.exec(
    text,
  );
  if (!m) return `<span class="reason">${esc(text)}</span>`;
  return `<span class="reason">The service refused the upload (HTTP ${esc(m[1])})${m[2] ? `: ${esc(m[2])}` : ''}</span>${techHtml(text)}`;
}

/** One health problem: the sentence, its code, what to do, since when, and the technical detail folded away. */
export function problemHtml(
  p: {
    code?: unknown;
    severity?: unknown;
    sentence?: unknown;
    hint?: unknown;
    since?: unknown;
    detail?: unknown;
  },
  t: (iso: unknown) => string,
): string {
  return (
    `<li class="problem ${esc(p.severity)}"><span class="sentence">${esc(p.sentence)}</span> <code class="pcode">${esc(p.code)}</code>` +
    `${p.since ? ` <span class="since">since ${t(p.since)}</span>` : ''}` +
    `${p.hint ? `<div class="hint"><strong>What to do:</strong> ${mdHtml(p.hint)}</div>` : ''}${techHtml(p.detail)}</li>`
  );
}

/** `containerSessions` → `Container sessions`, for fields the page shows generically. */
export function titleOf(key: string): string {
  const words = key
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/[_-]+/g, ' ')
    .toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** Whole numbers with thousands separators: 2,000,000. */
export function fmtCount(n: unknown): string {
  const v = Number(n);
  return Number.isFinite(v) ? v.toLocaleString('en-US') : esc(n);
}

/** A list of objects as a table with the union of their keys (cells as readable values, see {@link valueHtml}). */
export function genericTableHtml(
  items: unknown[],
  empty: string,
  timeZone?: string,
  depth?: number,
): string {
  const objects = items.filter(
    (i): i is Record<string, unknown> => typeof i === 'object' && i !== null,
  );
  const keys: string[] = [];
  for (const o of objects) for (const k of Object.keys(o)) if (!keys.includes(k)) keys.push(k);
  return tableHtml(
    keys.map(titleOf),
    objects.map((o) => keys.map((k) => valueHtml(o[k], timeZone, (depth ?? 0) + 1))),
    empty,
  );
}

/** A titled card of the page; `body` is already-escaped HTML. */
export function cardHtml(title: string, body: string, cls?: string): string {
  return `<section class="card${cls ? ` ${cls}` : ''}"><h2>${esc(title)}</h2>${body}</section>`;
}

/** The time-cell renderer of a status: its site zone, ages counted from when the status was put together. */
export function statusClock(s: GatewayStatus): (iso: unknown, future?: boolean) => string {
  const tz = s.site?.timezone ?? 'UTC';
  const now = s.generatedAt ? new Date(s.generatedAt).getTime() : Date.now();
  return (iso: unknown, future?: boolean) => timeHtml(iso, now, tz, future);
}

/**
 * The buffer's scan counts with one meaning everywhere (the tiles and the buffer card): waiting = on
 * its way (not in a batch yet, or in a batch the service has not finished); held = refused as a
 * batch, kept; not yet delivered = both.
 */
export function bufferCounts(b: GatewayStatus['buffer']): {
  waiting: number;
  held: number;
  inBatch: number;
  notDelivered: number;
} {
  const scans = b.scans ?? {};
  const waiting = Number(b.undeliveredScans ?? 0);
  const held = Number(b.heldScans ?? scans.held ?? 0);
  const inBatch = Math.max(0, waiting - Number(b.pendingScans ?? 0));
  return { waiting, held, inBatch, notDelivered: waiting + held };
}
