import { createHash } from 'node:crypto';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { C0_NAMES, printableRaw } from '../../src/format/printable.js';
import { PAGE_CSP, PAGE_SCRIPT, renderPage } from '../../src/health/page.js';
import { STATION_SCRIPT } from '../../src/health/station-page.js';
import {
  fmtTime,
  reasonHtml,
  renderMain,
  RENDER_FUNCTIONS,
  shown,
} from '../../src/health/page-render.js';
import type { GatewayStatus } from '../../src/health/status.js';

const GS = '\u001d';
const HOSTILE = `"><img src=x onerror=alert(1)><script>alert('x')</script>`;

/**
 * A shipped script as the compiled gateway serves it. The render functions call each other across
 * modules (page-format.ts, page-cards.ts, …); tsc's ES modules keep such a call as the bare name,
 * which the inline script defines, but vitest's module runner rewrites it to
 * `(0,__vite_ssr_import_N__.name)`, a binding only the test process has. Undoing that rewrite leaves
 * the source the browser gets, so a reference to anything not shipped still fails in a bare context.
 */
function asShipped(source: string): string {
  return source
    .replace(/\(0,\s*__vite_ssr_import_\d+__\.(\w+)\)/g, '$1')
    .replace(/__vite_ssr_import_\d+__\.(\w+)/g, '$1');
}

function status(over: Partial<GatewayStatus> = {}): GatewayStatus {
  return {
    state: 'degraded',
    reasons: [`input ${HOSTILE} is down: ENOENT`],
    phase: 'running',
    generatedAt: '2026-11-18T06:00:00.000Z',
    site: { id: 'hall-3', timezone: 'Europe/Berlin' },
    version: '0.1.0',
    startedAt: '2026-11-18T05:00:00.000Z',
    uptimeSec: 3600,
    config: {
      file: '/etc/scan-gateway/config.yaml',
      loadedAt: '2026-11-18T05:00:00.000Z',
      lastReloadError: { message: `bad <key>`, at: '2026-11-18T05:30:00.000Z' },
    },
    buffer: {
      path: '/var/lib/scan-gateway/buffer.db',
      pendingScans: 2,
      undeliveredScans: 7,
      oldestPendingAgeMs: 125_000,
      scans: { pending: 2, batched: 5, delivered: 100, failed: 3 },
      fileBytes: 1_500_000,
    },
    delivery: {
      mode: 'direct',
      circuit: 'open',
      paused: false,
      consecutiveFailures: 4,
      lastError: { message: `HTTP 503 <html>`, at: '2026-11-18T05:59:00.000Z' },
      nextRetryAt: '2026-11-18T06:00:30.000Z',
    },
    inputs: [
      {
        id: 'gi-scanner',
        type: 'serial',
        state: 'down',
        source: '/dev/ttyUSB0',
        lastError: HOSTILE,
        counters: {
          reads: 10,
          scans: 8,
          noReads: 1,
          rejections: 1,
          duplicates: 0,
          bytes: 300,
          lastReadAt: '2026-11-18T05:58:00.000Z',
        },
      },
    ],
    batches: [
      {
        id: 12,
        mode: 'direct',
        state: 'done',
        scanCount: 5,
        bytes: 900,
        requestId: '1723',
        upstreamState: 'HasFailures',
        failed: 1,
        createdAt: '2026-11-18T05:57:00.000Z',
      },
    ],
    problems: [
      {
        kind: 'failed',
        inputId: 'gi-scanner',
        reference: `]d201095${GS}21X`,
        reason: `Invalid DCP ${HOSTILE}`,
        raw: shown(`]d201095${GS}21X</td>${HOSTILE}`),
        at: '2026-11-18T05:58:00.000Z',
        origin: '{"port":"/dev/ttyUSB0"}',
      },
    ],
    ...over,
  };
}

describe('health page rendering', () => {
  it("says how long the buffer disk lasts at today's rate, beside the free space", () => {
    const html = renderPage(
      status({
        buffer: {
          ...status().buffer,
          disk: {
            freeBytes: 31 * 2 ** 30,
            lowFreeBytes: 2 ** 30,
            reserveBytes: 4 * 2 ** 20,
            reserveReleased: false,
            prunedEarlyScans: 0,
            runway: {
              days: 12.3,
              scansPerDay: 3_500_000,
              bytesPerScan: 750,
              windowMs: 86_400_000,
              text: "12 days of scans at today's rate",
            },
          },
        },
      }),
    );
    expect(html).toContain('12 days of scans at today&#39;s rate');
    expect(html).toMatch(/3[,.\u202f\u00a0 ]?500[,.\u202f\u00a0 ]?000 scans a day/);
  });

  it('shows a file in progress of a files input (name escaped, rows so far, size)', () => {
    const html = renderPage(
      status({
        inputs: [
          {
            id: 'inbox',
            type: 'files',
            state: 'up',
            source: '/var/lib/scan-gateway/inbox',
            progress: {
              file: `big${HOSTILE}.txt`,
              rows: 412_000,
              bytes: 11_000_000,
              startedAt: '2026-11-18T05:59:00.000Z',
            },
          },
        ],
      }),
    );
    expect(html).toMatch(
      /reading <code>big&quot;&gt;&lt;img[^<]*\.txt<\/code>: 412[,.\u202f\u00a0 ]?000 rows so far/,
    );
    expect(html).not.toContain('<img src=x');
    // (The inline script carries the renderer's source, template included: look for a rendered line.)
    expect(renderPage(status())).not.toMatch(/reading <code>[^$]/);
  });

  it('escapes everything that comes from outside', () => {
    const html = renderPage(status());
    expect(html).not.toContain('<img src=x');
    expect(html).not.toContain("<script>alert('x')");
    expect(html).not.toContain('</td><img');
    expect(html).toContain(
      '&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;',
    );
    expect(html).toContain('bad &lt;key&gt;');
    // exactly one script element: the page's own
    expect(html.match(/<script/g)).toHaveLength(1);
  });

  it('shows GS bytes as a visible marker and times in the site zone', () => {
    const html = renderMain(status());
    expect(html).toContain(']d201095<span class="ctl">GS</span>21X');
    // 05:58 UTC is 06:58 in Berlin (CET, winter); the date is left out for today.
    expect(html).toContain('>06:58:00</time>');
    expect(html).toContain('2 min ago');
    expect(html).toContain('in 30 s'); // next retry
    expect(html).toContain('port /dev/ttyUSB0');
  });

  it('formats the site time across the daylight-saving change', () => {
    expect(fmtTime('2026-03-29T00:59:59Z', 'Europe/Berlin')).toBe('2026-03-29 01:59:59');
    expect(fmtTime('2026-03-29T01:00:00Z', 'Europe/Berlin')).toBe('2026-03-29 03:00:00');
  });

  it('shows the admin buttons only when admin actions are on', () => {
    // The inline script carries the renderers' source (their markup too): the page's own HTML counts.
    const markup = (html: string) => html.replace(/<script>[\s\S]*?<\/script>/g, '');
    expect(markup(renderPage(status()))).not.toContain('data-action=');
    const html = renderPage(
      status({ admin: { enabled: true, actions: ['retry', 'pause', 'resume'] } }),
    );
    expect(markup(html).match(/data-action="(\w+)"/g)).toEqual([
      'data-action="retry"',
      'data-action="pause"',
      'data-action="resume"',
    ]);
  });

  it('offers to close or abandon each open container, with name and why fields, to an admin', () => {
    const sessions = [
      {
        container: 'module',
        station: 'st20',
        parent: 'MOD-1',
        reads: 3,
        expected: 12,
        fill: '3 of 12',
      },
    ];
    expect(renderMain(status({ sessions }))).not.toContain('Close short');
    const on = status({
      sessions,
      admin: { enabled: true, actions: ['retry', 'close-container'] },
    });
    const main = renderMain(on);
    expect(main).toContain('MOD-1 (module at st20, 3 of 12): ');
    expect(main.match(/data-abandon="(true|false)"/g)).toEqual([
      'data-abandon="false"',
      'data-abandon="true"',
    ]);
    const page = renderPage(on);
    expect(page).toContain('id="admin-by"');
    expect(page).toContain('id="admin-why"');
    expect(page).not.toMatch(/<button[^>]*data-action="close-container"[^>]*>close-container/);
  });

  it('renders unknown status fields generically, escaped', () => {
    const html = renderMain(
      status({
        sessions: [{ station: 'GI-01', parent: `SSCC<1>`, openedAt: 'x' }],
        products: { missing: [`<b>`] },
      }),
    );
    expect(html).toContain('Open container sessions');
    expect(html).toContain('SSCC&lt;1&gt;');
    expect(html).toContain('&lt;b&gt;');
    expect(html).not.toContain('<b>');
  });

  it('the inline script carries its own renderer: it renders the same HTML in a bare context', () => {
    const s = status({ sessions: [{ station: 'A', openedAt: '2026-11-18T05:59:00.000Z' }] });
    s.config.lastReload = {
      at: '2026-11-18T05:40:00.000Z',
      needsRestart: ['http.listen'],
      inputErrors: [],
    };
    const source = asShipped(
      `${RENDER_FUNCTIONS.map((f) => f.toString()).join('\n')}\nrenderMain(s);`,
    );
    const inBareContext = runInNewContext(source, { s }) as string;
    expect(inBareContext).toBe(renderMain(s));
    expect(inBareContext).toContain('Waits for a restart');
    expect(inBareContext).toContain('2026-11-18 06:59:00'); // a generic instant, in the site zone
  });

  it('the whole inline script runs against a minimal DOM and fetches the status', async () => {
    const calls: string[] = [];
    const elements: Record<string, { innerHTML: string; textContent: string; className: string }> =
      {
        main: { innerHTML: '', textContent: '', className: '' },
        conn: { innerHTML: '', textContent: '', className: '' },
      };
    const intervals: (() => Promise<void> | void)[] = [];
    const context = {
      document: {
        getElementById: (id: string) => elements[id] ?? null,
        hidden: false,
        addEventListener: () => {},
        title: '',
      },
      fetch: async (url: string) => {
        calls.push(url);
        return { ok: true, status: 200, json: async () => status({ state: 'ok', reasons: [] }) };
      },
      setInterval: (f: () => void) => intervals.push(f),
      Date,
      Intl,
    };
    runInNewContext(asShipped(PAGE_SCRIPT), context);
    expect(intervals).toHaveLength(1);
    await intervals[0]!();
    expect(calls).toEqual(['api/v1/status']);
    expect(elements.main!.innerHTML).toContain('<div class="state">OK</div>');
    expect(elements.conn!.textContent).toMatch(/^updated 07:00:00/);
  });

  it('the Content-Security-Policy allows exactly the page script and style', () => {
    const html = renderPage(status());
    const script = /<script>([\s\S]*)<\/script>/.exec(html)![1]!;
    const style = /<style>([\s\S]*)<\/style>/.exec(html)![1]!;
    const sha = (t: string) => `'sha256-${createHash('sha256').update(t).digest('base64')}'`;
    expect(PAGE_CSP).toContain(`script-src ${sha(script)}`);
    expect(PAGE_CSP).toContain(`style-src ${sha(style)}`);
    expect(PAGE_CSP).toContain("default-src 'none'");
  });
});

describe('health page words for a shift supervisor', () => {
  const refused = 'POST /oauth2/token failed: ECONNREFUSED connect ECONNREFUSED 127.0.0.1:8099';
  const problems = [
    {
      code: 'SCANGW_E_UPSTREAM_NETWORK',
      severity: 'degraded' as const,
      sentence: 'No access token from the auth server, so nothing is uploaded.',
      hint: 'check the network and `upstream.proxyUrl`; see *Delivery*',
      since: '2026-11-18T05:59:00.000Z',
      detail: `${refused} <b>`,
    },
  ];

  it('shows each problem as its sentence, code, what to do and since when; the technical message only folded away', () => {
    const html = renderMain(
      status({
        healthProblems: problems,
        delivery: {
          mode: 'direct',
          circuit: 'open',
          consecutiveFailures: 3,
          lastError: {
            message: refused,
            at: '2026-11-18T05:59:00.000Z',
            code: 'SCANGW_E_UPSTREAM_NETWORK',
          },
        },
      }),
    );
    expect(html).toContain(
      '<span class="sentence">No access token from the auth server, so nothing is uploaded.</span> <code class="pcode">SCANGW_E_UPSTREAM_NETWORK</code>',
    );
    expect(html).toContain(
      '<strong>What to do:</strong> check the network and <code>upstream.proxyUrl</code>; see <em>Delivery</em>',
    );
    expect(html).toContain('since <time datetime="2026-11-18T05:59:00.000Z"');
    expect(html).toContain('&lt;b&gt;');
    // ECONNREFUSED appears only inside the folded technical details, never as page text of its own.
    const outsideDetails = html.replace(/<details class="tech">[\s\S]*?<\/details>/g, '');
    expect(html).toContain('ECONNREFUSED');
    expect(outsideDetails).not.toContain('ECONNREFUSED');
    expect(outsideDetails).not.toMatch(/circuit/i);
    expect(html).toContain('<span class="pill bad">stopped</span> after 3 failures in a row');
  });

  it('says "every input is up" only without any problem, and lists notes when the state stays ok', () => {
    expect(renderMain(status({ state: 'ok', reasons: [], healthProblems: [] }))).toContain(
      'Every input is up and delivery is flowing.',
    );
    const noted = renderMain(
      status({
        state: 'ok',
        reasons: [],
        healthProblems: [
          {
            code: 'SCANGW_H_SCANS_FAILED',
            severity: 'info',
            sentence: '5 scans refused by the service earlier wait for a replay.',
            hint: 'replay',
          },
        ],
      }),
    );
    expect(noted).not.toContain('Every input is up');
    expect(noted).toContain('Working. Worth knowing:');
    expect(noted).toContain('5 scans refused by the service earlier wait for a replay.');
  });

  it('uses one meaning of waiting: scans on their way, held apart, both not yet delivered', () => {
    // Delivery stuck: every scan is in a batch, none pending; 2 held.
    const html = renderMain(
      status({
        buffer: {
          path: '/b.db',
          pendingScans: 0,
          undeliveredScans: 4,
          heldScans: 2,
          oldestPendingAgeMs: 600_000,
          scans: { batched: 4, held: 2, delivered: 10 },
        },
      }),
    );
    const tile = (k: string) =>
      new RegExp(
        `<div class="tile-k">${k}</div><div class="tile-v">([^<]*)</div>(?:<div class="tile-s">([^<]*)</div>)?`,
      ).exec(html);
    expect(tile('Not yet delivered')?.slice(1)).toEqual(['6', '4 waiting for delivery · 2 held']);
    expect(html).not.toContain('nothing waiting');
    expect(html).toContain(
      '<dt>Waiting for delivery</dt><dd>4 <span class="muted">(0 not yet in a batch · 4 in a batch being sent or processed)</span>',
    );
    expect(html).not.toContain('Pending (not in a batch)');
  });

  it('words the HTTP refusal of a held batch as the refusal of the service, the exchange folded away', () => {
    expect(
      reasonHtml('POST /api/trace/v3/scans answered HTTP 400 (Bad Request: [0].dcpKey: unknown)'),
    ).toBe(
      '<span class="reason">The service refused the upload (HTTP 400): Bad Request: [0].dcpKey: unknown</span>' +
        '<details class="tech"><summary>technical detail</summary><code>POST /api/trace/v3/scans answered HTTP 400 (Bad Request: [0].dcpKey: unknown)</code></details>',
    );
    expect(reasonHtml('Invalid DCP <x>')).toBe('<span class="reason">Invalid DCP &lt;x&gt;</span>');
  });

  it('shows nested objects as labelled facts and tables, never as raw JSON', () => {
    const html = renderMain(
      status({
        products: {
          state: 'missing',
          checkedAt: '2026-11-18T05:00:00.000Z',
          products: 2,
          missing: [{ key: 'PACK-NOPE', where: ['lookups.gtin'] }],
          rejectUnknown: false,
          lastError: { message: 'x', at: '2026-11-18T05:10:00.000Z' },
        },
        odd: { deep: { deeper: { deepest: { gone: 1 } } } },
      }),
    );
    expect(html).not.toMatch(/\{"|":/);
    expect(html).toContain(
      '<dt>Rejected unknown</dt>'.replace('Rejected unknown', 'Reject unknown'),
    );
    expect(html).toContain('<dd>no</dd>');
    expect(html).toContain('PACK-NOPE');
    expect(html).toContain('lookups.gtin');
    expect(html).toContain('2026-11-18 06:00:00'); // checkedAt in the site zone
    expect(html).toContain('<span class="muted">…</span>');
  });
});

describe('printable raw reads', () => {
  // Every control character printable.ts names or escapes: C0, DEL and C1.
  const controls = [
    ...Array.from({ length: 0x20 }, (_, i) => i),
    ...Array.from({ length: 0x21 }, (_, i) => 0x7f + i),
  ];

  it('the page shows each control character as printable.ts does: on the server and in the shipped script', () => {
    const source = asShipped(
      `${RENDER_FUNCTIONS.map((f) => f.toString()).join('\n')}\nshownAll(codes);\nfunction shownAll(list) { return list.map((c) => shown(String.fromCharCode(c))); }`,
    );
    const inPage = runInNewContext(source, { codes: controls }) as string[];
    controls.forEach((code, i) => {
      const expected = printableRaw(String.fromCharCode(code));
      expect(shown(String.fromCharCode(code)), `0x${code.toString(16)}`).toBe(expected);
      expect(inPage[i], `0x${code.toString(16)} in the page`).toBe(expected);
      if (code < 0x20 || code === 0x7f)
        expect(printableRaw(Buffer.from([code])), `byte 0x${code.toString(16)}`).toBe(expected);
    });
    expect(inPage.slice(0, 0x20)).toEqual(C0_NAMES.map((n) => `<${n}>`));
  });

  it('both pages carry the table of printable.ts as data, not a copy of their own', () => {
    const table = JSON.stringify(C0_NAMES);
    expect(PAGE_SCRIPT).toContain(table);
    expect(STATION_SCRIPT).toContain(table);
    // the names appear nowhere else in the scripts
    expect(PAGE_SCRIPT.split('"SOH"')).toHaveLength(2);
    expect(STATION_SCRIPT.split('"SOH"')).toHaveLength(2);
  });

  it('names control bytes, keeps UTF-8 text and shows other bytes as hex', () => {
    expect(printableRaw(Buffer.from(`]d2010${GS}21A\r`))).toBe(']d2010<GS>21A<CR>');
    expect(printableRaw(Buffer.from('Zelle Ü-7'))).toBe('Zelle Ü-7');
    expect(printableRaw(Buffer.from([0x41, 0xff, 0x1d, 0x42]))).toBe('A\\xff<GS>B');
    expect(printableRaw(Buffer.from([0x7f, 0x04]))).toBe('\\u007f<EOT>');
  });
});
