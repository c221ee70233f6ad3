import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { ErrorCodes, isGatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import { RefusalLog } from '@scan-gateway/service-kit/refusal-log';
import type { AdminActionName } from './status.js';
import { guard } from '../listener/route-guard.js';
import { tokenGuard, type TokenGuard } from '../listener/rotating-token.js';

/** What an admin action answers (shown on the page). */
export interface AdminResult {
  message: string;
  [detail: string]: unknown;
}

/**
 * The operations behind the admin buttons, provided by the app. `replay` is present only when the
 * gateway can replay failed scans. `body` is the request's JSON body, if any (replay filters).
 */
export type AdminActions = {
  [K in Exclude<AdminActionName, 'replay' | 'close-container'>]: () =>
    AdminResult | Promise<AdminResult>;
} & {
  replay?: (body: unknown) => AdminResult | Promise<AdminResult>;
  /**
   * Closes or abandons the open container of a station by a supervisor's hand; `remote` is the
   * caller's address, recorded with the name given.
   */
  'close-container'?: (body: unknown, remote: string) => AdminResult | Promise<AdminResult>;
};

/**
 * Whether an `Authorization` header carries `expected` either as a bearer token or as the password
 * of HTTP Basic (any user name): a browser asks for Basic credentials itself on a 401 with
 * `WWW-Authenticate: Basic`, and keeps them for the page's own requests, while a token in the URL
 * would land in logs and browser history. Constant time as {@link bearerMatches}.
 */
export function readTokenMatches(expected: string, header: string | undefined): boolean {
  const basic = /^Basic[ \t]+([A-Za-z0-9+/=]+)[ \t]*$/i.exec(header ?? '');
  if (!basic) return bearerMatches(expected, header);
  const decoded = Buffer.from(basic[1] ?? '', 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return bearerMatches(expected, `Bearer ${colon < 0 ? '' : decoded.slice(colon + 1)}`);
}

/**
 * Whether an `Authorization` header carries `expected` as its bearer token. Both sides are hashed
 * to the same length first, so the comparison takes the same time whatever the length or content
 * of the guess.
 */
export function bearerMatches(expected: string, header: string | undefined): boolean {
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? '');
  const given = match?.[1] ?? '';
  const a = createHash('sha256').update(expected, 'utf8').digest();
  const b = createHash('sha256').update(given, 'utf8').digest();
  return timingSafeEqual(a, b) && given.length > 0;
}

export interface AdminRoutesOptions {
  /** The configured token (a reload may replace it); undefined = admin actions off (every call answered 403). */
  token: string | TokenGuard | undefined;
  actions: AdminActions;
  logger: Logger;
  /** Where refused calls are noted (rate-limited log line and count); default a {@link RefusalLog} of `logger`. */
  refusals?: { note(fields: Record<string, unknown>): void };
}

/** Names of the actions available with these options. */
export function availableActions(
  options: Pick<AdminRoutesOptions, 'token' | 'actions'>,
): AdminActionName[] {
  if (!tokenGuard(options.token).configured()) return [];
  return [
    'retry',
    'pause',
    'resume',
    ...(options.actions.replay ? (['replay'] as const) : []),
    ...(options.actions['close-container'] ? (['close-container'] as const) : []),
  ];
}

/**
 * `POST /api/v1/admin/{retry|pause|resume|replay|close-container}` with `Authorization: Bearer <admin token>`.
 * 200 `{ ok: true, message, … }`; 401 without the right token; 403 when no token is configured;
 * 404 for an unknown or unavailable action. A bearer header cannot be sent cross-site without a
 * CORS preflight (which this server never grants), so a web page elsewhere cannot press the buttons.
 */
export function registerAdminRoutes(app: FastifyInstance, options: AdminRoutesOptions): void {
  const log = options.logger;
  const refusals = options.refusals ?? new RefusalLog(log, 'admin call refused');
  app.post<{ Params: { action: string } }>(
    '/api/v1/admin/:action',
    { config: guard('admin') },
    async (request, reply) => {
      const action = request.params.action as AdminActionName;
      const available = availableActions(options);
      const token = tokenGuard(options.token);
      if (!token.configured()) {
        return reply.code(403).send({
          ok: false,
          error: 'admin actions are off: no admin token is configured (see docs/operations.md)',
        });
      }
      if (!token.accepts((t) => bearerMatches(t, request.headers.authorization))) {
        refusals.note({
          action: String(action).slice(0, 40),
          remote: request.ip,
          given: request.headers.authorization ? 'wrong token' : 'no token',
        });
        return reply
          .code(401)
          .header('www-authenticate', 'Bearer realm="scan-gateway admin"')
          .send({
            ok: false,
            error: 'a valid admin token is required: Authorization: Bearer <token>',
          });
      }
      if (!available.includes(action)) {
        return reply.code(404).send({
          ok: false,
          error: `unknown admin action "${action}"; available: ${available.join(', ')}`,
        });
      }
      try {
        const result =
          action === 'replay'
            ? await options.actions.replay!(request.body)
            : action === 'close-container'
              ? await options.actions['close-container']!(request.body, request.ip)
              : await options.actions[action]();
        log.info({ action, remote: request.ip, result }, 'admin action done');
        return reply.send({ ok: true, action, ...result });
      } catch (err) {
        if (isGatewayError(err, ErrorCodes.USAGE))
          return reply.code(400).send({ ok: false, action, error: err.message });
        log.error({ action, remote: request.ip, err }, 'admin action failed');
        return reply.code(500).send({ ok: false, action, error: (err as Error).message });
      }
    },
  );
}
