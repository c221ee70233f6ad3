/** The bounded configuration-file read, shared with the sandbox: packages/contract/src/read-file.ts. */
export { CONFIG_MAX_BYTES, readConfigFile } from '@scan-gateway/contract/read-file';
