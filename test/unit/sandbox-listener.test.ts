import { describe, expect, it } from 'vitest';
import { DEFAULT_HTTP_LIMITS as SANDBOX_DEFAULTS } from '@scan-gateway/sandbox';
import { LISTENER_LIMIT_DEFAULTS } from '@scan-gateway/service-kit/listener-limits';
import { DEFAULT_HTTP_LIMITS } from '../../src/config/schema.js';

// The sandbox, a package of its own, cannot import the daemon's configuration schema; a demo port
// is reachable too, so both take the listener bounds from @scan-gateway/service-kit/listener-limits.
// The gateway's http.limits also holds shares the sandbox has no use for (item lookups, station
// streams, connections per client): the shared bounds are the timeouts and the cap, and the
// schema's defaults of those must be the shared ones.
describe("the sandbox's HTTP listener bounds", () => {
  it("are the defaults of the gateway's http.limits", () => {
    const shared = Object.fromEntries(
      Object.keys(SANDBOX_DEFAULTS).map((k) => [
        k,
        DEFAULT_HTTP_LIMITS[k as keyof typeof DEFAULT_HTTP_LIMITS],
      ]),
    );
    expect(SANDBOX_DEFAULTS).toEqual(shared);
    expect(SANDBOX_DEFAULTS).toBe(LISTENER_LIMIT_DEFAULTS);
    expect(Object.keys(SANDBOX_DEFAULTS).sort()).toEqual([
      'headersTimeoutMs',
      'idleTimeoutMs',
      'keepAliveTimeoutMs',
      'maxConnections',
      'maxRequestsPerSocket',
      'requestTimeoutMs',
    ]);
  });
});
