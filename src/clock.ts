/**
 * `Clock` (epoch milliseconds, like `Date.now`) and `systemClock`: the one clock type of every part,
 * the sandbox's included. It lives in the workspace package `@scan-gateway/service-kit`
 * (packages/service-kit/src/clock.ts), which the daemon and the sandbox share.
 */
export * from '@scan-gateway/service-kit/clock';
