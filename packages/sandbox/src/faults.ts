import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendProblem } from './problem.js';
import type { SandboxState } from './state.js';
import { NO_FAULTS, type Faults, type faultsPatchSchema } from './types.js';
import type { z } from 'zod';

/**
 * Fault injection and the request log. The API faults hit `/api/*` and the pre-signed PUT; the
 * `token*` faults hit `/oauth2/token` only, so an auth server can fail while the API works and
 * the other way round; `/_sandbox/*` always answers normally, so a test can always reconfigure.
 */
export class FaultSwitch {
  private faults: Faults;
  private errorToggle = false;
  private tokenErrorToggle = false;
  private readonly listeners = new Set<(faults: Faults) => void>();

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
    for (const listener of this.listeners) listener(this.current());
    return this.current();
  }

  /** Calls `listener` after every change (the Kafka endpoint goes down and up with `kafkaDown`). */
  onChange(listener: (faults: Faults) => void): void {
    this.listeners.add(listener);
  }

  /** 500 and 503 alternate so both show up under any error rate. */
  nextErrorStatus(): number {
    this.errorToggle = !this.errorToggle;
    return this.errorToggle ? 503 : 500;
  }

  /** As {@link nextErrorStatus}, separately for the token endpoint. */
  nextTokenErrorStatus(): number {
    this.tokenErrorToggle = !this.tokenErrorToggle;
    return this.tokenErrorToggle ? 503 : 500;
  }
}

/** Whether the API faults apply to this request path. */
export function faultsApply(url: string): boolean {
  return url.startsWith('/api/') || url.startsWith('/_presigned/');
}

/** Path of the token endpoint (contract §5), the one the `token*` faults reach. */
export const TOKEN_PATH = '/oauth2/token';

/** Whether the token faults apply to this request path. */
export function tokenFaultsApply(url: string): boolean {
  return url.split('?')[0] === TOKEN_PATH;
}

/**
 * A 200 token answer that cannot be read: JSON cut off after its first member, as a proxy or a
 * broken auth server may hand out. It holds no usable token.
 */
export const UNREADABLE_TOKEN_ANSWER = '{"token_type":"Bearer","access_token":';

function hit(rate: number | undefined): boolean {
  return rate !== undefined && rate > 0 && Math.random() < rate;
}

/**
 * Registers the `onRequest` hook that injects faults and the `onResponse` hook that writes the
 * request log (every request except `/_sandbox/*`; method, path, status, time, never headers).
 */
export function registerFaultHooks(
  app: FastifyInstance,
  switchboard: FaultSwitch,
  state: SandboxState,
): void {
  const started = new WeakMap<FastifyRequest, number>();
  app.addHook('onRequest', async (request, reply) => {
    started.set(request, performance.now());
    if (tokenFaultsApply(request.url)) return tokenFault(request, reply);
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
  /** Faults of the auth server: slow, down (reset), unreadable 200, 5xx in RFC 6749 error JSON. */
  async function tokenFault(
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<FastifyReply | undefined> {
    const f = switchboard.current();
    if ((f.tokenLatencyMs ?? 0) > 0) await sleep(f.tokenLatencyMs);
    if (hit(f.tokenResetRate)) {
      state.logRequest(logLine(request, 0, started.get(request)));
      reply.hijack();
      request.raw.socket.destroy();
      return reply;
    }
    if (hit(f.tokenUnreadableRate)) {
      return reply
        .code(200)
        .header('cache-control', 'no-store')
        .type('application/json')
        .send(UNREADABLE_TOKEN_ANSWER);
    }
    if (hit(f.tokenErrorRate)) {
      return reply
        .code(switchboard.nextTokenErrorStatus())
        .header('cache-control', 'no-store')
        .type('application/json')
        .send({ error: 'server_error', error_description: 'Injected fault.' });
    }
    return undefined;
  }
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
