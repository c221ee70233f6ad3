import { readFileSync } from 'node:fs';
import type { HttpInputConfig } from '../../config/input-schemas.js';

/** Shortest ingest token accepted: 16 characters, as the admin token (`openssl rand -hex 32` gives 64). */
export const MIN_INGEST_TOKEN_LENGTH = 16;

/** One ingest token that is too short: which input, where it came from (never the value). */
export interface IngestTokenProblem {
  inputId: string;
  /** The config key the token came through: `tokenEnv` or `tokenFile`. */
  key: 'tokenEnv' | 'tokenFile';
  message: string;
}

/**
 * Checks the ingest token of an `http` input as the input would read it (env `tokenEnv` first,
 * else `tokenFile`): a token shorter than {@link MIN_INGEST_TOKEN_LENGTH} characters is a
 * problem naming the input and the source. A token not set, or a file that cannot be read, is no
 * problem here: the input reports it when it starts (and `config check` runs where secrets are not).
 */
export function ingestTokenProblem(input: Pick<HttpInputConfig, 'id' | 'tokenEnv' | 'tokenFile'>, env: Record<string, string | undefined>): IngestTokenProblem | undefined {
  const fromEnv = env[input.tokenEnv]?.trim();
  if (fromEnv) return shortness(input.id, fromEnv, 'tokenEnv', `the environment variable ${input.tokenEnv}`);
  if (!input.tokenFile) return undefined;
  let text: string;
  try {
    text = readFileSync(input.tokenFile, 'utf8');
  } catch {
    return undefined;
  }
  const token = text.trim();
  return token === '' ? undefined : shortness(input.id, token, 'tokenFile', `the file ${input.tokenFile}`);
}

/** The shortness problem of an ingest token, if any; for messages the input itself raises too. */
export function shortness(inputId: string, token: string, key: IngestTokenProblem['key'], where: string): IngestTokenProblem | undefined {
  if (token.length >= MIN_INGEST_TOKEN_LENGTH) return undefined;
  return {
    inputId,
    key,
    message: `input ${inputId}: the ingest token from ${where} is shorter than ${MIN_INGEST_TOKEN_LENGTH} characters; make one with: openssl rand -hex 32`,
  };
}
