import type { Field, MessageSchema } from './codec.js';
import type { ApiKeyName } from './messages.js';

/** One array field of `of` (a nested message's fields, or int32/string elements). */
const arr = (of: Field[] | 'int32' | 'string'): { array: Field[] | 'int32' | 'string' } => ({
  array: of,
});

/** The response bodies of every API in `SUPPORTED` (messages.ts), per version. */
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
