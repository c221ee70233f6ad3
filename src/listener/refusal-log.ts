/**
 * Rate-limited lines for refused calls: `RefusalLog`, shared with the sandbox through the
 * workspace package `@scan-gateway/contract` (packages/contract/src/refusal-log.ts).
 */
export {
  RefusalLog,
  REFUSAL_LOG_INTERVAL_MS,
  type WarnLogger,
} from '@scan-gateway/contract/refusal-log';
