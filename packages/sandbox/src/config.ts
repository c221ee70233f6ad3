import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse } from 'yaml';
import { z } from 'zod';
import { ErrorCodes, GatewayError } from '@scan-gateway/service-kit/errors';
import { formatPath } from '@scan-gateway/contract';
import { readConfigFile } from '@scan-gateway/service-kit/read-file';
import { faultsSchema, type SandboxClient, type SandboxOptions } from './types.js';

/**
 * The sandbox's own YAML file (`scan-gateway sandbox --config FILE`):
 *
 * ```yaml
 * clients:
 *   - clientId: plant-1-gateway
 *     clientSecretFile: /etc/scan-gateway/client-secret   # or clientSecret: literal (test only)
 *     dcps: [GI-01, EOL-3]
 *     products: [{ key: PACK-A, name: Battery pack A }]  # optional
 * processingDelayMs: 1000
 * presignedTtlMs: 1800000
 * tokenTtlSec: 3600
 * maxLoggedScans: 100000   # accepted scans kept for GET /_sandbox/scans
 * faults: { errorRate: 0.1, rateLimitRate: 0.05, retryAfterSec: 2, latencyMs: 50, resetRate: 0.01 }
 * kafka: { port: 9093, maxEvents: 10000, maxAgeMs: 3600000 }   # the status-event endpoint (docs/sandbox.md)
 * ```
 * A client may have `internalName: plant-1` (its topic is `sandbox-plant-1-status-event`; default the client id).
 */
const clientSchema = z
  .object({
    clientId: z.string().min(1),
    clientSecret: z.string().min(1).optional(),
    clientSecretFile: z.string().min(1).optional(),
    dcps: z.array(z.string().min(1)).min(1),
    products: z
      .array(z.object({ key: z.string().min(1), name: z.string().min(1) }).strict())
      .optional(),
    internalName: z
      .string()
      .regex(
        /^[A-Za-z0-9._-]+$/,
        'must be letters, digits, ".", "_" or "-" (it is part of a Kafka topic name)',
      )
      .max(200)
      .optional(),
  })
  .strict()
  .refine((c) => (c.clientSecret === undefined) !== (c.clientSecretFile === undefined), {
    message: 'give exactly one of clientSecret and clientSecretFile',
  });

/** Schema of the sandbox configuration file. Without `clients`, the default demo client is used. */
export const sandboxFileSchema = z
  .object({
    clients: z.array(clientSchema).min(1).optional(),
    processingDelayMs: z.number().int().min(0).optional(),
    presignedTtlMs: z.number().int().positive().optional(),
    tokenTtlSec: z.number().positive().optional(),
    maxLoggedScans: z.number().int().positive().optional(),
    faults: faultsSchema.partial().optional(),
    kafka: z
      .object({
        port: z.number().int().min(0).max(65_535).optional(),
        host: z.string().min(1).optional(),
        maxEvents: z.number().int().positive().optional(),
        maxAgeMs: z.number().int().positive().optional(),
        maxConnections: z.number().int().positive().optional(),
        maxRequestBytes: z.number().int().min(1024).optional(),
        maxGroups: z.number().int().positive().optional(),
        maxGroupMembers: z.number().int().positive().optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

/**
 * Reads a sandbox configuration file into `SandboxOptions` (without host, port, logger).
 * Relative `clientSecretFile`s are resolved against `baseDir`. Throws `CONFIG` for an unreadable,
 * non-YAML or invalid file, `SECRET` for an unreadable secret file.
 */
export function loadSandboxConfig(file: string, options: { baseDir: string }): SandboxOptions {
  let text: string;
  try {
    text = readConfigFile(file).toString('utf8');
  } catch (err) {
    // A FIFO, a device or an oversized file is refused with its reason, read no further than the bound.
    const why = err instanceof GatewayError ? `: it ${err.message}` : ' cannot be read';
    throw new GatewayError(ErrorCodes.CONFIG, `sandbox configuration ${file}${why}`, {
      cause: err,
    });
  }
  let raw: unknown;
  try {
    raw = parse(text) ?? {};
  } catch (err) {
    throw new GatewayError(
      ErrorCodes.CONFIG,
      `sandbox configuration ${file} is not YAML: ${(err as Error).message}`,
      { cause: err },
    );
  }
  const parsed = sandboxFileSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((i) => `${formatPath('', i.path)}: ${i.message}`)
      .join('; ');
    throw new GatewayError(ErrorCodes.CONFIG, `sandbox configuration ${file}: ${problems}`);
  }
  const cfg = parsed.data;
  const result: SandboxOptions = {};
  if (cfg.clients) result.clients = cfg.clients.map((c) => toClient(c, options.baseDir));
  if (cfg.processingDelayMs !== undefined) result.processingDelayMs = cfg.processingDelayMs;
  if (cfg.presignedTtlMs !== undefined) result.presignedTtlMs = cfg.presignedTtlMs;
  if (cfg.tokenTtlSec !== undefined) result.tokenTtlSec = cfg.tokenTtlSec;
  if (cfg.maxLoggedScans !== undefined) result.maxLoggedScans = cfg.maxLoggedScans;
  if (cfg.kafka)
    result.kafka = Object.fromEntries(Object.entries(cfg.kafka).filter(([, v]) => v !== undefined));
  if (cfg.faults)
    result.faults = Object.fromEntries(
      Object.entries(cfg.faults).filter(([, v]) => v !== undefined),
    );
  return result;
}

function toClient(c: z.infer<typeof clientSchema>, baseDir: string): SandboxClient {
  let secret = c.clientSecret;
  if (c.clientSecretFile !== undefined) {
    const path = resolve(baseDir, c.clientSecretFile);
    try {
      secret = readFileSync(path, 'utf8').trim();
    } catch (err) {
      throw new GatewayError(
        ErrorCodes.SECRET,
        `secret file ${path} of sandbox client ${c.clientId} cannot be read`,
        { cause: err },
      );
    }
  }
  if (!secret)
    throw new GatewayError(ErrorCodes.SECRET, `sandbox client ${c.clientId} has an empty secret`);
  return {
    clientId: c.clientId,
    clientSecret: secret,
    dcps: c.dcps,
    ...(c.products ? { products: c.products } : {}),
    ...(c.internalName !== undefined ? { internalName: c.internalName } : {}),
  };
}
