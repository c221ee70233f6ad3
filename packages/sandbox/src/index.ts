/**
 * `@scan-gateway/sandbox`: the local emulator of the Battery Product and Traceability Scan Service
 * (OAuth token, products, scans, pre-signed uploads, status, an SFTP endpoint and status events on a
 * Kafka broker), for the demo (`npm start`), `scan-gateway sandbox` and the tests. The daemon loads
 * it only by `import()` when it runs one, so a gateway on site never loads it; the broker's own
 * pieces are exported by `@scan-gateway/sandbox/kafka`.
 */
export {
  DEMO_SECRET_FILE,
  buildSandboxApp,
  demoClient,
  newSandboxMemory,
  startSandbox,
  type SandboxMemory,
} from './server.js';
export { loadSandboxConfig, sandboxFileSchema } from './config.js';
export {
  DEMO_CLIENT_ID,
  DEMO_DCPS,
  DEMO_PRODUCTS,
  NO_FAULTS,
  faultsPatchSchema,
  faultsSchema,
  type Faults,
  type FaultsPatch,
  type RunningSandbox,
  type SandboxClient,
  type SandboxKafkaInfo,
  type SandboxKafkaOptions,
  type SandboxOptions,
} from './types.js';
export {
  FAILURE_REASONS,
  MAX_LOGGED_REQUESTS,
  MAX_LOGGED_SCANS,
  SandboxState,
  type LoggedRequest,
  type LoggedScan,
  type StatusListener,
} from './state.js';
export { generateEd25519KeyPair, type RunningSandboxSftp, type SandboxSftpFile } from './sftp.js';
export {
  LISTENER_LIMIT_DEFAULTS as DEFAULT_HTTP_LIMITS,
  type ListenerLimits as HttpLimitsConfig,
} from '@scan-gateway/service-kit/listener-limits';
