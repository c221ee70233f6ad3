import type { IClientOptions, MqttClient } from 'mqtt';
import type { MqttInputConfig } from './schema.js';
import type { Logger } from '../../log.js';
import type { MessageSink } from './message-sink.js';
import type { Clock } from '../../clock.js';

/** What an {@link MqttInput} needs; `connect` is the seam for tests (default mqtt.js `connect`). */
export interface MqttInputOptions {
  config: MqttInputConfig;
  /** The intake: commits each QoS 1 message's read with the message's identity. */
  sink: MessageSink;
  logger: Logger;
  /** Environment for `passwordEnv` (the process edge hands it down); default none. */
  env?: Record<string, string | undefined>;
  now?: Clock;
  /** Creates the client (asked with `manualConnect: true`; the input connects it); default mqtt.js `connect`. */
  connect?: (url: string, options: IClientOptions) => MqttClient;
  /** First delay before retrying a refused submit, in ms (doubles up to 30 s); default 500. */
  submitRetryBaseMs?: number;
  /** Longest wait, on pause and stop, for messages in flight to be committed and acknowledged, in ms. Default 10 000. */
  settleTimeoutMs?: number;
  /**
   * Test seam: called after a QoS 1 message's read is committed and before its PUBACK is queued
   * (the window a crash must hit for the broker to send a committed message again).
   */
  onCommitted?: (messageId: number) => void;
  /**
   * High availability: the input runs on the leader only, and both nodes share its client id and
   * session. mqtt.js's own reconnect is off; the input connects again after a lost connection only
   * while `mayConnect()` answers true (this node holds the lease), and never after the broker said
   * the session was taken over (MQTT 5 DISCONNECT 0x8E): two nodes must not evict each other.
   * `willDelaySec`: how long the broker holds the `offline` will, in s (see mqttClientOptions).
   */
  ha?: { mayConnect: () => boolean; willDelaySec?: number };
}

/** MQTT 5 DISCONNECT reason code: another connection with the same client id took the session over. */
export const SESSION_TAKEN_OVER = 0x8e;
