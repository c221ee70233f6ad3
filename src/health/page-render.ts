import { C0_NAMES } from '../format/printable.js';
import type { GatewayStatus } from './status.js';
import type { StationSnapshot } from './station-page.js';

/**
 * The health page's content as an HTML string, rendered from a {@link GatewayStatus}. The same
 * functions run on the server (first paint) and in the browser (refresh from `/api/v1/status`):
 * `page.ts` puts their source into the page's inline script, so each function here must use
 * nothing but its arguments, the functions listed in {@link RENDER_FUNCTIONS} and the standard
 * built-ins (no imports, no module constants; `shown` alone reads the control-byte names, and its
 * shipped source carries them). A unit test runs the page's script in a bare context to hold that line.
 *
 * Everything that comes from outside (reads, reasons, ids, error messages) goes through `esc`.
 */

/** HTML-escapes any value for text and for double- or single-quoted attributes. */
export function esc(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);
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
  value: () => Function.prototype.toString.call(shown).replace(/\bCONTROL_NAMES\b/g, () => JSON.stringify(CONTROL_NAMES)),
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
  const rel = future ? (delta > 0 ? `in ${fmtDuration(delta)}` : 'due') : `${fmtDuration(delta)} ago`;
  return `<time datetime="${esc(new Date(t).toISOString())}" title="${esc(full)} (${esc(timeZone)})">${esc(text)}</time> <span class="ago">${esc(rel)}</span>`;
}

/** A coloured state label; the colour follows what the state means for an operator. */
export function pill(state: unknown): string {
  const s = String(state ?? 'unknown');
  const good = ['ok', 'up', 'closed', 'Success', 'running', 'yes', 'flowing'];
  const warn = ['degraded', 'starting', 'connecting', 'paused', 'half-open', 'ready', 'uploading', 'presigned', 'uploaded', 'Received', 'InProgress', 'HasFailures', 'stopping', 'open session', 'trying again'];
  const bad = ['down', 'open', 'Failed', 'held', 'NotFound', 'stopped', 'failed', 'rejected'];
  const cls = good.includes(s) ? 'good' : warn.includes(s) ? 'warn' : bad.includes(s) ? 'bad' : 'neutral';
  return `<span class="pill ${cls}">${esc(s)}</span>`;
}

/** A table; `rows` are already-escaped HTML cells. */
export function tableHtml(headers: string[], rows: string[][], empty: string, numeric?: number[]): string {
  if (rows.length === 0) return `<p class="muted empty">${esc(empty)}</p>`;
  const num = numeric ?? [];
  const th = headers.map((h, i) => `<th${num.includes(i) ? ' class="num"' : ''}>${esc(h)}</th>`).join('');
  // data-label: on a phone each row becomes a small card, every cell labelled with its column.
  const body = rows
    .map((r) => `<tr>${r.map((c, i) => `<td data-label="${esc(headers[i])}"${num.includes(i) ? ' class="num"' : ''}>${c}</td>`).join('')}</tr>`)
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
  if (value && typeof value === 'object') return Object.entries(value as object).filter(([k]) => !/sha|hash/i.test(k)).map(([k, v]) => `${k} ${String(v)}`).join(' · ');
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
    if (v.every((x) => typeof x !== 'object' || x === null)) return v.map((x) => valueHtml(x, timeZone, level + 1)).join(', ');
    if (level >= 3) return '<span class="muted">…</span>';
    return genericTableHtml(v, 'None.', timeZone, level + 1);
  }
  if (typeof v === 'object') {
    const entries = Object.entries(v as object);
    if (entries.length === 0) return '<span class="muted">none</span>';
    if (level >= 3) return '<span class="muted">…</span>';
    return factsHtml(entries.map(([k, x]) => [titleOf(k), valueHtml(x, timeZone, level + 1)]));
  }
  if (typeof v === 'string' && timeZone && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(v)) return esc(fmtTime(v, timeZone));
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
  const m = /^(?:GET|POST|PUT|PATCH|DELETE) \S+ answered HTTP (\d{3})(?: \(([\s\S]*)\))?$/.exec(text);
  if (!m) return `<span class="reason">${esc(text)}</span>`;
  return `<span class="reason">The service refused the upload (HTTP ${esc(m[1])})${m[2] ? `: ${esc(m[2])}` : ''}</span>${techHtml(text)}`;
}

/** One health problem: the sentence, its code, what to do, since when, and the technical detail folded away. */
export function problemHtml(p: { code?: unknown; severity?: unknown; sentence?: unknown; hint?: unknown; since?: unknown; detail?: unknown }, t: (iso: unknown) => string): string {
  return (
    `<li class="problem ${esc(p.severity)}"><span class="sentence">${esc(p.sentence)}</span> <code class="pcode">${esc(p.code)}</code>` +
    `${p.since ? ` <span class="since">since ${t(p.since)}</span>` : ''}` +
    `${p.hint ? `<div class="hint"><strong>What to do:</strong> ${mdHtml(p.hint)}</div>` : ''}${techHtml(p.detail)}</li>`
  );
}

/** `containerSessions` → `Container sessions`, for fields the page shows generically. */
export function titleOf(key: string): string {
  const words = key.replace(/([a-z0-9])([A-Z])/g, '$1 $2').replace(/[_-]+/g, ' ').toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** Whole numbers with thousands separators: 2,000,000. */
export function fmtCount(n: unknown): string {
  const v = Number(n);
  return Number.isFinite(v) ? v.toLocaleString('en-US') : esc(n);
}

/** A list of objects as a table with the union of their keys (cells as readable values, see {@link valueHtml}). */
export function genericTableHtml(items: unknown[], empty: string, timeZone?: string, depth?: number): string {
  const objects = items.filter((i): i is Record<string, unknown> => typeof i === 'object' && i !== null);
  const keys: string[] = [];
  for (const o of objects) for (const k of Object.keys(o)) if (!keys.includes(k)) keys.push(k);
  return tableHtml(keys.map(titleOf), objects.map((o) => keys.map((k) => valueHtml(o[k], timeZone, (depth ?? 0) + 1))), empty);
}

/** The last accepted reload (`config.lastReload`): when, and what waits for a restart. */
export function reloadFacts(reload: unknown, t: (iso: unknown) => string): [string, string][] {
  if (!reload || typeof reload !== 'object') return [];
  const r = reload as { at?: string; needsRestart?: unknown; inputErrors?: unknown };
  const out: [string, string][] = [['Last reload', t(r.at)]];
  if (Array.isArray(r.needsRestart) && r.needsRestart.length > 0) {
    out.push(['Waits for a restart', `<span class="err">${r.needsRestart.map((x) => esc(x)).join(', ')}</span>`]);
  }
  if (Array.isArray(r.inputErrors) && r.inputErrors.length > 0) out.push(['Inputs not restarted', valueHtml(r.inputErrors, undefined, 1)]);
  return out;
}

/** The time-cell renderer of a status: its site zone, ages counted from when the status was put together. */
export function statusClock(s: GatewayStatus): (iso: unknown, future?: boolean) => string {
  const tz = s.site?.timezone ?? 'UTC';
  const now = s.generatedAt ? new Date(s.generatedAt).getTime() : Date.now();
  return (iso: unknown, future?: boolean) => timeHtml(iso, now, tz, future);
}

/** A titled card of the page; `body` is already-escaped HTML. */
export function cardHtml(title: string, body: string, cls?: string): string {
  return `<section class="card${cls ? ` ${cls}` : ''}"><h2>${esc(title)}</h2>${body}</section>`;
}

/**
 * The buffer's scan counts with one meaning everywhere (the tiles and the buffer card): waiting = on
 * its way (not in a batch yet, or in a batch the service has not finished); held = refused as a
 * batch, kept; not yet delivered = both.
 */
export function bufferCounts(b: GatewayStatus['buffer']): { waiting: number; held: number; inBatch: number; notDelivered: number } {
  const scans = b.scans ?? {};
  const waiting = Number(b.undeliveredScans ?? 0);
  const held = Number(b.heldScans ?? scans.held ?? 0);
  const inBatch = Math.max(0, waiting - Number(b.pendingScans ?? 0));
  return { waiting, held, inBatch, notDelivered: waiting + held };
}

/** The state banner: the state, one line on what it means, and each health problem. */
export function bannerHtml(s: GatewayStatus): string {
  const t = statusClock(s);
  const stateText = { ok: 'OK', degraded: 'Degraded', down: 'Down' }[s.state] ?? String(s.state);
  // Each problem as a sentence, its code and what to do; a status without them (older gateway) shows its reasons.
  const found = Array.isArray(s.healthProblems) ? s.healthProblems : (s.reasons ?? []).map((r) => ({ sentence: r, severity: s.state }));
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
      notDelivered === 0 ? 'nothing waiting, nothing held' : `${fmtCount(waiting)} waiting for delivery · ${fmtCount(held)} held`,
      held > 0 ? 'bad' : '',
    ],
    ['Oldest waiting', oldest === null ? '—' : esc(fmtDuration(oldest)), 'age of the oldest scan waiting for delivery', oldest !== null && oldest > 300_000 ? 'warn' : ''],
    ['Delivered', fmtCount(scans.delivered ?? 0), 'scans the service processed', ''],
    ['Refused by the service', fmtCount(refusedUpstream), refusedUpstream ? 'single scans: see below' : 'single scans refused upstream', refusedUpstream ? 'bad' : ''],
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
    ['Last upload', d.lastSuccessAt ? t(d.lastSuccessAt) : '<span class="muted">none yet</span>', '', ''],
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
    ['Input', 'Type', 'State', 'Last read', 'Reads', 'Scans', 'No-reads', 'Rejected', 'Duplicates', 'Source'],
    (s.inputs ?? []).map((i) => {
      const c = i.counters;
      const err = i.lastError ? `${i.lastErrorAt ? ` <span class="ago">since ${t(i.lastErrorAt)}</span>` : ''}${techHtml(i.lastError)}` : '';
      const p = i.progress;
      const reading = p ? `<div class="muted">reading <code>${esc(p.file)}</code>: ${fmtCount(p.rows)} rows so far (file ${esc(fmtBytes(p.bytes))})</div>` : '';
      return [
        `<strong>${esc(i.id)}</strong>`,
        esc(i.type),
        pill(i.state) + err + reading,
        t(c?.lastReadAt),
        fmtCount(c?.reads ?? 0),
        fmtCount(c?.scans ?? 0),
        fmtCount(c?.noReads ?? 0),
        fmtCount(c?.rejections ?? 0),
        fmtCount(c?.duplicates ?? 0) + (c?.redelivered ? `<div class="tile-s">+ ${fmtCount(c.redelivered)} MQTT resends recognised</div>` : ''),
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
    ? ([['Quota', `${esc(fmtBytes(used))} of ${esc(fmtBytes(b.quotaBytes))} (${esc(Math.round((used / b.quotaBytes) * 100))} %)${b.disk?.derivedQuotaBytes !== undefined ? ' <span class="muted">(derived from the disk: buffer.maxBytes is not set)</span>' : ''}`]] as [string, string][])
    : [];
  const buffer = factsHtml([
    ['Not yet delivered', `${fmtCount(notDelivered)}${b.quotaScans ? ` <span class="muted">(the quota allows ${fmtCount(b.quotaScans)} waiting)</span>` : ''}`],
    ['Waiting for delivery', `${fmtCount(waiting)} <span class="muted">(${fmtCount(b.pendingScans ?? 0)} not yet in a batch · ${fmtCount(inBatch)} in a batch being sent or processed)</span>`],
    ['Held', held ? `<span class="err">${fmtCount(held)}</span> <span class="muted">(the service refused their batch; replay after fixing the cause)</span>` : '0'],
    ['Oldest waiting', b.oldestPendingAgeMs === null || b.oldestPendingAgeMs === undefined ? '—' : esc(fmtDuration(b.oldestPendingAgeMs))],
    ['Size on disk', esc(fmtBytes(b.fileBytes))],
    ...(b.disk
      ? ([
          [
            'Disk',
            `${b.disk.freeBytes !== undefined ? `${esc(fmtBytes(b.disk.freeBytes))} free` : '—'} <span class="muted">(the audit yields below ${esc(fmtBytes(b.disk.lowFreeBytes))}; reserve ${b.disk.reserveReleased ? '<span class="err">released</span>' : esc(fmtBytes(b.disk.reserveBytes))})</span>` +
              (b.disk.prunedEarlyScans > 0 ? `<div class="tile-s">${fmtCount(b.disk.prunedEarlyScans)} delivered scans pruned before the end of the audit period${b.disk.lastEarlyPrune ? `, last ${t(b.disk.lastEarlyPrune.at)}` : ''}</div>` : '') +
              (b.disk.vacuumPending ? `<div class="muted">${esc(b.disk.vacuumPending)}</div>` : '') +
              (b.disk.quotaTooLarge ? `<div class="err">${esc(b.disk.quotaTooLarge)}</div>` : ''),
          ],
        ] as [string, string][])
      : []),
    ...quota,
    ['Intake', b.intakePaused ? pill('paused') + ' back-pressure: inputs that can wait are not reading' : pill('running')],
    ['Scans by state', Object.keys(scans).length ? Object.entries(scans).map(([k, v]) => `${esc(k)} ${fmtCount(v)}`).join(' · ') : '—'],
    ...(b.lastCommitError ? ([['Storing reads', `<span class="err">fails</span> since ${t(b.lastCommitError.at)}${techHtml(b.lastCommitError.message)}`]] as [string, string][]) : []),
    ['File', `<code>${esc(b.path)}</code>`],
  ]);
  return cardHtml('Buffer', buffer);
}

/** The Delivery card: whether uploads flow, the last success and error, status checks, the access token. */
export function deliveryCard(s: GatewayStatus): string {
  const t = statusClock(s);
  const d = s.delivery ?? {};
  const token = d.token;
  const checks = d.statusChecks as { consecutiveFailures?: number; lastError?: { message?: string; at?: string; code?: string } } | undefined;
  const uploads =
    d.circuit === 'open'
      ? `${pill('stopped')} after ${esc(d.consecutiveFailures ?? 0)} failures in a row${d.nextRetryAt ? `; next try ${t(d.nextRetryAt, true)}` : ''}`
      : d.circuit === 'half-open'
        ? `${pill('trying again')} after ${esc(d.consecutiveFailures ?? 0)} failures in a row`
        : d.circuit === 'closed'
          ? `${pill('flowing')}${d.consecutiveFailures ? ` (${esc(d.consecutiveFailures)} failed, retried)` : ''}`
          : '—';
  const lastError = d.lastError as { message?: string; at?: string; batchId?: number; code?: string } | undefined;
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
    ['Access token', token ? `${token.expiresAt ? `expires ${t(token.expiresAt, true)}` : 'none held'} · ${esc(token.refreshes)} obtained` : '—'],
    ['Possible duplicates', fmtCount(d.possibleDuplicates ?? 0)],
  ]);
  return cardHtml('Delivery', delivery);
}

/** The Last batches card: each batch's request id, size and state (the service's, once it answered). */
export function batchesCard(s: GatewayStatus): string {
  const t = statusClock(s);
  const batches = tableHtml(
    ['Batch', 'Request id', 'Mode', 'Scans', 'Bytes', 'State', 'Failures', 'Created'],
    (s.batches ?? []).map((x) => {
      const state = x.upstreamState && (x.state === 'done' || x.state === 'uploaded') ? x.upstreamState : x.state;
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
  return Array.isArray(s.sessions) ? cardHtml('Open container sessions', genericTableHtml(s.sessions, 'No open sessions.', tz), 'wide') : '';
}

/** A card for each status field the page has no layout for (parts may add fields), shown generically. */
export function extraCards(s: GatewayStatus): string {
  const tz = s.site?.timezone ?? 'UTC';
  const known = ['state', 'reasons', 'healthProblems', 'recent', 'phase', 'generatedAt', 'site', 'version', 'startedAt', 'uptimeSec', 'config', 'buffer', 'delivery', 'inputs', 'batches', 'problems', 'sessions', 'admin'];
  return Object.keys(s)
    .filter((k) => !known.includes(k) && s[k] !== null && typeof s[k] === 'object')
    .map((k) => {
      const v = s[k];
      return cardHtml(titleOf(k), Array.isArray(v) ? genericTableHtml(v, 'None.', tz) : factsHtml(Object.entries(v as object).map(([fk, fv]) => [titleOf(fk), valueHtml(fv, tz, 1)])), 'wide');
    })
    .join('');
}

/** The Configuration card: the file, loads and reloads, the site and its zone, version and uptime. */
export function configCard(s: GatewayStatus): string {
  const t = statusClock(s);
  const tz = s.site?.timezone ?? 'UTC';
  const cfg = s.config ?? ({} as GatewayStatus['config']);
  const reloadError = cfg.lastReloadError;
  const config = factsHtml([
    ['File', `<code>${esc(cfg.file)}</code>`],
    ['Loaded', t(cfg.loadedAt)],
    [
      'Last reload error',
      reloadError
        ? `<span class="err">refused</span> ${t(reloadError.at)}${techHtml(reloadError.message)}`
        : '<span class="muted">none</span>',
    ],
    ...reloadFacts(cfg.lastReload, t),
    ['Site', `${esc(s.site?.id)} · times in ${esc(tz)}`],
    ['Version', esc(s.version)],
    ['Up for', `${esc(fmtDuration((s.uptimeSec ?? 0) * 1000))} · since ${t(s.startedAt)}`],
  ]);
  return cardHtml('Configuration', config, 'wide');
}

/** The whole content of `<main>`: state banner, summary tiles and every card, in page order. */
export function renderMain(s: GatewayStatus): string {
  return (
    bannerHtml(s) +
    tilesHtml(s) +
    inputsCard(s) +
    `<div class="pair">${bufferCard(s)}${deliveryCard(s)}</div>` +
    batchesCard(s) +
    problemsCard(s) +
    sessionsCard(s) +
    extraCards(s) +
    configCard(s)
  );
}

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

/** The station screen's content for `s` (src/health/station-page.ts: server first paint and every update in the browser). */
export function stationMain(s: StationSnapshot): string {
  const tz = s.timezone;
  const last = s.last[0];
  const verdictText = { taken: 'TAKEN', refused: 'REFUSED', duplicate: 'ALREADY SCANNED', noRead: 'NO READ' } as Record<string, string>;
  const hero = last
    ? `<section class="hero ${esc(last.verdict)}" id="last" data-read="${esc(last.id)}"><div class="verdict">${esc(verdictText[last.verdict] ?? last.verdict)}</div>` +
      `<div class="ref">${rawHtml(last.text)}</div>` +
      (last.verdict === 'taken' ? '' : `<div class="words">${esc(last.words ?? '')}</div><div class="hint">${esc(last.hint ?? '')}</div>`) +
      `<div class="meta">${esc(fmtTime(last.at, tz).slice(11))} · ${esc(last.inputId)}${last.reason ? ` · <span class="tech">${esc(last.reason)}</span>` : ''}</div></section>`
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
  const rows = s.last
    .map(
      (r) =>
        `<li class="${esc(r.verdict)}"><time>${esc(fmtTime(r.at, tz).slice(11))}</time><span class="v">${esc(r.verdict === 'taken' ? 'taken' : r.verdict === 'refused' ? 'refused' : r.verdict === 'duplicate' ? 'repeat' : 'no read')}</span>` +
        `<code>${rawHtml(r.text)}</code><span class="why">${r.verdict === 'taken' ? esc(r.scanState === 'delivered' ? 'delivered' : r.scanState === 'failed' ? 'refused by the service' : 'kept, sending') : esc(r.words ?? '')}</span></li>`,
    )
    .join('');
  return `${banner}<div class="grid">${hero}${counts}</div><section class="list"><h2>Last ${esc(s.last.length)} reads</h2><ol id="reads">${rows}</ol></section>`;
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
  statusClock,
  cardHtml,
  bufferCounts,
  bannerHtml,
  tilesHtml,
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
  itemHtml,
];
