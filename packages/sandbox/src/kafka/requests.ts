import type { Field, MessageSchema } from './codec.js';
import type { ApiKeyName } from './messages.js';

/** One array field of `of` (a nested message's fields, or int32/string elements). */
const arr = (of: Field[] | 'int32' | 'string'): { array: Field[] | 'int32' | 'string' } => ({
  array: of,
});

/** The request bodies of every API in `SUPPORTED` (messages.ts), per version. */
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
