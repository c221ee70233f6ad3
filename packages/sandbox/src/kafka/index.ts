/**
 * `@scan-gateway/sandbox/kafka`: the sandbox's Kafka broker and the pieces of its protocol (codec,
 * record batches, frames, SCRAM, groups, the topic log, the CA), for tests that speak the protocol
 * byte by byte or run a broker of their own.
 */
export {
  KafkaBroker,
  DEFAULT_BROKER_LIMITS,
  type BrokerFaults,
  type BrokerLimits,
  type BrokerOptions,
  type BrokerUser,
} from './broker.js';
export { makeSandboxTls, type SandboxTls } from './ca.js';
export {
  decodeMessage,
  encodeMessage,
  isFlexible,
  Reader,
  Writer,
  type Field,
  type Message,
  type MessageSchema,
} from './codec.js';
export { apiVersionsBody, parseRequest, responseFrame, type RequestHeader } from './frames.js';
export { DEFAULT_GROUP_LIMITS, GroupCoordinator, type GroupLimits } from './groups.js';
export { ApiKey, KafkaError, Requests, Responses, SUPPORTED, type ApiKeyName } from './messages.js';
export {
  crc32c,
  decodeBatches,
  encodeBatch,
  type ProducedRecord,
  type StoredRecord,
} from './records.js';
export { ScramServer, scramCredential, type ScramCredential } from './scram.js';
export { DEFAULT_RETENTION, TopicLog, type Retention } from './topic-log.js';
