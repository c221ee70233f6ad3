import {
  cardHtml,
  esc,
  factsHtml,
  fmtDuration,
  statusClock,
  techHtml,
  valueHtml,
} from './page-format.js';
import type { GatewayStatus } from './status.js';

/**
 * The health page's Configuration card (page-cards.ts re-exports it): the file, loads and reloads,
 * what waits for a restart, the local server's HTTPS and tokens, the site and its zone, version and
 * uptime. Shipped to the browser by its source, like every render function (see page-render.ts).
 */

/** The last accepted reload (`config.lastReload`): when, and what waits for a restart. */
export function reloadFacts(reload: unknown, t: (iso: unknown) => string): [string, string][] {
  if (!reload || typeof reload !== 'object') return [];
  const r = reload as { at?: string; needsRestart?: unknown; inputErrors?: unknown };
  const out: [string, string][] = [['Last reload', t(r.at)]];
  if (Array.isArray(r.needsRestart) && r.needsRestart.length > 0) {
    out.push([
      'Waits for a restart',
      `<span class="err">${r.needsRestart.map((x) => esc(x)).join(', ')}</span>`,
    ]);
  }
  if (Array.isArray(r.inputErrors) && r.inputErrors.length > 0)
    out.push(['Inputs not restarted', valueHtml(r.inputErrors, undefined, 1)]);
  return out;
}

/** The local server's rows of the Configuration card: HTTPS and its certificate's end, or tokens in clear text. */
export function listenerFacts(
  listener: unknown,
  t: (iso: unknown, future?: boolean) => string,
): [string, string][] {
  if (!listener || typeof listener !== 'object') return [];
  const l = listener as {
    tls?: {
      certificate?: { subject?: string; serialNumber?: string; validTo?: string };
      daysLeft?: number;
      clientCertificates?: boolean;
      lastRefusal?: { at?: string; message?: string };
    };
    tokensInClear?: unknown;
  };
  const out: [string, string][] = [];
  const tls = l.tls;
  if (tls?.certificate) {
    const days = Number(tls.daysLeft);
    const words =
      days === 0 ? 'less than a day left' : `${esc(days)} day${days === 1 ? '' : 's'} left`;
    const left =
      days < 0
        ? '<span class="err">ended</span>'
        : days < 14
          ? `<span class="err">${words}</span>`
          : words;
    out.push([
      'Listener',
      `HTTPS${tls.clientCertificates ? ' · ingest requires a client certificate' : ''}`,
    ]);
    out.push([
      'Certificate',
      `${esc(tls.certificate.subject)} · serial <code>${esc(tls.certificate.serialNumber)}</code>`,
    ]);
    out.push(['Certificate ends', `${t(tls.certificate.validTo, true)} · ${left}`]);
    if (tls.lastRefusal)
      out.push([
        'Certificate reload',
        `<span class="err">refused</span> ${t(tls.lastRefusal.at)}${techHtml(tls.lastRefusal.message)}`,
      ]);
  } else {
    out.push(['Listener', 'plain HTTP']);
  }
  if (Array.isArray(l.tokensInClear) && l.tokensInClear.length > 0) {
    out.push([
      'In clear text',
      `<span class="err">${l.tokensInClear.map((x) => esc(x)).join(', ')}</span>`,
    ]);
  }
  return out;
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
    ...listenerFacts(s.listener, t),
    ['Site', `${esc(s.site?.id)} · times in ${esc(tz)}`],
    ['Version', esc(s.version)],
    ['Up for', `${esc(fmtDuration((s.uptimeSec ?? 0) * 1000))} · since ${t(s.startedAt)}`],
  ]);
  return cardHtml('Configuration', config, 'wide');
}
