import { readFile } from 'node:fs/promises';
import type { IClientOptions } from 'mqtt';
import type { MqttInputConfig } from './schema.js';
import { ErrorCodes, GatewayError } from '../../errors.js';
import { readSecret } from '../../config/secrets.js';

/** The retained status topic of an input, or undefined when `statusTopic: false`. */
export function statusTopicOf(
  config: Pick<MqttInputConfig, 'statusTopic' | 'clientId'>,
): string | undefined {
  if (config.statusTopic === false) return undefined;
  return config.statusTopic ?? `scan-gateway/${config.clientId}/status`;
}

/** The broker URL without user information, for status and logs. */
export function safeUrl(url: string): string {
  return url.replace(/^([a-z]+:\/\/)[^/@]*@/i, '$1');
}

/**
 * Room in a PUBLISH packet beyond its payload, in bytes: the fixed header (5), the topic (2 + up
 * to 65,535), the packet id (2) and properties (1 KiB is more than any broker adds). Payloads
 * somewhat over `maxPayloadBytes` still reach the gateway and are stored as rejections.
 */
export const PUBLISH_OVERHEAD_BYTES = 65_536 + 1024;
/** The largest packet MQTT can carry (MQTT 5 §1.5.5, a 4-byte variable byte integer), plus its header. */
const MQTT_MAX_PACKET_BYTES = 268_435_460;

/**
 * MQTT 5 `maximumPacketSize` sent in CONNECT for a payload limit: the broker sends no bigger
 * packet to the gateway (MQTT 5 §3.1.2.11.4: it drops the message for this client instead).
 */
export function maximumPacketSize(maxPayloadBytes: number): number {
  return Math.min(MQTT_MAX_PACKET_BYTES, maxPayloadBytes + PUBLISH_OVERHEAD_BYTES);
}

/**
 * mqtt.js options for an input: persistent session (`clean: false`, the stable `clientId`, MQTT 5
 * session expiry), receive maximum = `maxInFlight`, maximum packet size from `maxPayloadBytes`
 * ({@link maximumPacketSize}), TLS material read from its files (server
 * certificates always verified), the password from `passwordEnv` or `passwordFile`, and a
 * retained last will `offline` on the status topic. With `willDelaySec` (MQTT 5, two nodes sharing
 * one session under high availability) the broker holds the will that long and drops it when the
 * session is resumed meanwhile (MQTT 5.0 §3.1.3.2.2), so a takeover does not leave a retained
 * `offline` over the new leader's `online`.
 *
 * @throws GatewayError `SCANGW_E_SECRET` when the password file cannot be read or the named
 *   environment variable is unset; `SCANGW_E_INPUT` when a TLS file cannot be read.
 */
export async function mqttClientOptions(
  config: MqttInputConfig,
  env: Record<string, string | undefined>,
  opts: { willDelaySec?: number } = {},
): Promise<IClientOptions> {
  const what = `MQTT password of input ${config.id}`;
  const password = await readSecret({
    what,
    envName: config.passwordEnv,
    file: config.passwordFile,
    env,
  });
  if (config.passwordEnv !== undefined && password === undefined) {
    throw new GatewayError(
      ErrorCodes.SECRET,
      `the ${what} is missing: environment variable ${config.passwordEnv} is not set`,
    );
  }
  const tls = async (
    file: string | undefined,
    key: 'ca' | 'cert' | 'key',
  ): Promise<Partial<IClientOptions>> => {
    if (file === undefined) return {};
    try {
      return { [key]: await readFile(file) };
    } catch (err) {
      throw new GatewayError(
        ErrorCodes.INPUT,
        `input ${config.id}: cannot read ${key} file ${file}: ${(err as Error).message}`,
        { cause: err },
      );
    }
  };
  const statusTopic = statusTopicOf(config);
  return {
    clientId: config.clientId,
    clean: false,
    protocolVersion: config.protocolVersion,
    keepalive: config.keepaliveSec,
    reconnectPeriod: config.reconnectMs,
    connectTimeout: config.connectTimeoutMs,
    // A refused CONNECT (bad credentials, broker starting) is retried like a lost connection.
    reconnectOnConnackError: true,
    resubscribe: true,
    queueQoSZero: false,
    // mqtt-packet otherwise builds, on the first packet written, a table of 65,536 two-byte Buffers
    // for packet ids (6 MiB of heap for the life of the process, seen in a heap snapshot); the
    // gateway writes only SUBSCRIBE, PUBACK and PINGREQ, so allocating each id is cheaper.
    writeCache: false,
    rejectUnauthorized: true,
    ...(await tls(config.caFile, 'ca')),
    ...(await tls(config.certFile, 'cert')),
    ...(await tls(config.keyFile, 'key')),
    ...(config.username !== undefined ? { username: config.username } : {}),
    ...(password !== undefined ? { password } : {}),
    ...(statusTopic
      ? {
          will: {
            topic: statusTopic,
            payload: Buffer.from('offline'),
            qos: 1 as const,
            retain: true,
            ...(config.protocolVersion === 5 && opts.willDelaySec
              ? { properties: { willDelayInterval: opts.willDelaySec } }
              : {}),
          },
        }
      : {}),
    ...(config.protocolVersion === 5
      ? {
          properties: {
            sessionExpiryInterval: config.sessionExpirySec,
            receiveMaximum: config.maxInFlight,
            maximumPacketSize: maximumPacketSize(config.maxPayloadBytes),
          },
        }
      : {}),
  };
}

/**
 * `promise`, or a rejection after `ms` (the publish and end of a disconnect, which mqtt.js may
 * never settle on a dead connection).
 *
 * @throws GatewayError `SCANGW_E_INPUT` when `ms` pass first.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<T>(
      (_, reject) =>
        (timer = setTimeout(
          () => reject(new GatewayError(ErrorCodes.INPUT, `timed out after ${ms} ms`)),
          ms,
        )),
    ),
  ]);
}
