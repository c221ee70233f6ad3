/** What kind of file a `Stats` describes, in words; shared with the sandbox: packages/contract/src/read-file.ts. */
export { fileKind } from '@scan-gateway/contract/read-file';
