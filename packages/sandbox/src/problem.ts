import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { formatPath, type ProblemDetails } from '@scan-gateway/contract';

/**
 * RFC 9457 problem details as the sandbox sends them, shaped like ASP.NET Core's (the service
 * offers text/json and application/*+json, which points at ASP.NET): `type` is the RFC 9110
 * section of the status, validation problems carry an `errors` map of field → messages.
 */

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

const RFC9110_SECTIONS: Record<number, string> = {
  400: '15.5.1',
  401: '15.5.2',
  403: '15.5.4',
  404: '15.5.5',
  405: '15.5.6',
  409: '15.5.10',
  413: '15.5.14',
  415: '15.5.16',
  429: '',
  500: '15.6.1',
  503: '15.6.4',
};

/** Problem details for `status`, with `detail` and extension members. */
export function problem(
  request: FastifyRequest,
  status: number,
  detail: string,
  extensions: Record<string, unknown> = {},
): ProblemDetails {
  const section = RFC9110_SECTIONS[status];
  const type =
    status === 429
      ? 'https://www.rfc-editor.org/rfc/rfc6585#section-4'
      : `https://tools.ietf.org/html/rfc9110#section-${section ?? '15'}`;
  return {
    type,
    title: TITLES[status] ?? 'Error',
    status,
    detail,
    instance: request.url.split('?')[0],
    traceId: request.id,
    ...extensions,
  };
}

/**
 * Sends problem details. Content type application/problem+json, except 401, which the contract
 * shows as ProblemDetails in application/json (§4.1, §7).
 */
export function sendProblem(
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  detail: string,
  extensions: Record<string, unknown> = {},
): FastifyReply {
  const type =
    status === 401 ? 'application/json; charset=utf-8' : 'application/problem+json; charset=utf-8';
  return reply
    .code(status)
    .type(type)
    .send(JSON.stringify(problem(request, status, detail, extensions)));
}

/**
 * A 400 naming each offending field, e.g. `[3].timeStamp: must be yyyy-MM-ddTHH:mm:ss…`, with the
 * ASP.NET-style `errors` map (`{ "[3].timeStamp": ["…"] }`).
 */
export function sendValidationProblem(
  request: FastifyRequest,
  reply: FastifyReply,
  error: z.ZodError,
  what: string,
): FastifyReply {
  const errors: Record<string, string[]> = {};
  for (const issue of error.issues) {
    const path = formatPath('', issue.path);
    (errors[path] ??= []).push(issue.message);
  }
  const first = Object.entries(errors)
    .slice(0, 3)
    .map(([path, messages]) => `${path}: ${messages.join(', ')}`)
    .join('; ');
  return sendProblem(request, reply, 400, `${what} is invalid: ${first}`, {
    title: 'One or more validation errors occurred.',
    errors,
  });
}
