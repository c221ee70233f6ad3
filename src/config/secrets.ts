import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import { ErrorCodes, GatewayError } from '../errors.js';
import { inputKindSpec } from './input-kind.js';
import type { GatewayConfig } from './schema.js';

export { bestEffortSecrets, resolveSecrets, secretValues, type Secrets } from './secret-set.js';

/**
 * Every secret of a configuration, read from the environment, systemd credentials
 * (`$CREDENTIALS_DIRECTORY`, from `LoadCredential=`) or files, never from the YAML (design:
 * Secrets). This is the one module that reads them:
 * - the upstream's client secret and proxy credentials: by `loadConfig` at start and again at
 *   each reload (the upstream client proves them with a token before it uses them);
 * - the admin and read tokens of the HTTP server: at start and at each reload ({@link resolveSecrets});
 * - each input's secret (MQTT password, ingest token): by the input when it starts, and the ingest
 *   token again at each reload ({@link readSecret}); {@link resolveSecrets}
 *   reads them once more for the log scrubber; an ingest token too short is a configuration
 *   problem that `loadConfig` reports before anything starts ({@link ingestTokenProblem}).
 * The resolved {@link Secrets} are handed to the parts and to the log's `SecretScrubber`
 * ({@link secretValues}). Values never appear in a message.
 */

/** The inputs' own secrets (MQTT passwords, HTTP ingest tokens) and the etcd password that can be read, by input id (`ha.etcd` for etcd). */
export async function inputSecrets(
  config: GatewayConfig,
  env: Record<string, string | undefined>,
): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const input of config.inputs) {
    for (const secret of inputKindSpec(input.type)?.secrets(input) ?? []) {
      try {
        const s = await readSecret({ ...secret, env });
        if (s) out.set(input.id, s);
      } catch {
        // The input reports a missing secret itself when it starts.
      }
    }
  }
  // The etcd password of high availability, scrubbed like the inputs' (the election reads it at start).
  const etcd = config.ha?.etcd;
  if (etcd?.passwordFile !== undefined) {
    const s = await readSecret({
      what: 'etcd password (ha.etcd.passwordFile)',
      file: etcd.passwordFile,
      env,
    }).catch(() => undefined);
    if (s) out.set('ha.etcd', s);
  }
  return out;
}

/**
 * The client secret, first found of: env SCAN_GATEWAY_CLIENT_SECRET, the systemd credential
 * `client-secret` (`$CREDENTIALS_DIRECTORY/client-secret`, from `LoadCredential=`), `clientSecretFile`.
 * An empty credential counts as none: the package's unit always loads
 * /etc/scan-gateway/client-secret, which the package makes empty, so a site whose secret comes from
 * `clientSecretFile` or the environment leaves it so.
 *
 * @throws GatewayError `SCANGW_E_SECRET` when `clientSecretFile` cannot be read or is empty, or no
 *   source holds a secret.
 */
export function readClientSecret(
  config: GatewayConfig,
  env: Record<string, string | undefined>,
): string {
  const fromEnv = env.SCAN_GATEWAY_CLIENT_SECRET;
  if (fromEnv && fromEnv.trim()) return fromEnv.trim();
  const candidates: string[] = [];
  if (env.CREDENTIALS_DIRECTORY)
    candidates.push(resolve(env.CREDENTIALS_DIRECTORY, 'client-secret'));
  if (config.upstream.clientSecretFile) candidates.push(config.upstream.clientSecretFile);
  let emptyCredential: string | undefined;
  for (const file of candidates) {
    const credential = file !== config.upstream.clientSecretFile;
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' && credential) continue;
      throw new GatewayError(
        ErrorCodes.SECRET,
        `cannot read the client secret from ${file}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    const secret = text.trim();
    if (secret) return secret;
    if (!credential)
      throw new GatewayError(ErrorCodes.SECRET, `the client secret file ${file} is empty`);
    emptyCredential = file;
  }
  throw new GatewayError(
    ErrorCodes.SECRET,
    `no client secret${emptyCredential ? ` (the systemd credential client-secret, ${emptyCredential}, is empty; the package's unit loads it from /etc/scan-gateway/client-secret)` : ''}: set SCAN_GATEWAY_CLIENT_SECRET, provide the systemd credential client-secret, or set upstream.clientSecretFile`,
  );
}

/**
 * The proxy credentials (`user:password`), first found of: env SCAN_GATEWAY_PROXY_CREDENTIALS,
 * `upstream.proxyCredentialsFile`. Undefined when neither is set (a proxy without authentication).
 *
 * @throws GatewayError `SCANGW_E_SECRET` when the file cannot be read, is empty or has no `:`.
 */
export function readProxyCredentials(
  config: GatewayConfig,
  env: Record<string, string | undefined>,
): string | undefined {
  const fromEnv = env.SCAN_GATEWAY_PROXY_CREDENTIALS?.trim();
  const file = config.upstream.proxyCredentialsFile;
  let value = fromEnv || undefined;
  if (value === undefined && file) {
    try {
      value = readFileSync(file, 'utf8').trim();
    } catch (err) {
      throw new GatewayError(
        ErrorCodes.SECRET,
        `cannot read the proxy credentials from ${file}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    if (!value)
      throw new GatewayError(ErrorCodes.SECRET, `the proxy credentials file ${file} is empty`);
  }
  if (value !== undefined && !value.includes(':')) {
    throw new GatewayError(
      ErrorCodes.SECRET,
      `the proxy credentials ${fromEnv ? 'in SCAN_GATEWAY_PROXY_CREDENTIALS' : `in ${file}`} must be written user:password`,
    );
  }
  return value;
}

/** Shortest admin token accepted: 16 characters (`openssl rand -hex 32` gives 64). */
export const MIN_ADMIN_TOKEN_LENGTH = 16;

/**
 * The admin token, first found of: env `SCAN_GATEWAY_ADMIN_TOKEN`, the systemd credential
 * `admin-token` (`$CREDENTIALS_DIRECTORY/admin-token`, from `LoadCredential=`), the file named by
 * `http.adminTokenFile` (relative to `baseDir`). Undefined when none is configured: admin actions
 * are then off.
 *
 * @throws GatewayError `SCANGW_E_SECRET` when the named file cannot be read, or the token is
 *   shorter than {@link MIN_ADMIN_TOKEN_LENGTH} characters.
 */
export function readAdminToken(options: {
  env: Record<string, string | undefined>;
  file?: string | undefined;
  baseDir: string;
}): string | undefined {
  return readServerToken({
    ...options,
    what: 'admin token',
    envName: 'SCAN_GATEWAY_ADMIN_TOKEN',
    credential: 'admin-token',
  });
}

/**
 * The read token of the health page, `/api/v1/status` and `/metrics`, first found of: env
 * `SCAN_GATEWAY_READ_TOKEN`, the systemd credential `read-token`, the file named by
 * `http.readTokenFile` (relative to `baseDir`). Undefined when none is configured: those routes are
 * then open (the run command warns when the server listens beyond loopback).
 *
 * @throws GatewayError `SCANGW_E_SECRET` as {@link readAdminToken}.
 */
export function readReadToken(options: {
  env: Record<string, string | undefined>;
  file?: string | undefined;
  baseDir: string;
}): string | undefined {
  return readServerToken({
    ...options,
    what: 'read token',
    envName: 'SCAN_GATEWAY_READ_TOKEN',
    credential: 'read-token',
  });
}

function readServerToken(options: {
  what: string;
  envName: string;
  credential: string;
  env: Record<string, string | undefined>;
  file?: string | undefined;
  baseDir: string;
}): string | undefined {
  const check = (token: string, where: string) => {
    if (token.length < MIN_ADMIN_TOKEN_LENGTH) {
      throw new GatewayError(
        ErrorCodes.SECRET,
        `the ${options.what} from ${where} is shorter than ${MIN_ADMIN_TOKEN_LENGTH} characters; make one with: openssl rand -hex 32`,
      );
    }
    return token;
  };
  const fromEnv = options.env[options.envName]?.trim();
  if (fromEnv) return check(fromEnv, options.envName);
  const candidates: { file: string; optional: boolean }[] = [];
  if (options.env.CREDENTIALS_DIRECTORY)
    candidates.push({
      file: resolve(options.env.CREDENTIALS_DIRECTORY, options.credential),
      optional: true,
    });
  if (options.file)
    candidates.push({
      file: isAbsolute(options.file) ? options.file : resolve(options.baseDir, options.file),
      optional: false,
    });
  for (const { file, optional } of candidates) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      if (optional && (err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw new GatewayError(
        ErrorCodes.SECRET,
        `cannot read the ${options.what} from ${file}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    const token = text.trim();
    if (!token)
      throw new GatewayError(ErrorCodes.SECRET, `the ${options.what} file ${file} is empty`);
    return check(token, file);
  }
  return undefined;
}

/** Where one secret of an input may come from; the first that is set wins. */
export interface SecretSource {
  /** What it is, for messages ("MQTT password of input plant-broker"). Never the value. */
  what: string;
  /** Name of an environment variable holding it. */
  envName?: string | undefined;
  /** File holding it (a systemd credential, a mounted secret); surrounding white space is dropped. */
  file?: string | undefined;
  /** The environment to look in (the app's, handed down from the process edge). */
  env: Record<string, string | undefined>;
}

/**
 * Reads a secret from the environment variable `envName`, else from `file`. Secrets never come
 * from the YAML itself (design: Secrets). Answers undefined when neither is set.
 *
 * @throws GatewayError `SCANGW_E_SECRET` when `file` is set but cannot be read or is empty.
 */
export async function readSecret(source: SecretSource): Promise<string | undefined> {
  if (source.envName) {
    const value = source.env[source.envName]?.trim();
    if (value) return value;
  }
  if (!source.file) return undefined;
  let text: string;
  try {
    text = await readFile(source.file, 'utf8');
  } catch (err) {
    throw new GatewayError(
      ErrorCodes.SECRET,
      `cannot read the ${source.what} from ${source.file}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  const value = text.trim();
  if (!value)
    throw new GatewayError(ErrorCodes.SECRET, `the ${source.what} file ${source.file} is empty`);
  return value;
}

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
export function ingestTokenProblem(
  input: { id: string; tokenEnv: string; tokenFile?: string | undefined },
  env: Record<string, string | undefined>,
): IngestTokenProblem | undefined {
  const fromEnv = env[input.tokenEnv]?.trim();
  if (fromEnv)
    return shortness(input.id, fromEnv, 'tokenEnv', `the environment variable ${input.tokenEnv}`);
  if (!input.tokenFile) return undefined;
  let text: string;
  try {
    text = readFileSync(input.tokenFile, 'utf8');
  } catch {
    return undefined;
  }
  const token = text.trim();
  return token === ''
    ? undefined
    : shortness(input.id, token, 'tokenFile', `the file ${input.tokenFile}`);
}

/** The shortness problem of an ingest token, if any; for messages the input itself raises too. */
export function shortness(
  inputId: string,
  token: string,
  key: IngestTokenProblem['key'],
  where: string,
): IngestTokenProblem | undefined {
  if (token.length >= MIN_INGEST_TOKEN_LENGTH) return undefined;
  return {
    inputId,
    key,
    message: `input ${inputId}: the ingest token from ${where} is shorter than ${MIN_INGEST_TOKEN_LENGTH} characters; make one with: openssl rand -hex 32`,
  };
}

/** The SFTP login of `upstream.sftp`: a private key, or else a password. */
export interface SftpCredentials {
  privateKey?: string;
  password?: string;
}

/**
 * The SFTP login: the private key from `upstream.sftp.privateKeyFile`, or else a password, first
 * found of: env SCAN_GATEWAY_SFTP_PASSWORD, the systemd credential `sftp-password`,
 * `upstream.sftp.passwordFile`. Read when delivery starts (and by `upload --route sftp`).
 *
 * @throws GatewayError `SCANGW_E_SECRET` when the key file cannot be read or is empty, or no password is found.
 */
export function readSftpCredentials(
  config: Pick<GatewayConfig, 'upstream'>,
  env: Record<string, string | undefined>,
): SftpCredentials {
  const sftp = config.upstream.sftp;
  if (!sftp)
    throw new GatewayError(ErrorCodes.SECRET, 'no SFTP login: upstream.sftp is not configured');
  if (sftp.privateKeyFile) {
    let key: string;
    try {
      key = readFileSync(sftp.privateKeyFile, 'utf8');
    } catch (err) {
      throw new GatewayError(
        ErrorCodes.SECRET,
        `cannot read the SFTP private key ${sftp.privateKeyFile}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    if (!key.trim())
      throw new GatewayError(
        ErrorCodes.SECRET,
        `the SFTP private key file ${sftp.privateKeyFile} is empty`,
      );
    return { privateKey: key };
  }
  const fromEnv = env.SCAN_GATEWAY_SFTP_PASSWORD;
  if (fromEnv) return { password: fromEnv };
  const candidates: string[] = [];
  if (env.CREDENTIALS_DIRECTORY)
    candidates.push(resolve(env.CREDENTIALS_DIRECTORY, 'sftp-password'));
  if (sftp.passwordFile) candidates.push(sftp.passwordFile);
  for (const file of candidates) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' && file !== sftp.passwordFile) continue;
      throw new GatewayError(
        ErrorCodes.SECRET,
        `cannot read the SFTP password from ${file}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    const password = text.replace(/\r?\n$/, '');
    if (!password)
      throw new GatewayError(ErrorCodes.SECRET, `the SFTP password file ${file} is empty`);
    return { password };
  }
  throw new GatewayError(
    ErrorCodes.SECRET,
    'no SFTP login: set upstream.sftp.privateKeyFile, or a password in SCAN_GATEWAY_SFTP_PASSWORD, the systemd credential sftp-password or upstream.sftp.passwordFile',
  );
}
