/**
 * The Kafka messages the sandbox broker speaks, transcribed from apache/kafka
 * `clients/src/main/resources/common/message/<Name>{Request,Response}.json` (field names in camel
 * case, tagged fields left out: the broker reads past them and writes none). Only the versions in
 * {@link SUPPORTED} are used; those are the ones librdkafka 2.0 (Debian's kcat) and
 * @platformatic/kafka 1.x ask for, so each client finds its own highest version in the range.
 * The API keys, error codes and version ranges are here; the bodies in `requests.ts` and
 * `responses.ts`.
 */

export const ApiKey = {
  Produce: 0,
  Fetch: 1,
  ListOffsets: 2,
  Metadata: 3,
  OffsetCommit: 8,
  OffsetFetch: 9,
  FindCoordinator: 10,
  JoinGroup: 11,
  Heartbeat: 12,
  LeaveGroup: 13,
  SyncGroup: 14,
  SaslHandshake: 17,
  ApiVersions: 18,
  SaslAuthenticate: 36,
} as const;
export type ApiKeyName = keyof typeof ApiKey;

/** Kafka error codes the broker answers with (https://kafka.apache.org/protocol#protocol_error_codes). */
export const KafkaError = {
  NONE: 0,
  OFFSET_OUT_OF_RANGE: 1,
  CORRUPT_MESSAGE: 2,
  UNKNOWN_TOPIC_OR_PARTITION: 3,
  COORDINATOR_NOT_AVAILABLE: 15,
  NOT_COORDINATOR: 16,
  INVALID_REQUIRED_ACKS: 21,
  ILLEGAL_GENERATION: 22,
  INCONSISTENT_GROUP_PROTOCOL: 23,
  INVALID_GROUP_ID: 24,
  UNKNOWN_MEMBER_ID: 25,
  INVALID_SESSION_TIMEOUT: 26,
  REBALANCE_IN_PROGRESS: 27,
  TOPIC_AUTHORIZATION_FAILED: 29,
  GROUP_AUTHORIZATION_FAILED: 30,
  UNSUPPORTED_SASL_MECHANISM: 33,
  ILLEGAL_SASL_STATE: 34,
  UNSUPPORTED_VERSION: 35,
  INVALID_REQUEST: 42,
  GROUP_MAX_SIZE_REACHED: 81,
  SASL_AUTHENTICATION_FAILED: 58,
  UNSUPPORTED_COMPRESSION_TYPE: 76,
  MEMBER_ID_REQUIRED: 79,
} as const;

/** Version ranges the broker announces in ApiVersions; requests outside them close the connection. */
export const SUPPORTED: Record<ApiKeyName, { min: number; max: number }> = {
  // Record batch v2 needs Produce v3+ and Fetch v4+; @platformatic/kafka starts at Produce v7, Fetch v12.
  Produce: { min: 3, max: 7 },
  Fetch: { min: 4, max: 12 },
  ListOffsets: { min: 1, max: 5 },
  Metadata: { min: 1, max: 9 },
  OffsetCommit: { min: 2, max: 8 },
  OffsetFetch: { min: 1, max: 8 },
  FindCoordinator: { min: 0, max: 4 },
  JoinGroup: { min: 0, max: 6 },
  Heartbeat: { min: 0, max: 4 },
  LeaveGroup: { min: 0, max: 4 },
  SyncGroup: { min: 0, max: 4 },
  // librdkafka looks for v0 in the range to know the broker does SASL handshakes at all.
  SaslHandshake: { min: 0, max: 1 },
  ApiVersions: { min: 0, max: 3 },
  SaslAuthenticate: { min: 0, max: 2 },
};

export { Requests } from './requests.js';
export { Responses } from './responses.js';
