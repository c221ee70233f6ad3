import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startGateway } from '../helpers/gateway-process.js';
import { waitFor } from '../helpers/wait.js';
import { parsePrometheusText } from '../unit/metrics-text-parser.js';

// The alert rules are a file Prometheus loads, with unit tests run by promtool
// (Debian's prometheus package, installed by .ci/run; a missing promtool fails here), and the
// fleet dashboard queries only metrics the gateway really exposes.

const MONITORING = join(PACKAGE_ROOT, 'monitoring');

function promtool(args: string[], cwd = MONITORING): { code: number | null; out: string } {
  const r = spawnSync('promtool', args, { cwd, encoding: 'utf8', timeout: 60_000 });
  if (r.error) throw r.error;
  return { code: r.status, out: r.stdout + r.stderr };
}

interface Dashboard {
  panels: { title: string; targets: { expr: string }[] }[];
  templating: { list: { name: string; query?: unknown }[] };
}

/** The metric names a PromQL expression reads (scan_gateway_*, process_*, nodejs_*, up). */
function metricNames(expr: string): string[] {
  return [
    ...expr.matchAll(
      /\b(scan_gateway_[a-z_]+|process_[a-z_]+|nodejs_[a-z_]+|up)\b(?=\s*[{[)]|\s*$|\s*[=<>!])/g,
    ),
  ].map((m) => m[1]!);
}

describe('monitoring/', () => {
  it('promtool checks the alert rules and passes their unit tests', () => {
    const check = promtool(['check', 'rules', 'alerts.yml']);
    expect(check.code, check.out).toBe(0);
    expect(check.out).toContain('SUCCESS: 12 rules found');
    const test = promtool(['test', 'rules', 'alerts.test.yml']);
    expect(test.code, test.out).toBe(0);
    expect(test.out).toContain('SUCCESS');
  });

  it('the scrape example is a valid Prometheus configuration', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-prom-'));
    // The example's absolute paths, pointed at copies in a temporary folder.
    const config = readFileSync(join(MONITORING, 'prometheus.yml'), 'utf8')
      .replace('/etc/prometheus/rules/scan-gateway.yml', join(dir, 'alerts.yml'))
      .replace('/etc/prometheus/targets/scan-gateway.yml', join(dir, 'targets.yml'))
      .replace('/etc/prometheus/scan-gateway-read-token', join(dir, 'token'));
    writeFileSync(join(dir, 'prometheus.yml'), config);
    copyFileSync(join(MONITORING, 'alerts.yml'), join(dir, 'alerts.yml'));
    copyFileSync(join(MONITORING, 'targets.example.yml'), join(dir, 'targets.yml'));
    writeFileSync(join(dir, 'token'), 'a-read-token-of-32-characters-xx\n');
    const r = promtool(['check', 'config', 'prometheus.yml'], dir);
    expect(r.code, r.out).toBe(0);
    expect(parse(readFileSync(join(dir, 'targets.yml'), 'utf8'))).toEqual([
      { targets: ['gateway-07.plant1.example:8080'], labels: { plant: 'plant-1', hall: 'hall-3' } },
      { targets: ['gateway-02.plant2.example:8080'], labels: { plant: 'plant-2', hall: 'hall-1' } },
    ]);
  });

  it('every metric the dashboard and the alerts query is one a running gateway exposes, and every query parses', async () => {
    const dashboard = JSON.parse(
      readFileSync(join(MONITORING, 'grafana-dashboard.json'), 'utf8'),
    ) as Dashboard;
    const exprs = dashboard.panels.flatMap((p) =>
      p.targets.map((t) => ({ panel: p.title, expr: t.expr })),
    );
    expect(exprs.length).toBeGreaterThan(15);
    expect(dashboard.templating.list.map((v) => v.name)).toEqual(['datasource', 'instance']);

    // Every query is valid PromQL: promtool checks them as recording rules ($instance as .*).
    const dir = mkdtempSync(join(tmpdir(), 'sg-dash-'));
    const rules = {
      groups: [
        {
          name: 'dashboard',
          rules: exprs.map((e, i) => ({
            record: `dashboard:query_${i}`,
            expr: e.expr.replaceAll('$instance', '.*'),
          })),
        },
      ],
    };
    writeFileSync(join(dir, 'dashboard-rules.yml'), JSON.stringify(rules));
    const syntax = promtool(['check', 'rules', 'dashboard-rules.yml'], dir);
    expect(syntax.code, syntax.out).toBe(0);

    // A gateway that has taken a file and delivered it, so that delivery's series exist too.
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const site = mkdtempSync(join(tmpdir(), 'sg-monitoring-'));
    mkdirSync(join(site, 'inbox'));
    const config = join(site, 'config.yaml');
    writeFileSync(
      config,
      `site: { id: monitoring-test, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:${port}, authUrl: http://127.0.0.1:${port}, clientId: demo-client }
buffer: { path: ${site}/buffer.db }
delivery: { mode: direct, maxBatchDelayMs: 200 }
http: { listen: '127.0.0.1:0' }
sandbox: { enabled: true, listen: '127.0.0.1:${port}', kafka: { listen: '127.0.0.1:0' } }
log: { level: info, format: json }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
inputs:
  - { id: inbox, type: files, dir: ${site}/inbox, format: csv, barcodeColumn: barcode, timeColumn: read_at, dcp: GI-01 }
`,
    );
    const secret = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
    const gw = await startGateway(config, { SCAN_GATEWAY_CLIENT_SECRET: secret }, site);
    try {
      copyFileSync(
        join(PACKAGE_ROOT, 'samples/goods-in-export.csv'),
        join(site, 'inbox', 'goods-in-export.csv'),
      );
      const families = await waitFor(
        async () => {
          const f = parsePrometheusText(await (await fetch(`${gw.httpUrl}/metrics`)).text());
          return f.has('scan_gateway_last_upload_success_timestamp_seconds') ? f : undefined;
        },
        { timeoutMs: 30_000, what: 'a successful upload in /metrics' },
      );
      // A metric exists when the gateway declares it (# TYPE), with samples or not: labelled
      // series such as upstream errors appear at their first event. `up` is Prometheus' own.
      const exposed = new Set<string>(['up']);
      for (const [name, family] of families) {
        exposed.add(name);
        if (family.type === 'histogram')
          for (const suffix of ['_bucket', '_sum', '_count']) exposed.add(name + suffix);
        for (const s of family.samples) exposed.add(s.name);
      }
      const missing = exprs.flatMap((e) =>
        metricNames(e.expr)
          .filter((n) => !exposed.has(n))
          .map((n) => `${e.panel}: ${n}`),
      );
      expect(missing).toEqual([]);
      // The queries do read metrics (the name pattern finds them), at least one per panel.
      for (const e of exprs.filter((x) => !x.expr.startsWith('count(up')))
        expect(metricNames(e.expr).length, e.panel).toBeGreaterThan(0);

      const alerts = parse(readFileSync(join(MONITORING, 'alerts.yml'), 'utf8')) as {
        groups: { rules: { alert: string; expr: string }[] }[];
      };
      const alertMissing = alerts.groups.flatMap((g) =>
        g.rules.flatMap((r) =>
          metricNames(r.expr)
            .filter((n) => !exposed.has(n))
            .map((n) => `${r.alert}: ${n}`),
        ),
      );
      expect(alertMissing).toEqual([]);
    } finally {
      expect(await gw.stop()).toBe(0);
    }
  }, 90_000);
});
