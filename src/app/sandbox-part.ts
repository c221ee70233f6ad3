import { ErrorCodes, GatewayError } from '../errors.js';
import type { LoadedConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import { DEMO_CLIENT_SECRET_FILE } from '../paths.js';
import type * as SandboxModule from '@scan-gateway/sandbox';
import type { RunningSandbox } from '@scan-gateway/sandbox';
import type { Component } from './parts.js';
import { listening, splitListen } from './part-helpers.js';

/**
 * Loads the sandbox package (`@scan-gateway/sandbox`, an optional dependency: the daemon runs
 * without it). Only `npm start`'s `sandbox.enabled` and `scan-gateway sandbox` call this.
 * @throws GatewayError `CONFIG` when the package is not installed, saying how to go on.
 */
export async function importSandbox(): Promise<typeof SandboxModule> {
  try {
    return await import('@scan-gateway/sandbox');
  } catch (err) {
    if ((err as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    throw new GatewayError(
      ErrorCodes.CONFIG,
      'the sandbox (package @scan-gateway/sandbox) is not installed here: set sandbox.enabled: false and point upstream at the real service, or install it (npm ci in a checkout; the Debian package carries it)',
      { cause: err },
    );
  }
}

/** Why `trustSandboxCa` cannot be followed: said the same way whether the sandbox is off or runs without Kafka. */
export const TRUST_SANDBOX_CA_NEEDS =
  'upstream.statusEvents.trustSandboxCa needs the embedded sandbox with its Kafka endpoint (sandbox.enabled: true)';

/** The embedded upstream sandbox (`sandbox.enabled`): its module is loaded at start only. */
export class SandboxPart implements Component {
  readonly name = 'sandbox';
  private running: RunningSandbox | undefined;

  /**
   * @param accepts the client the sandbox knows, the configuration's own (`upstream.clientId` and
   *   its secret; without a secret the demo client), and the DCP keys and product model keys it
   *   accepts: `sandbox.dcps` and `sandbox.products`, by default those of the configuration (app.ts).
   */
  constructor(
    private readonly settings: LoadedConfig['config']['sandbox'],
    private readonly logger: Logger,
    private readonly accepts: {
      clientId: string;
      clientSecret: string;
      dcps: string[];
      products: string[];
    },
  ) {}

  async start(): Promise<void> {
    const { host, port } = splitListen(this.settings.listen);
    const kafka = splitListen(this.settings.kafka.listen);
    // The sandbox is a workspace package of its own (packages/sandbox), loaded only here and by
    // `scan-gateway sandbox`: a gateway without `sandbox.enabled` never loads it.
    const { startSandbox } = await importSandbox();
    const { clientId, clientSecret, dcps } = this.accepts;
    const products = this.accepts.products.map((key) => ({ key, name: key }));
    // The site's own client, so a site configuration is not refused at its first token either.
    const client =
      clientSecret !== ''
        ? { clients: [{ clientId, clientSecret, dcps, products }] }
        : { demoSecretFile: DEMO_CLIENT_SECRET_FILE, demoAccepts: { dcps, products } };
    this.running = await listening('sandbox.listen', this.settings.listen, () =>
      startSandbox({ host, port, kafka, logger: this.logger, ...client }),
    );
    const known = clientSecret !== '' ? clientId : 'demo-client';
    this.logger.info(
      {
        component: 'app',
        url: this.running.url,
        clientId: known,
        dcps,
        products: this.accepts.products,
      },
      `embedded upstream sandbox started; client ${known} with DCPs ${dcps.join(', ')} and products ${this.accepts.products.join(', ') || 'none (list them in sandbox.products)'}`,
    );
  }

  /**
   * The sandbox's Kafka CA (`upstream.statusEvents.trustSandboxCa`, demo only), once started.
   * @throws GatewayError `CONFIG` when the sandbox runs no Kafka endpoint.
   */
  kafkaCaPem(): string {
    const kafka = this.running?.kafka;
    if (!kafka) throw new GatewayError(ErrorCodes.CONFIG, TRUST_SANDBOX_CA_NEEDS);
    return kafka.caPem;
  }

  stop = async (): Promise<void> => this.running?.close();
}
