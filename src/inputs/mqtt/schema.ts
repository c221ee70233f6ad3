import { z } from 'zod';
import { inputBaseKeys } from '../../config/input-kind.js';
import { jsonFieldsSchema } from '../schema-parts.js';

const LITERAL_PASSWORD =
  'a literal password is refused in the configuration file; put it in a file named by passwordFile, or in an environment variable named by passwordEnv';

/** `type: mqtt`: topics of a broker, persistent QoS 1 session (docs/inputs.md, "mqtt"). */
export const mqttInputSchema = z
  .object({
    ...inputBaseKeys,
    type: z.literal('mqtt'),
    url: z
      .string()
      .regex(
        /^(mqtts?|wss?):\/\/[^/\s]+/,
        'must be mqtt://, mqtts://, ws:// or wss:// followed by host[:port]',
      )
      .refine((u) => !/^[a-z]+:\/\/[^/@]*:[^/@]*@/i.test(u), LITERAL_PASSWORD)
      .describe('Broker address: mqtt://host:1883, mqtts://host:8883, ws(s)://host/mqtt.'),
    topics: z
      .array(
        z
          .string()
          .min(1)
          .refine(
            isTopicFilter,
            'is not a valid MQTT topic filter (+ and # take a whole level; # only last)',
          ),
      )
      .min(1)
      .describe('Topic filters to subscribe to, wildcards + and # allowed.'),
    clientId: z
      .string()
      .min(1)
      .max(128)
      .describe(
        "Stable client id: the broker keeps this id's session (and its queued messages) while the gateway is down.",
      ),
    format: z
      .enum(['text', 'json'])
      .default('text')
      .describe('text = the payload is the barcode; json = an object with the fields of `fields`.'),
    fields: jsonFieldsSchema
      .prefault({})
      .describe('json: where the fields of a read are in the payload.'),
    dcpFromTopic: z
      .string()
      .refine(
        (p) => p.split('/').filter((l) => l === '{dcp}').length === 1,
        'must hold the level {dcp} exactly once, e.g. plant/{dcp}/scans',
      )
      .optional()
      .describe(
        'Topic pattern whose {dcp} level names the DCP, e.g. plant/{dcp}/scans; + matches any level, # the rest.',
      ),
    qos: z
      .union([z.literal(0), z.literal(1)])
      .default(1)
      .describe('Subscription QoS: 1 = at least once (keep it); 0 loses messages.'),
    protocolVersion: z
      .union([z.literal(4), z.literal(5)])
      .default(5)
      .describe('5 = MQTT 5 (default), 4 = MQTT 3.1.1.'),
    sessionExpirySec: z
      .number()
      .int()
      .min(0)
      .max(0xffff_ffff)
      .default(7 * 24 * 3600)
      .describe(
        'MQTT 5: how long the broker keeps the session (and queues messages) while the gateway is away, in s.',
      ),
    caFile: z
      .string()
      .min(1)
      .optional()
      .describe("PEM bundle of the certificate authorities that signed the broker's certificate."),
    certFile: z
      .string()
      .min(1)
      .optional()
      .describe(
        'PEM client certificate (with keyFile), for brokers that authenticate clients by certificate.',
      ),
    keyFile: z.string().min(1).optional().describe('PEM private key of certFile.'),
    username: z.string().min(1).optional().describe('User name for the broker.'),
    passwordFile: z
      .string()
      .min(1)
      .optional()
      .describe('File holding the broker password (e.g. a systemd credential).'),
    passwordEnv: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')
      .optional()
      .describe('Name of the environment variable holding the broker password.'),
    password: z
      .never({ error: LITERAL_PASSWORD })
      .optional()
      .describe('Refused: a password never stands in this file (use passwordFile or passwordEnv).'),
    maxPayloadBytes: z
      .number()
      .int()
      .positive()
      .default(256 * 1024)
      .describe(
        'A larger payload is stored as a rejection (its first bytes) and acknowledged, never held whole in memory; MQTT 5: + 65 KiB is sent as maximumPacketSize, so the broker drops bigger packets (its log shows them).',
      ),
    maxInFlight: z
      .number()
      .int()
      .min(1)
      .max(65_535)
      .default(1000)
      .describe(
        'Most messages received and not yet committed and acknowledged (MQTT 5 receive maximum).',
      ),
    keepaliveSec: z.number().int().min(0).max(65_535).default(30).describe('MQTT keepalive, in s.'),
    reconnectMs: z
      .number()
      .int()
      .positive()
      .default(2000)
      .describe('Delay between reconnect attempts, in ms.'),
    connectTimeoutMs: z
      .number()
      .int()
      .positive()
      .default(30_000)
      .describe("Longest wait for the broker's answer to CONNECT, in ms."),
    statusTopic: z
      .union([
        z
          .string()
          .min(1)
          .refine((t) => !/[+#]/.test(t), 'must not hold wildcards'),
        z.literal(false),
      ])
      .optional()
      .describe(
        'Retained online/offline/paused status (last will: offline); default scan-gateway/<clientId>/status; false = none.',
      ),
    verdictTopic: z
      .string()
      .min(1)
      .refine((t) => !/[+#]/.test(t), 'must not hold wildcards')
      .optional()
      .describe(
        "Topic on which each read's verdict is published once committed (QoS 1, not retained), as JSON { reference, verdict: ack|nak, reason, input, time }: for a stack light or a vision system. Unset = none.",
      ),
  })
  .strict()
  .superRefine((c, ctx) => {
    if ((c.certFile === undefined) !== (c.keyFile === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: [c.certFile ? 'keyFile' : 'certFile'],
        message: 'certFile and keyFile go together',
      });
    }
    if (c.passwordFile !== undefined && c.passwordEnv !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['passwordEnv'],
        message: 'set passwordFile or passwordEnv, not both',
      });
    }
    if ((c.passwordFile !== undefined || c.passwordEnv !== undefined) && c.username === undefined) {
      ctx.addIssue({ code: 'custom', path: ['username'], message: 'a password needs a username' });
    }
  });

/** One `type: mqtt` entry, as the schema makes it. */
export type MqttInputConfig = z.infer<typeof mqttInputSchema>;

/** True for a valid MQTT topic filter: `+` and `#` take a whole level, `#` only the last (MQTT 5 §4.7). */
export function isTopicFilter(filter: string): boolean {
  const levels = filter.split('/');
  return levels.every((level, i) => {
    if (level === '#') return i === levels.length - 1;
    if (level === '+') return true;
    return !level.includes('#') && !level.includes('+');
  });
}
