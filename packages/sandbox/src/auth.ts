import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SignJWT, errors as joseErrors, jwtVerify } from 'jose';
import { sendProblem } from './problem.js';
import type { SandboxState } from './state.js';
import { ErrorCodes, GatewayError } from '@scan-gateway/service-kit/errors';

/**
 * The sandbox's OAuth 2.0 side (contract §5): the client-credentials token endpoint and the bearer
 * check of every API endpoint. Tokens are real JWTs (HS256) signed with a key drawn when the
 * sandbox starts, so tokens of a previous sandbox run, or of another sandbox, are refused.
 */
export class SandboxAuth {
  private readonly key = new Uint8Array(randomBytes(32));

  /** A signed token for `clientId`, valid `ttlSec` seconds. */
  async issue(clientId: string, ttlSec: number, issuer: string): Promise<string> {
    const now = Date.now() / 1000;
    return new SignJWT({ client_id: clientId, scope: 'product trace' })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer(issuer)
      .setSubject(clientId)
      .setIssuedAt(Math.floor(now))
      .setExpirationTime(now + ttlSec)
      .setJti(randomUUID())
      .sign(this.key);
  }

  /** The client id of a valid `Authorization` header, or why it is refused. */
  async check(
    header: string | undefined,
  ): Promise<{ clientId: string } | { refused: string; invalidToken: boolean }> {
    if (header === undefined || header.trim() === '')
      return { refused: 'The Authorization header is missing.', invalidToken: false };
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match?.[1])
      return { refused: 'The Authorization header is not a bearer token.', invalidToken: true };
    try {
      const { payload } = await jwtVerify(match[1], this.key, { algorithms: ['HS256'] });
      // jose compares whole seconds; tokens of a sub-second or 1 s lifetime (tests) need ms precision.
      if (typeof payload.exp === 'number' && payload.exp * 1000 <= Date.now())
        return { refused: 'The token has expired.', invalidToken: true };
      if (typeof payload.sub !== 'string')
        return { refused: 'The token names no client.', invalidToken: true };
      return { clientId: payload.sub };
    } catch (err) {
      if (err instanceof joseErrors.JWTExpired)
        return { refused: 'The token has expired.', invalidToken: true };
      if (err instanceof joseErrors.JWSSignatureVerificationFailed) {
        return { refused: 'The token signature is invalid.', invalidToken: true };
      }
      return { refused: 'The token is malformed.', invalidToken: true };
    }
  }
}

/** Where the bearer check puts the caller's client id. */
const callers = new WeakMap<FastifyRequest, string>();

/** The client id the bearer check accepted for this request. */
export function callerOf(request: FastifyRequest): string {
  const clientId = callers.get(request);
  if (clientId === undefined)
    throw new GatewayError(ErrorCodes.INTERNAL, 'bearer check did not run for this route');
  return clientId;
}

/** A `preHandler` refusing requests without a valid bearer token: 401 problem details + WWW-Authenticate. */
export function bearerCheck(auth: SandboxAuth) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const result = await auth.check(request.headers.authorization);
    if ('clientId' in result) {
      callers.set(request, result.clientId);
      return;
    }
    const challenge = result.invalidToken
      ? `Bearer realm="sandbox", error="invalid_token", error_description="${result.refused}"`
      : 'Bearer realm="sandbox"';
    await sendProblem(request, reply.header('www-authenticate', challenge), 401, result.refused);
  };
}

/**
 * POST /oauth2/token: client credentials from the form (or HTTP Basic, RFC 6749 §2.3.1). Errors
 * are RFC 6749 §5.2 JSON: 400 invalid_request / unsupported_grant_type, 401 invalid_client.
 */
export function registerTokenRoute(
  app: FastifyInstance,
  auth: SandboxAuth,
  state: SandboxState,
  ttlSec: () => number,
): void {
  app.post('/oauth2/token', async (request, reply) => {
    const form = (
      typeof request.body === 'object' && request.body !== null ? request.body : {}
    ) as Record<string, unknown>;
    let clientId = typeof form.client_id === 'string' ? form.client_id : undefined;
    let secret = typeof form.client_secret === 'string' ? form.client_secret : undefined;
    const basic = /^Basic\s+(\S+)$/i.exec(request.headers.authorization ?? '');
    if (basic?.[1]) {
      const [id, ...rest] = Buffer.from(basic[1], 'base64').toString('utf8').split(':');
      clientId = decodeURIComponent(id ?? '');
      secret = decodeURIComponent(rest.join(':'));
    }
    reply.header('cache-control', 'no-store');
    const oauthError = (status: number, error: string, description: string) =>
      reply.code(status).type('application/json').send({ error, error_description: description });
    if (!request.headers['content-type']?.startsWith('application/x-www-form-urlencoded')) {
      return oauthError(
        400,
        'invalid_request',
        'The body must be application/x-www-form-urlencoded.',
      );
    }
    if (form.grant_type !== 'client_credentials') {
      return oauthError(
        400,
        'unsupported_grant_type',
        'Only grant_type=client_credentials is supported.',
      );
    }
    if (!clientId || !secret)
      return oauthError(400, 'invalid_request', 'client_id and client_secret are required.');
    const client = state.clients.get(clientId);
    if (!client || !sameSecret(client.clientSecret, secret)) {
      return oauthError(401, 'invalid_client', 'Client authentication failed.');
    }
    const ttl = ttlSec();
    const issuer = `${request.protocol}://${request.host}`;
    const token = await auth.issue(clientId, ttl, issuer);
    return reply
      .type('application/json')
      .send({ access_token: token, token_type: 'Bearer', expires_in: ttl });
  });
}

function sameSecret(expected: string, given: string): boolean {
  const a = Buffer.from(expected);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}
