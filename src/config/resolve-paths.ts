import { isAbsolute, resolve } from 'node:path';
import type { GatewayConfig } from './schema.js';

/**
 * Every file and folder the configuration names, resolved against the configuration's base folder:
 * upstream secrets and CAs, the buffer, the HTTP server's TLS files, the inputs' folders and files.
 * Pure: reads no file.
 */
export function resolvePaths(config: GatewayConfig, baseDir: string): GatewayConfig {
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(baseDir, p));
  return {
    ...config,
    upstream: {
      ...config.upstream,
      ...(config.upstream.clientSecretFile
        ? { clientSecretFile: abs(config.upstream.clientSecretFile) }
        : {}),
      ...(config.upstream.caFile ? { caFile: abs(config.upstream.caFile) } : {}),
      ...(config.upstream.proxyCredentialsFile
        ? { proxyCredentialsFile: abs(config.upstream.proxyCredentialsFile) }
        : {}),
      statusEvents: {
        ...config.upstream.statusEvents,
        ...(config.upstream.statusEvents.caFile
          ? { caFile: abs(config.upstream.statusEvents.caFile) }
          : {}),
      },
      ...(config.upstream.sftp
        ? {
            sftp: {
              ...config.upstream.sftp,
              ...(config.upstream.sftp.privateKeyFile
                ? { privateKeyFile: abs(config.upstream.sftp.privateKeyFile) }
                : {}),
              ...(config.upstream.sftp.passwordFile
                ? { passwordFile: abs(config.upstream.sftp.passwordFile) }
                : {}),
            },
          }
        : {}),
    },
    buffer: {
      ...config.buffer,
      path: config.buffer.path === ':memory:' ? ':memory:' : abs(config.buffer.path),
    },
    http: {
      ...config.http,
      ...(config.http.adminTokenFile ? { adminTokenFile: abs(config.http.adminTokenFile) } : {}),
      ...(config.http.tls ? { tls: resolveTlsPaths(config.http.tls, abs) } : {}),
    },
    inputs: config.inputs.map((input) => resolveInputPaths(input, abs)),
  };
}

/** The PEM files of `http.tls`, resolved against the base folder. */
function resolveTlsPaths(
  tls: NonNullable<GatewayConfig['http']['tls']>,
  abs: (p: string) => string,
): NonNullable<GatewayConfig['http']['tls']> {
  return {
    certFile: abs(tls.certFile),
    keyFile: abs(tls.keyFile),
    ...(tls.caFile ? { caFile: abs(tls.caFile) } : {}),
    ...(tls.clientCaFile ? { clientCaFile: abs(tls.clientCaFile) } : {}),
  };
}

/** An input's folder and files (`dir`, `caFile`, `passwordFile`, `tokenFile`…), resolved against the base folder. */
function resolveInputPaths<T extends GatewayConfig['inputs'][number]>(
  input: T,
  abs: (p: string) => string,
): T {
  const out: Record<string, unknown> = { ...(input as object) };
  for (const [k, v] of Object.entries(input as object)) {
    if (typeof v === 'string' && (k === 'dir' || k.endsWith('File'))) out[k] = abs(v);
  }
  return out as T;
}
