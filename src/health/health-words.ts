import { catalogueEntry } from '../error-catalogue.js';
import { ErrorCodes } from '../errors.js';
import type { HealthFacts } from './health-facts.js';

/**
 * The words of the health rules (src/health/derive.ts): counts in English, the code and sentence of
 * an upload failure by its kind, why status events do not flow, the headline of a config error.
 * No rule is decided here; each function turns a fact into text or a code.
 */

/** `1 scan`, `3 scans`. */
export function count(n: number, word: string, plural = `${word}s`): string {
  return `${n.toLocaleString('en-US')} ${n === 1 ? word : plural}`;
}

/** The code of an upload failure: its own when known, else by kind. */
export function uploadCode(lastError: NonNullable<HealthFacts['delivery']>['lastError']): string {
  if (lastError?.code && catalogueEntry(lastError.code)) return lastError.code;
  return UPLOAD_CODE_BY_KIND.get(lastError?.kind ?? '') ?? ErrorCodes.UPSTREAM_NETWORK;
}

/** Upload failure kind to code; any other kind (`network`, unknown) is a network failure. */
const UPLOAD_CODE_BY_KIND: ReadonlyMap<string, string> = new Map([
  ['auth', ErrorCodes.UPSTREAM_AUTH],
  ['token', ErrorCodes.UPSTREAM_AUTH],
  ['answer', ErrorCodes.UPSTREAM_RESPONSE],
  ['http', ErrorCodes.UPSTREAM_HTTP],
]);

/** Why status events do not flow, by code: the end of a sentence. */
export const EVENTS_WHY: Record<string, string> = {
  [ErrorCodes.EVENTS_NETWORK]: 'the Kafka brokers cannot be reached',
  [ErrorCodes.EVENTS_TLS]: "the brokers' TLS certificate is not trusted",
  [ErrorCodes.EVENTS_AUTH]: "the brokers refuse the gateway's client id and secret",
  [ErrorCodes.EVENTS_TOPIC]: 'the status topic is missing or may not be read by this client',
};

const WAITING = 'Scans wait safely in the buffer and are sent when it works again.';

/** What an upload failure of this kind means for the scans, in a sentence. */
export function uploadSentence(kind: string | undefined): string {
  return `${UPLOAD_SENTENCE_BY_KIND.get(kind ?? '') ?? 'The upstream service cannot be reached, so nothing is uploaded.'} ${WAITING}`;
}

/** The first sentence by upload failure kind; any other kind is "cannot be reached". */
const UPLOAD_SENTENCE_BY_KIND: ReadonlyMap<string, string> = new Map([
  ['token', 'No access token from the auth server, so nothing is uploaded.'],
  ['auth', "The upstream service refuses the gateway's credentials, so nothing is uploaded."],
  ['answer', "The upstream service's answers cannot be read; uploads are retried."],
  ['http', 'The upstream service answers uploads with errors; they are retried.'],
  [
    'sftp',
    'Batch files cannot be transferred to the SFTP server (see the code); they are retried.',
  ],
]);

/** The headline of a configuration error and its first problem (`file:line:col: key: message`). */
export function firstProblem(message: string): string {
  const lines = message
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  if (lines.length <= 1) return lines[0] ?? message;
  return `${lines[0]!.replace(/:$/, '')}: ${lines[1]}${lines.length > 2 ? ` (and ${lines.length - 2} more)` : ''}`;
}
