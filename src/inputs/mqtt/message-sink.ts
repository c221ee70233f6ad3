import { ErrorCodes, GatewayError } from '../../errors.js';
import type { IntakeItem, IntakeSink, SubmitResult } from '../types.js';

/**
 * What the MQTT input asks of the sink beyond {@link IntakeSink.submit}: a QoS 1 message's identity
 * recorded in the same SQLite transaction as its read, so the broker's resend of a message
 * committed before (its PUBACK lost in a crash or a dropped connection) is acknowledged without
 * being stored again (docs/inputs.md, "mqtt"). The gateway's intake (src/intake/intake.ts)
 * implements it.
 */
export interface MessageSink extends IntakeSink {
  /**
   * Commits the items of one QoS 1 message with its identity. When `message.dup` is set (the
   * broker's resend) and that identity is recorded already, resolves with `redelivered: true` and
   * stores nothing. The identity's input is the first item's: a submit of no items records none.
   */
  submitMessage(items: IntakeItem[], message: MqttMessage): Promise<MessageSubmitResult | void>;
  /**
   * Forgets the message identities recorded for an input: its broker holds no session any more,
   * so none of those messages can come again, and their packet ids start afresh.
   */
  forgetMessages(inputId: string): void;
}

/** A QoS 1 message's identity, as the broker hands it. */
export interface MqttMessage {
  /** MQTT packet identifier, 1..65535; unique among the session's unacknowledged messages. */
  packetId: number;
  topic: string;
  /** SHA-256 of the whole payload (32 bytes). */
  payloadSha256: Buffer;
  /** The broker's DUP flag: a resend of a message it sent before. */
  dup: boolean;
}

/** What {@link MessageSink.submitMessage} answers. */
export interface MessageSubmitResult extends SubmitResult {
  /** The message was committed before: nothing stored, `outcomes` empty. */
  redelivered?: true;
}

/**
 * The sink an MQTT input was given, as the {@link MessageSink} it needs.
 *
 * @throws GatewayError `SCANGW_E_INTERNAL` when the sink records no messages (a bug: the gateway's
 *   intake does; a sink that did not would store the broker's resends twice).
 */
export function messageSinkOf(sink: IntakeSink, inputId: string): MessageSink {
  const s = sink as Partial<MessageSink>;
  if (typeof s.submitMessage === 'function' && typeof s.forgetMessages === 'function')
    return sink as MessageSink;
  throw new GatewayError(
    ErrorCodes.INTERNAL,
    `mqtt input ${inputId}: its sink records no messages (submitMessage, forgetMessages)`,
  );
}
