import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import mqtt from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Scan } from '@scan-gateway/contract';
import { MAIN_JS, startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { startMosquitto, type Broker } from '../helpers/mosquitto.js';
import { freePort } from '../helpers/ports.js';
import { waitFor } from '../helpers/wait.js';

const run = promisify(execFile);

/** The end-of-line vision system's message of the site trial, as it publishes it. */
const VISION = '{"code":"PK-000815","ts":"2026-11-27T10:00:00Z","station":"EOL-3","voltage":3.652}';
/** A module at assembly, a DCP (MA-3) and product (MOD-8) the sandbox's demo client does not know. */
const MODULE = '{"code":"MOD-000001","ts":"2026-11-27T10:00:05Z","station":"MA-3","voltage":48.1}';

describe('end to end: a trial site against the embedded sandbox, over a real mosquitto', () => {
  let broker: Broker;
  let gateway: GatewayProcess | undefined;
  let dir: string;
  let config: string;
  let sandboxUrl: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sg-e2e-site-trial-'));
    broker = await startMosquitto(mkdtempSync(join(tmpdir(), 'sg-e2e-site-broker-')));
    const [sandboxPort, kafkaPort, httpPort] = [
      await freePort(),
      await freePort(),
      await freePort(),
    ];
    sandboxUrl = `http://127.0.0.1:${sandboxPort}`;
    config = join(dir, 'config.yaml');
    // The site's own client, not the demo's: the embedded sandbox knows the client of its configuration.
    writeFileSync(join(dir, 'client-secret'), `${randomBytes(24).toString('hex')}\n`, {
      mode: 0o600,
    });
    writeFileSync(
      config,
      `site: { id: trial, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandboxUrl}, authUrl: ${sandboxUrl}, clientId: plant-7-gateway, clientSecretFile: ${join(dir, 'client-secret')} }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 100, statusPollMs: 100, statusPollMaxMs: 300 }
http: { listen: 127.0.0.1:${httpPort} }
sandbox: { enabled: true, listen: 127.0.0.1:${sandboxPort}, kafka: { listen: 127.0.0.1:${kafkaPort} } }
dcps:
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-Z }
  - { key: MA-3, kind: endOfProcess, productModelKey: MOD-8 }
inputs:
  - id: vision
    type: mqtt
    url: ${broker.url}
    topics: [plant/vision]
    clientId: sg-e2e-site-trial
    format: json
    dcp: EOL-3
    fields: { dcp: station, attributeFields: { voltage: voltage } }
rules:
  # The vision system sends no temperature: the attribute is noted as not sent, never silently dropped.
  - { name: eol, attributes: { temp: { field: temp } } }
`,
    );
  });
  afterAll(async () => {
    await gateway?.stop();
    await broker?.stop();
  });

  it('delivers the vision payload with its voltage, at DCPs and products outside the sandbox defaults; try --payload gives the same scan', async () => {
    gateway = await startGateway(config, {}, dir);
    expect(gateway.output()).toContain(
      'embedded upstream sandbox started; client plant-7-gateway with DCPs EOL-3, MA-3 and products MOD-8, PACK-Z',
    );
    await waitFor(
      async () => {
        const status = (await (await fetch(`${gateway!.httpUrl}/healthz`)).json()) as {
          inputs: { state: string }[];
        };
        return status.inputs[0]?.state === 'up';
      },
      { timeoutMs: 30_000 },
    );

    const client = await mqtt.connectAsync(broker.url, { clientId: 'e2e-vision', clean: true });
    await client.publishAsync('plant/vision', VISION, { qos: 1 });
    await client.publishAsync('plant/vision', MODULE, { qos: 1 });
    await client.endAsync();

    // Delivered means the service processed the batch: no "Invalid DCP" or unknown product dead letter.
    const health = await waitFor(
      async () => {
        const h = (await (await fetch(`${gateway!.httpUrl}/healthz`)).json()) as {
          deliveredScans: number;
          failedScans: number;
        };
        return h.deliveredScans + h.failedScans >= 2 ? h : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(health).toMatchObject({ deliveredScans: 2, failedScans: 0 });

    const log = (await (await fetch(`${sandboxUrl}/_sandbox/scans`)).json()) as {
      scans: { scan: Scan }[];
    };
    const atSandbox = log.scans.map((s) => s.scan);
    const pack = atSandbox.find((s) => s.reference === 'PK-000815');
    expect(pack).toEqual({
      reference: 'PK-000815',
      timeStamp: '2026-11-27T11:00:00',
      dcpKey: 'EOL-3',
      productModelKey: 'PACK-Z',
      parents: [],
      attributes: [{ key: 'voltage', value: '3.652' }],
    });
    expect(atSandbox.find((s) => s.reference === 'MOD-000001')).toMatchObject({
      dcpKey: 'MA-3',
      productModelKey: 'MOD-8',
      attributes: [{ key: 'voltage', value: '48.1' }],
    });

    // The dropped attribute: noted with the read (trace), counted per input (status), logged once.
    const traced = await run(
      process.execPath,
      [MAIN_JS, 'trace', 'PK-000815', '--config', config],
      { cwd: dir },
    );
    expect(traced.stdout).toContain(
      'note: attribute temp not sent: field temp has no value in this read',
    );
    const status = (await (await fetch(`${gateway.httpUrl}/api/v1/status`)).json()) as {
      inputs: { id: string; counters?: { attributesNotSent?: number } }[];
    };
    expect(status.inputs.find((i) => i.id === 'vision')?.counters?.attributesNotSent).toBe(2);
    expect(gateway.output().match(/a rule attribute had no value and was not sent/g)).toHaveLength(
      1,
    );

    const tried = await run(
      process.execPath,
      [
        MAIN_JS,
        'try',
        '--config',
        config,
        '--input',
        'vision',
        '--topic',
        'plant/vision',
        '--payload',
        VISION,
        '--json',
      ],
      { cwd: dir },
    );
    const [result] = JSON.parse(tried.stdout) as {
      outcome: string;
      scan: Scan;
      notes?: string[];
    }[];
    expect(result?.outcome).toBe('scan');
    expect(result?.notes).toEqual([
      'attribute temp not sent: field temp has no value in this read',
    ]);
    expect(tried.stderr).toContain(
      'note: rules[eol].attributes.temp: { field: temp } has a value on input vision only when a payload carries temp inside its "attributes" object',
    );
    expect(result?.scan).toEqual(pack);
  });

  it("config check beside the running gateway knows the ports are its own gateway's; another configuration's check still fails", async () => {
    const own = await run(process.execPath, [MAIN_JS, 'config', 'check', '--config', config], {
      cwd: dir,
    });
    expect(own.stdout).toMatch(
      /note: .*http\.listen: 127\.0\.0\.1:\d+ is in use by the running gateway of this configuration/,
    );
    expect(own.stdout).toMatch(
      /note: .*sandbox\.listen: 127\.0\.0\.1:\d+ is in use by the running gateway of this configuration/,
    );

    const other = join(dir, 'other.yaml');
    writeFileSync(
      other,
      readFileSync(config, 'utf8').replace(join(dir, 'buffer.db'), join(dir, 'other.db')),
    );
    const clash = await run(process.execPath, [MAIN_JS, 'config', 'check', '--config', other], {
      cwd: dir,
    }).then(
      () => ({ code: 0, stdout: '' }),
      (err: { code: number; stdout: string }) => err,
    );
    expect(clash.code).toBe(2);
    expect(clash.stdout).toMatch(
      /http\.listen: 127\.0\.0\.1:\d+ is in use; another scan-gateway \(with another buffer, so another configuration\)/,
    );
  });
});
