import { readClientSecret, readProxyCredentials } from '../config/load.js';
import type { GatewayConfig, InputConfig } from '../config/schema.js';
import { readAdminToken, readReadToken } from '../health/admin.js';
import { readSecret } from '../inputs/secrets.js';
import { SecretScrubber } from '../log.js';

/** The inputs' own secrets (MQTT passwords, HTTP ingest tokens), so the scrubber knows them too. */
export async function inputSecrets(inputs: readonly InputConfig[], env: Record<string, string | undefined>): Promise<string[]> {
  const out: string[] = [];
  for (const input of inputs) {
    try {
      if (input.type === 'mqtt') {
        const s = await readSecret({ what: `password of input ${input.id}`, envName: input.passwordEnv, file: input.passwordFile, env });
        if (s) out.push(s);
      } else if (input.type === 'http') {
        const s = await readSecret({ what: `ingest token of input ${input.id}`, envName: input.tokenEnv, file: input.tokenFile, env });
        if (s) out.push(s);
      }
    } catch {
      // The input reports a missing secret itself when it starts.
    }
  }
  return out;
}

/**
 * A scrubber that knows every secret of `config` that can be read here (client secret, admin and
 * read tokens, proxy credentials, the inputs' secrets), for commands that show what the buffer holds (`failures`) without
 * running the gateway. A secret that cannot be read is skipped: the command runs all the same,
 * and JWTs and bearer credentials are cut out in any case.
 */
export async function bestEffortScrubber(config: GatewayConfig, env: Record<string, string | undefined>, baseDir: string): Promise<SecretScrubber> {
  const scrubber = new SecretScrubber();
  try {
    scrubber.add(readClientSecret(config, env));
  } catch {
    // Not readable by this user or not set: nothing to cut out.
  }
  try {
    scrubber.add(readAdminToken({ env, file: config.http.adminTokenFile, baseDir }));
  } catch {
    // As above.
  }
  try {
    scrubber.add(readReadToken({ env, file: config.http.readTokenFile, baseDir }));
  } catch {
    // As above.
  }
  try {
    const proxy = readProxyCredentials(config, env);
    scrubber.add(proxy);
    scrubber.add(proxy?.slice(proxy.indexOf(':') + 1));
  } catch {
    // As above.
  }
  for (const s of await inputSecrets(config.inputs, env)) scrubber.add(s);
  return scrubber;
}
