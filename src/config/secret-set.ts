import type { GatewayConfig } from './schema.js';
import {
  inputSecrets,
  readAdminToken,
  readClientSecret,
  readProxyCredentials,
  readReadToken,
  readSftpCredentials,
} from './secrets.js';

/*
 * The set of a configuration's secrets, gathered for the parts and the log's scrubber from the
 * readers of secrets.ts (the one module that reads a secret; this one only calls it).
 */

/** The secrets of one configuration, resolved at start. */
export interface Secrets {
  /** The OAuth client secret ('' when the command did not need it). */
  clientSecret: string;
  /** Proxy credentials `user:password`. */
  proxyCredentials?: string;
  /** Admin token of the HTTP server; without it the admin actions are off. */
  adminToken?: string;
  /** Read token of the health page, status and metrics; without it they are open. */
  readToken?: string;
  /** The inputs' own secrets that could be read, by input id (for the scrubber). */
  inputs: ReadonlyMap<string, string>;
  /** The SFTP password (`upstream.sftp` without a key), when it can be read: for the scrubber. */
  sftpPassword?: string;
}

/**
 * Resolves the secrets of `loaded` (whose upstream secrets `loadConfig` read already): the admin
 * and read tokens, then the inputs' secrets. An input secret that cannot be read is left out here:
 * the input reports it itself when it starts.
 *
 * @throws GatewayError `SCANGW_E_SECRET` as {@link readAdminToken} and {@link readReadToken}, in that order.
 */
export async function resolveSecrets(
  loaded: { config: GatewayConfig; clientSecret: string; proxyCredentials?: string | undefined },
  env: Record<string, string | undefined>,
  baseDir: string,
): Promise<Secrets> {
  const adminToken = readAdminToken({ env, file: loaded.config.http.adminTokenFile, baseDir });
  const readToken = readReadToken({ env, file: loaded.config.http.readTokenFile, baseDir });
  return {
    clientSecret: loaded.clientSecret,
    ...(loaded.proxyCredentials !== undefined ? { proxyCredentials: loaded.proxyCredentials } : {}),
    ...(adminToken !== undefined ? { adminToken } : {}),
    ...(readToken !== undefined ? { readToken } : {}),
    inputs: await inputSecrets(loaded.config, env),
    ...sftpPasswordOf(loaded.config, env),
  };
}

/** The SFTP password for the scrubber, when one is configured and readable (delivery reads it again, and reports a failure). */
function sftpPasswordOf(
  config: GatewayConfig,
  env: Record<string, string | undefined>,
): { sftpPassword?: string } {
  if (!config.upstream.sftp || config.upstream.sftp.privateKeyFile) return {};
  try {
    const { password } = readSftpCredentials(config, env);
    return password ? { sftpPassword: password } : {};
  } catch {
    // Not set or not readable: delivery reports it when it needs it.
    return {};
  }
}

/**
 * Every secret of `config` that can be read here, each one skipped when it cannot be read (not
 * set, or not readable by this user): for commands that show what the buffer holds (`failures`)
 * without running the gateway.
 */
export async function bestEffortSecrets(
  config: GatewayConfig,
  env: Record<string, string | undefined>,
  baseDir: string,
): Promise<Secrets> {
  const attempt = <T>(read: () => T): T | undefined => {
    try {
      return read();
    } catch {
      // Not readable by this user or not set: nothing to cut out.
      return undefined;
    }
  };
  const proxyCredentials = attempt(() => readProxyCredentials(config, env));
  const adminToken = attempt(() =>
    readAdminToken({ env, file: config.http.adminTokenFile, baseDir }),
  );
  const readToken = attempt(() => readReadToken({ env, file: config.http.readTokenFile, baseDir }));
  return {
    clientSecret: attempt(() => readClientSecret(config, env)) ?? '',
    ...(proxyCredentials !== undefined ? { proxyCredentials } : {}),
    ...(adminToken !== undefined ? { adminToken } : {}),
    ...(readToken !== undefined ? { readToken } : {}),
    inputs: await inputSecrets(config, env),
  };
}

/**
 * The values the log's scrubber cuts out: every secret, and the proxy password alone besides the
 * `user:password` pair (an error text may quote either).
 */
export function secretValues(secrets: Secrets): string[] {
  const proxy = secrets.proxyCredentials;
  return [
    ...(secrets.clientSecret ? [secrets.clientSecret] : []),
    ...(proxy ? [proxy, proxy.slice(proxy.indexOf(':') + 1)] : []),
    ...(secrets.adminToken ? [secrets.adminToken] : []),
    ...(secrets.readToken ? [secrets.readToken] : []),
    ...secrets.inputs.values(),
    ...(secrets.sftpPassword ? [secrets.sftpPassword] : []),
  ];
}
