import { readFile } from 'node:fs/promises';
import { ErrorCodes, GatewayError } from '../errors.js';

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
    throw new GatewayError(ErrorCodes.SECRET, `cannot read the ${source.what} from ${source.file}: ${(err as Error).message}`, { cause: err });
  }
  const value = text.trim();
  if (!value) throw new GatewayError(ErrorCodes.SECRET, `the ${source.what} file ${source.file} is empty`);
  return value;
}
