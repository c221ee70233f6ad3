import { describe, expect, it } from 'vitest';
import { DEFAULT_HTTP_LIMITS as SANDBOX_DEFAULTS } from '@scan-gateway/sandbox';
import { DEFAULT_HTTP_LIMITS } from '../../src/config/schema.js';

// The sandbox, a package of its own, keeps its own copy of the listener bounds rather than import
// the daemon's configuration schema; a demo port is reachable too, so the copy must not drift.
describe("the sandbox's HTTP listener bounds", () => {
  it("are the defaults of the gateway's http.limits", () => {
    expect(SANDBOX_DEFAULTS).toEqual(DEFAULT_HTTP_LIMITS);
  });
});
