import type { GatewayConfig } from '../config/schema.js';
import { bestEffortSecrets, secretValues } from '../config/secrets.js';
import { SecretScrubber } from '../log.js';

/**
 * A scrubber that knows every secret of `config` that can be read here (client secret, admin and
 * read tokens, proxy credentials, the inputs' secrets: src/config/secrets.ts), for commands that
 * show what the buffer holds (`failures`) without running the gateway. A secret that cannot be
 * read is skipped: the command runs all the same, and JWTs and bearer credentials are cut out in
 * any case.
 */
export async function bestEffortScrubber(
  config: GatewayConfig,
  env: Record<string, string | undefined>,
  baseDir: string,
): Promise<SecretScrubber> {
  return new SecretScrubber(secretValues(await bestEffortSecrets(config, env, baseDir)));
}
