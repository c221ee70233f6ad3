import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig, parseConfigText, type ConfigProblem } from '../../src/config/load.js';
import { isGatewayError } from '../../src/errors.js';

/** Cross-checks of resources two parts of the configuration would both take. */

const HEAD = `site: { id: s1, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:8090, authUrl: http://127.0.0.1:8090, clientId: c1 }
dcps:
  - { key: SOP-3, kind: startOfProcess, productModelKey: MOD-48V }
`;

function problemsOf(text: string, baseDir?: string): ConfigProblem[] {
  try {
    parseConfigText(text, 'site.yaml', { ...(baseDir !== undefined ? { baseDir } : {}) });
  } catch (err) {
    if (isGatewayError(err) && Array.isArray(err.details.problems))
      return err.details.problems as ConfigProblem[];
    throw err;
  }
  return [];
}

/** `line path: message` of each problem. */
function lines(text: string, baseDir?: string): string[] {
  return problemsOf(text, baseDir).map((p) => `${p.line} ${p.path}: ${p.message}`);
}

describe('two files inputs on one folder', () => {
  it('are refused at the second, with paths compared resolved (trailing slash, .., relative)', () => {
    const text = `${HEAD}inputs:
  - { id: a, type: files, dir: /srv/inbox, dcp: SOP-3 }
  - { id: b, type: files, dir: /srv/other, dcp: SOP-3 }
  - { id: c, type: files, dir: /srv/inbox/, dcp: SOP-3 }
  - { id: d, type: files, dir: /srv/x/../other, dcp: SOP-3 }
  - { id: e, type: files, dir: inbox, dcp: SOP-3 }
`;
    expect(lines(text, '/srv')).toEqual([
      '8 inputs[2].dir: input "a" watches the folder /srv/inbox too; each file would be ingested twice (one files input per folder)',
      '9 inputs[3].dir: input "b" watches the folder /srv/other too; each file would be ingested twice (one files input per folder)',
      '10 inputs[4].dir: input "a" watches the folder /srv/inbox too; each file would be ingested twice (one files input per folder)',
    ]);
    // Resolved against another base folder, `inbox` is another folder.
    expect(lines(text, '/etc/scan-gateway')).toHaveLength(2);
  });

  it('loadConfig compares relative folders as it resolves them: against its base folder', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-clash-'));
    writeFileSync(
      join(dir, 'site.yaml'),
      `${HEAD}inputs:\n  - { id: a, type: files, dir: ${dir}/inbox, dcp: SOP-3 }\n  - { id: b, type: files, dir: ./inbox/, dcp: SOP-3 }\n`,
    );
    expect(() =>
      loadConfig(join(dir, 'site.yaml'), { baseDir: dir, env: {}, skipSecret: true }),
    ).toThrow(/site\.yaml:7:.*inputs\[b\]\.dir: input "a" watches the folder/);
  });
});

describe('two listeners on one address', () => {
  it('http.listen and an enabled sandbox on the same host:port', () => {
    const text = `${HEAD}inputs: []\nhttp: { listen: 127.0.0.1:8090 }\nsandbox:\n  enabled: true\n  listen: 127.0.0.1:8090\n`;
    expect(lines(text)).toEqual([
      '9 sandbox.listen: the embedded sandbox (sandbox.listen) would listen on 127.0.0.1:8090, where the HTTP server (http.listen) listens already (127.0.0.1:8090)',
    ]);
    // 0.0.0.0 takes the port on every address.
    expect(lines(text.replace('listen: 127.0.0.1:8090 }', 'listen: 0.0.0.0:8090 }'))).toHaveLength(
      1,
    );
    // Other hosts or ports, a sandbox not enabled, or port 0 (a free port) do not clash.
    expect(lines(text.replace('listen: 127.0.0.1:8090 }', 'listen: 10.0.0.5:8090 }'))).toEqual([]);
    expect(lines(text.replace('listen: 127.0.0.1:8090 }', 'listen: 127.0.0.1:8080 }'))).toEqual([]);
    expect(lines(text.replace('enabled: true', 'enabled: false'))).toEqual([]);
    expect(lines(text.replaceAll(':8090', ':0'))).toEqual([]);
  });

  it('the default sandbox address clashes with an http.listen written on it', () => {
    expect(
      lines(`${HEAD}inputs: []\nhttp: { listen: 0.0.0.0:8090 }\nsandbox: { enabled: true }\n`),
    ).toEqual([
      '7 sandbox.listen: the embedded sandbox (sandbox.listen) would listen on 127.0.0.1:8090, where the HTTP server (http.listen) listens already (0.0.0.0:8090)',
    ]);
  });

  it("the sandbox's Kafka endpoint (sandbox.kafka.listen, default 127.0.0.1:9093) clashes like the other listeners", () => {
    expect(
      lines(`${HEAD}inputs: []\nhttp: { listen: 127.0.0.1:9093 }\nsandbox: { enabled: true }\n`),
    ).toEqual([
      "7 sandbox.kafka.listen: the embedded sandbox's Kafka endpoint (sandbox.kafka.listen) would listen on 127.0.0.1:9093, where the HTTP server (http.listen) listens already (127.0.0.1:9093)",
    ]);
    const text = `${HEAD}inputs: []\nsandbox:\n  enabled: true\n  kafka: { listen: 127.0.0.1:8090 }\n`;
    expect(lines(text)).toEqual([
      "8 sandbox.kafka.listen: the embedded sandbox's Kafka endpoint (sandbox.kafka.listen) would listen on 127.0.0.1:8090, where the embedded sandbox (sandbox.listen) listens already (127.0.0.1:8090)",
    ]);
    expect(
      lines(text.replace('kafka: { listen: 127.0.0.1:8090 }', 'kafka: { listen: 127.0.0.1:9094 }')),
    ).toEqual([]);
  });

  it('two tcp server inputs on one port (0.0.0.0 or the same host), and one on http.listen', () => {
    const text = `${HEAD}inputs:
  - { id: r1, type: tcp, mode: server, host: 0.0.0.0, port: 4001, dcp: SOP-3 }
  - { id: r2, type: tcp, mode: server, host: 10.3.20.1, port: 4001, dcp: SOP-3 }
  - { id: r3, type: tcp, mode: server, host: 10.3.20.1, port: 4002, dcp: SOP-3 }
  - { id: r4, type: tcp, mode: server, host: 10.3.20.2, port: 4002, dcp: SOP-3 }
  - { id: r5, type: tcp, mode: server, host: 10.3.20.2, port: 4002, dcp: SOP-3 }
  - { id: c1, type: tcp, mode: client, host: 10.3.20.2, port: 4002, dcp: SOP-3 }
  - { id: r6, type: tcp, mode: server, host: 127.0.0.1, port: 8080, dcp: SOP-3 }
`;
    expect(lines(text)).toEqual([
      '7 inputs[1].port: tcp server input "r2" would listen on 10.3.20.1:4001, where tcp server input "r1" listens already (0.0.0.0:4001)',
      '10 inputs[4].port: tcp server input "r5" would listen on 10.3.20.2:4002, where tcp server input "r4" listens already (10.3.20.2:4002)',
      '12 inputs[6].port: tcp server input "r6" would listen on 127.0.0.1:8080, where the HTTP server (http.listen) listens already (127.0.0.1:8080)',
    ]);
  });
});

describe('two MQTT inputs with one session', () => {
  it('the same broker and clientId is refused at the second; another clientId or broker is fine', () => {
    const text = `${HEAD}inputs:
  - { id: m1, type: mqtt, url: "mqtt://broker:1883", topics: [a/#], clientId: gw, dcp: SOP-3 }
  - { id: m2, type: mqtt, url: "mqtt://BROKER/", topics: [b/#], clientId: gw, dcp: SOP-3 }
  - { id: m3, type: mqtt, url: "mqtt://broker:1883", topics: [c/#], clientId: gw-2, dcp: SOP-3 }
  - { id: m4, type: mqtt, url: "mqtts://broker:8883", topics: [d/#], clientId: gw, dcp: SOP-3 }
`;
    expect(lines(text)).toEqual([
      `7 inputs[1].clientId: input "m1" connects to the same broker with the same clientId "gw"; each would take the other's session over (give each input its own clientId)`,
    ]);
  });
});
