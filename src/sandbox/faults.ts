import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { sendProblem } from './problem.js';
import type { SandboxState } from './state.js';
import { NO_FAULTS, type Faults, type faultsPatchSchema } from './types.js';
import type { z } from 'zod';

/**
 * Fault injection and the request log. Faults hit `/api/*` and the pre-signed PUT; the token
 * endpoint and `/_sandbox/*` always answer normally, so a test can always reconfigure.
 */
export class FaultSwitch {
  private faults: Faults;
  private errorToggle = false;

  constructor(initial: Partial<Faults> = {}) {
    this.faults = { ...NO_FAULTS };
    this.apply(initial);
  }

  current(): Faults {
    return { ...this.faults };
  }

  /** Merges a change; `null` (from JSON) clears an optional override. */
  apply(patch: Partial<Faults> | z.infer<typeof faultsPatchSchema>): Faults {
    const next: Record<string, unknown> = { ...this.faults };
    for (const [key, value] of Object.entries(patch)) {
      if (value === null) delete next[key];
      else if (value !== undefined) next[key] = value;
    }
    this.faults = next as Faults;
    return this.current();
  }

  /** 500 and 503 alternate so both show up under any error rate. */
  nextErrorStatus(): number {
    this.errorToggle = !this.errorToggle;
    return this.errorToggle ? 503 : 500;
  }
}

/** Whether faults apply to this request path. */
export function faultsApply(url: string): boolean {
  return url.startsWith('/api/') || url.startsWith('/_presigned/');
}

/**
 * Registers the `onRequest` hook that injects faults and the `onResponse` hook that writes the
 * request log (every request except `/_sandbox/*`; method, path, status, time, never headers).
 */
export function registerFaultHooks(app: FastifyInstance, switchboard: FaultSwitch, state: SandboxState): void {
  const started = new WeakMap<FastifyRequest, number>();
  app.addHook('onRequest', async (request, reply) => {
    started.set(request, performance.now());
    if (!faultsApply(request.url)) return;
    const f = switchboard.current();
    if (f.latencyMs > 0) await sleep(f.latencyMs);
    if (f.resetRate > 0 && Math.random() < f.resetRate) {
      state.logRequest(logLine(request, 0, started.get(request)));
      reply.hijack();
      request.raw.socket.destroy();
      return reply;
    }
    if (f.rateLimitRate > 0 && Math.random() < f.rateLimitRate) {
      reply.header('retry-after', String(Math.ceil(f.retryAfterSec)));
      return sendProblem(request, reply, 429, 'Rate limit exceeded (injected fault).');
    }
    if (f.errorRate > 0 && Math.random() < f.errorRate) {
      const status = switchboard.nextErrorStatus();
      return sendProblem(request, reply, status, 'Injected fault.');
    }
  });
  app.addHook('onResponse', async (request, reply) => {
    if (request.url.startsWith('/_sandbox/')) return;
    state.logRequest(logLine(request, reply.statusCode, started.get(request)));
  });
}

function logLine(request: FastifyRequest, status: number, startedAt: number | undefined) {
  return {
    method: request.method,
    path: request.url,
    status,
    time: new Date().toISOString(),
    ms: startedAt === undefined ? 0 : Math.round(performance.now() - startedAt),
  };
}
