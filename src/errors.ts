/**
 * The gateway's error model: `GatewayError`, its stable `SCANGW_E_*` codes and the predicates
 * callers branch on. It lives in the workspace package `@scan-gateway/service-kit`
 * (packages/service-kit/src/errors.ts) because the sandbox, a package of its own, throws the same
 * errors the CLI branches on; every room of src/ imports it from here, as before.
 */
export * from '@scan-gateway/service-kit/errors';
