import type { Field, MessageSchema } from './codec.js';

/**
 * The Kafka messages the sandbox broker speaks, transcribed from apache/kafka
 * `clients/src/main/resources/common/message/<Name>{Request,Response}.json` (field names in camel
 * case, tagged fields left out: the broker reads past them and writes none). Only the versions in
 * {@link SUPPORTED} are used; those are the ones librdkafka 2.0 (Debian's kcat) and
 * @platformatic/kafka 1.x ask for, so each client finds its own highest version in the range.
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

const arr = (of: Field[] | 'int32' | 'string'): { array: Field[] | 'int32' | 'string' } => ({ array: of });

export const Requests: Record<ApiKeyName, MessageSchema> = {
  ApiVersions: {
    flexibleFrom: 3,
    fields: [
      ['clientSoftwareName', 'string', '3+'],
      ['clientSoftwareVersion', 'string', '3+'],
    ],
  },
  SaslHandshake: { fields: [['mechanism', 'string']] },
  SaslAuthenticate: { flexibleFrom: 2, fields: [['authBytes', 'bytes']] },
  Metadata: {
    flexibleFrom: 9,
    fields: [
      ['topics', arr([['name', 'string']])],
      ['allowAutoTopicCreation', 'bool', '4+'],
      ['includeClusterAuthorizedOperations', 'bool', '8-10'],
      ['includeTopicAuthorizedOperations', 'bool', '8+'],
    ],
  },
  Produce: {
    flexibleFrom: 9,
    fields: [
      ['transactionalId', 'string', '3+'],
      ['acks', 'int16'],
      ['timeoutMs', 'int32'],
      [
        'topicData',
        arr([
          ['name', 'string'],
          [
            'partitionData',
            arr([
              ['index', 'int32'],
              ['records', 'bytes'],
            ]),
          ],
        ]),
      ],
    ],
  },
  ListOffsets: {
    flexibleFrom: 6,
    fields: [
      ['replicaId', 'int32'],
      ['isolationLevel', 'int8', '2+'],
      [
        'topics',
        arr([
          ['name', 'string'],
          [
            'partitions',
            arr([
              ['partitionIndex', 'int32'],
              ['currentLeaderEpoch', 'int32', '4+'],
              ['timestamp', 'int64'],
              ['maxNumOffsets', 'int32', '0'],
            ]),
          ],
        ]),
      ],
    ],
  },
  Fetch: {
    flexibleFrom: 12,
    fields: [
      ['replicaId', 'int32', '0-14'],
      ['maxWaitMs', 'int32'],
      ['minBytes', 'int32'],
      ['maxBytes', 'int32', '3+'],
      ['isolationLevel', 'int8', '4+'],
      ['sessionId', 'int32', '7+'],
      ['sessionEpoch', 'int32', '7+'],
      [
        'topics',
        arr([
          ['topic', 'string', '0-12'],
          ['topicId', 'uuid', '13+'],
          [
            'partitions',
            arr([
              ['partition', 'int32'],
              ['currentLeaderEpoch', 'int32', '9+'],
              ['fetchOffset', 'int64'],
              ['lastFetchedEpoch', 'int32', '12+'],
              ['logStartOffset', 'int64', '5+'],
              ['partitionMaxBytes', 'int32'],
            ]),
          ],
        ]),
      ],
      [
        'forgottenTopicsData',
        arr([
          ['topic', 'string', '7-12'],
          ['topicId', 'uuid', '13+'],
          ['partitions', arr('int32')],
        ]),
        '7+',
      ],
      ['rackId', 'string', '11+'],
    ],
  },
  FindCoordinator: {
    flexibleFrom: 3,
    fields: [
      ['key', 'string', '0-3'],
      ['keyType', 'int8', '1+'],
      ['coordinatorKeys', arr('string'), '4+'],
    ],
  },
  JoinGroup: {
    flexibleFrom: 6,
    fields: [
      ['groupId', 'string'],
      ['sessionTimeoutMs', 'int32'],
      ['rebalanceTimeoutMs', 'int32', '1+'],
      ['memberId', 'string'],
      ['groupInstanceId', 'string', '5+'],
      ['protocolType', 'string'],
      [
        'protocols',
        arr([
          ['name', 'string'],
          ['metadata', 'bytes'],
        ]),
      ],
      ['reason', 'string', '8+'],
    ],
  },
  SyncGroup: {
    flexibleFrom: 4,
    fields: [
      ['groupId', 'string'],
      ['generationId', 'int32'],
      ['memberId', 'string'],
      ['groupInstanceId', 'string', '3+'],
      ['protocolType', 'string', '5+'],
      ['protocolName', 'string', '5+'],
      [
        'assignments',
        arr([
          ['memberId', 'string'],
          ['assignment', 'bytes'],
        ]),
      ],
    ],
  },
  Heartbeat: {
    flexibleFrom: 4,
    fields: [
      ['groupId', 'string'],
      ['generationId', 'int32'],
      ['memberId', 'string'],
      ['groupInstanceId', 'string', '3+'],
    ],
  },
  LeaveGroup: {
    flexibleFrom: 4,
    fields: [
      ['groupId', 'string'],
      ['memberId', 'string', '0-2'],
      [
        'members',
        arr([
          ['memberId', 'string'],
          ['groupInstanceId', 'string'],
          ['reason', 'string', '5+'],
        ]),
        '3+',
      ],
    ],
  },
  OffsetCommit: {
    flexibleFrom: 8,
    fields: [
      ['groupId', 'string'],
      ['generationId', 'int32', '1+'],
      ['memberId', 'string', '1+'],
      ['groupInstanceId', 'string', '7+'],
      ['retentionTimeMs', 'int64', '2-4'],
      [
        'topics',
        arr([
          ['name', 'string'],
          [
            'partitions',
            arr([
              ['partitionIndex', 'int32'],
              ['committedOffset', 'int64'],
              ['committedLeaderEpoch', 'int32', '6+'],
              ['commitTimestamp', 'int64', '1'],
              ['committedMetadata', 'string'],
            ]),
          ],
        ]),
      ],
    ],
  },
  OffsetFetch: {
    flexibleFrom: 6,
    fields: [
      ['groupId', 'string', '0-7'],
      [
        'topics',
        arr([
          ['name', 'string'],
          ['partitionIndexes', arr('int32')],
        ]),
        '0-7',
      ],
      [
        'groups',
        arr([
          ['groupId', 'string'],
          ['memberId', 'string', '9+'],
          ['memberEpoch', 'int32', '9+'],
          [
            'topics',
            arr([
              ['name', 'string'],
              ['partitionIndexes', arr('int32')],
            ]),
          ],
        ]),
        '8+',
      ],
      ['requireStable', 'bool', '7+'],
    ],
  },
};

export const Responses: Record<ApiKeyName, MessageSchema> = {
  ApiVersions: {
    flexibleFrom: 3,
    fields: [
      ['errorCode', 'int16'],
      [
        'apiKeys',
        arr([
          ['apiKey', 'int16'],
          ['minVersion', 'int16'],
          ['maxVersion', 'int16'],
        ]),
      ],
      ['throttleTimeMs', 'int32', '1+'],
    ],
  },
  SaslHandshake: {
    fields: [
      ['errorCode', 'int16'],
      ['mechanisms', arr('string')],
    ],
  },
  SaslAuthenticate: {
    flexibleFrom: 2,
    fields: [
      ['errorCode', 'int16'],
      ['errorMessage', 'string'],
      ['authBytes', 'bytes'],
      ['sessionLifetimeMs', 'int64', '1+'],
    ],
  },
  Metadata: {
    flexibleFrom: 9,
    fields: [
      ['throttleTimeMs', 'int32', '3+'],
      [
        'brokers',
        arr([
          ['nodeId', 'int32'],
          ['host', 'string'],
          ['port', 'int32'],
          ['rack', 'string', '1+'],
        ]),
      ],
      ['clusterId', 'string', '2+'],
      ['controllerId', 'int32', '1+'],
      [
        'topics',
        arr([
          ['errorCode', 'int16'],
          ['name', 'string'],
          ['topicId', 'uuid', '10+'],
          ['isInternal', 'bool', '1+'],
          [
            'partitions',
            arr([
              ['errorCode', 'int16'],
              ['partitionIndex', 'int32'],
              ['leaderId', 'int32'],
              ['leaderEpoch', 'int32', '7+'],
              ['replicaNodes', arr('int32')],
              ['isrNodes', arr('int32')],
              ['offlineReplicas', arr('int32'), '5+'],
            ]),
          ],
          ['topicAuthorizedOperations', 'int32', '8+'],
        ]),
      ],
      ['clusterAuthorizedOperations', 'int32', '8-10'],
    ],
  },
  Produce: {
    flexibleFrom: 9,
    fields: [
      [
        'responses',
        arr([
          ['name', 'string'],
          [
            'partitionResponses',
            arr([
              ['index', 'int32'],
              ['errorCode', 'int16'],
              ['baseOffset', 'int64'],
              ['logAppendTimeMs', 'int64', '2+'],
              ['logStartOffset', 'int64', '5+'],
              [
                'recordErrors',
                arr([
                  ['batchIndex', 'int32'],
                  ['batchIndexErrorMessage', 'string'],
                ]),
                '8+',
              ],
              ['errorMessage', 'string', '8+'],
            ]),
          ],
        ]),
      ],
      ['throttleTimeMs', 'int32', '1+'],
    ],
  },
  ListOffsets: {
    flexibleFrom: 6,
    fields: [
      ['throttleTimeMs', 'int32', '2+'],
      [
        'topics',
        arr([
          ['name', 'string'],
          [
            'partitions',
            arr([
              ['partitionIndex', 'int32'],
              ['errorCode', 'int16'],
              ['timestamp', 'int64', '1+'],
              ['offset', 'int64', '1+'],
              ['leaderEpoch', 'int32', '4+'],
            ]),
          ],
        ]),
      ],
    ],
  },
  Fetch: {
    flexibleFrom: 12,
    fields: [
      ['throttleTimeMs', 'int32', '1+'],
      ['errorCode', 'int16', '7+'],
      ['sessionId', 'int32', '7+'],
      [
        'responses',
        arr([
          ['topic', 'string', '0-12'],
          ['topicId', 'uuid', '13+'],
          [
            'partitions',
            arr([
              ['partitionIndex', 'int32'],
              ['errorCode', 'int16'],
              ['highWatermark', 'int64'],
              ['lastStableOffset', 'int64', '4+'],
              ['logStartOffset', 'int64', '5+'],
              [
                'abortedTransactions',
                arr([
                  ['producerId', 'int64'],
                  ['firstOffset', 'int64'],
                ]),
                '4+',
              ],
              ['preferredReadReplica', 'int32', '11+'],
              ['records', 'bytes'],
            ]),
          ],
        ]),
      ],
    ],
  },
  FindCoordinator: {
    flexibleFrom: 3,
    fields: [
      ['throttleTimeMs', 'int32', '1+'],
      ['errorCode', 'int16', '0-3'],
      ['errorMessage', 'string', '1-3'],
      ['nodeId', 'int32', '0-3'],
      ['host', 'string', '0-3'],
      ['port', 'int32', '0-3'],
      [
        'coordinators',
        arr([
          ['key', 'string'],
          ['nodeId', 'int32'],
          ['host', 'string'],
          ['port', 'int32'],
          ['errorCode', 'int16'],
          ['errorMessage', 'string'],
        ]),
        '4+',
      ],
    ],
  },
  JoinGroup: {
    flexibleFrom: 6,
    fields: [
      ['throttleTimeMs', 'int32', '2+'],
      ['errorCode', 'int16'],
      ['generationId', 'int32'],
      ['protocolType', 'string', '7+'],
      ['protocolName', 'string'],
      ['leader', 'string'],
      ['skipAssignment', 'bool', '9+'],
      ['memberId', 'string'],
      [
        'members',
        arr([
          ['memberId', 'string'],
          ['groupInstanceId', 'string', '5+'],
          ['metadata', 'bytes'],
        ]),
      ],
    ],
  },
  SyncGroup: {
    flexibleFrom: 4,
    fields: [
      ['throttleTimeMs', 'int32', '1+'],
      ['errorCode', 'int16'],
      ['protocolType', 'string', '5+'],
      ['protocolName', 'string', '5+'],
      ['assignment', 'bytes'],
    ],
  },
  Heartbeat: {
    flexibleFrom: 4,
    fields: [
      ['throttleTimeMs', 'int32', '1+'],
      ['errorCode', 'int16'],
    ],
  },
  LeaveGroup: {
    flexibleFrom: 4,
    fields: [
      ['throttleTimeMs', 'int32', '1+'],
      ['errorCode', 'int16'],
      [
        'members',
        arr([
          ['memberId', 'string'],
          ['groupInstanceId', 'string'],
          ['errorCode', 'int16'],
        ]),
        '3+',
      ],
    ],
  },
  OffsetCommit: {
    flexibleFrom: 8,
    fields: [
      ['throttleTimeMs', 'int32', '3+'],
      [
        'topics',
        arr([
          ['name', 'string'],
          [
            'partitions',
            arr([
              ['partitionIndex', 'int32'],
              ['errorCode', 'int16'],
            ]),
          ],
        ]),
      ],
    ],
  },
  OffsetFetch: {
    flexibleFrom: 6,
    fields: [
      ['throttleTimeMs', 'int32', '3+'],
      [
        'topics',
        arr([
          ['name', 'string'],
          [
            'partitions',
            arr([
              ['partitionIndex', 'int32'],
              ['committedOffset', 'int64'],
              ['committedLeaderEpoch', 'int32', '5+'],
              ['metadata', 'string'],
              ['errorCode', 'int16'],
            ]),
          ],
        ]),
        '0-7',
      ],
      ['errorCode', 'int16', '2-7'],
      [
        'groups',
        arr([
          ['groupId', 'string'],
          [
            'topics',
            arr([
              ['name', 'string'],
              [
                'partitions',
                arr([
                  ['partitionIndex', 'int32'],
                  ['committedOffset', 'int64'],
                  ['committedLeaderEpoch', 'int32'],
                  ['metadata', 'string'],
                  ['errorCode', 'int16'],
                ]),
              ],
            ]),
          ],
          ['errorCode', 'int16'],
        ]),
        '8+',
      ],
    ],
  },
};
