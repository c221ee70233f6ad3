import type { InputResource } from '../../config/input-kind.js';
import type { InputKind } from '../kind.js';
import { messageSinkOf } from './message-sink.js';
import { mqttInputSchema, type MqttInputConfig } from './schema.js';

/** `type: mqtt`: topics of a broker, QoS 1 in a persistent session (README.md beside this file; docs/inputs.md, "mqtt"). */
export const mqttKind: InputKind<MqttInputConfig> = {
  type: 'mqtt',
  schema: mqttInputSchema,
  haMovable: true,
  acknowledges: ['commit', 'verdict'],
  redelivers: true,
  async create(config, { sink, logger, env, now, ha }) {
    const { MqttInput } = await import('./mqtt-input.js');
    return new MqttInput({
      config,
      sink: messageSinkOf(sink, config.id),
      logger,
      env,
      ...(now ? { now } : {}),
      ...(ha ? { ha } : {}),
    });
  },
  resources(config) {
    const files = (['caFile', 'certFile', 'keyFile', 'passwordFile'] as const).map((key) => ({
      kind: 'file' as const,
      key,
      path: config[key],
    }));
    const session: InputResource = {
      kind: 'session',
      key: 'clientId',
      id: `${brokerOf(config.url)} ${config.clientId}`,
      clash: `connects to the same broker with the same clientId "${config.clientId}"; each would take the other's session over (give each input its own clientId)`,
    };
    return config.passwordEnv === undefined
      ? [...files, session]
      : [
          ...files,
          session,
          {
            kind: 'env',
            key: 'passwordEnv',
            name: config.passwordEnv,
            missing: `the environment variable ${config.passwordEnv} is not set here (for the service: systemctl edit scan-gateway, [Service] Environment=…)`,
          },
        ];
  },
  fieldSources: (config) =>
    config.format === 'text'
      ? { kind: 'none', why: 'its payloads are text (format: text): only the code' }
      : {
          kind: 'json',
          keys: Object.keys(config.fields.attributeFields ?? {}),
          objectPath: config.fields.attributes,
        },
  secrets: (config) => [
    {
      what: `password of input ${config.id}`,
      envName: config.passwordEnv,
      file: config.passwordFile,
    },
  ],
  payload: {
    isJson: (config) => config.format === 'json',
    takesTopic: true,
    usage: (config, { topic }) =>
      config.dcpFromTopic !== undefined && topic === undefined
        ? `input ${config.id} takes the DCP from the topic (dcpFromTopic ${config.dcpFromTopic}): give --topic`
        : undefined,
    // One message on the topic: size limit, dcpFromTopic, text or JSON fields. Without --topic,
    // the first topic filter as written.
    async items(config, payload, { receivedAt, topic }) {
      const { messageToItem } = await import('./mqtt-payload.js');
      return [messageToItem(config, topic ?? config.topics[0] ?? '', payload, receivedAt)];
    },
  },
  starter: {
    id: 'broker',
    text: (
      id,
      o,
    ) => `  # Topics of an MQTT broker, QoS 1 in a persistent session (docs/inputs.md, "mqtt").
  - id: ${id}
    type: mqtt
    url: mqtt://127.0.0.1:1883   # mqtts://host:8883 with caFile for TLS
    topics: [scanners/+/reads]
    clientId: scan-gateway-${o.siteId}-${id}   # stable: the broker keeps this session's messages
    format: text                 # text = the payload is the code; json = an object (see fields)
    # format: json: fields says where each part is; attributeFields takes any payload field as an attribute:
    # fields: { code: code, time: ts, dcp: station, attributeFields: { voltage: voltage } }
    dcp: DCP-01
    # username: scan-gateway
    # passwordFile: /etc/scan-gateway/broker-password   # or passwordEnv: NAME; never the password here
`,
  },
};

const DEFAULT_BROKER_PORTS: Record<string, string> = {
  'mqtt:': '1883',
  'mqtts:': '8883',
  'ws:': '80',
  'wss:': '443',
};

/** A broker URL compared as the client connects: scheme, host (any case) and port (the default one written or not), path. */
function brokerOf(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.hostname.toLowerCase()}:${u.port || DEFAULT_BROKER_PORTS[u.protocol] || ''}${u.pathname.replace(/\/+$/, '')}`;
  } catch {
    return url;
  }
}
