// The input kinds, before this command reads a configuration (its `inputs` are checked by them).
import '../inputs/registry.js';
import type { Command } from 'commander';
import { loadConfig } from '../config/load.js';
import { readAdminToken } from '../config/secrets.js';
import { CommandExit, ExitCodes } from './exit.js';
import { fail, type OpsIo } from './ops-open.js';

const DEFAULT_CONFIG = '/etc/scan-gateway/config.yaml';

/**
 * `scan-gateway containers close <container> --station <s> --by <name> --why <text> [--abandon]`:
 * a supervisor closes the open container of a station short (recorded as incomplete) or abandons
 * it, in the running gateway: the command posts to its `close-container` admin action
 * (src/health/admin-actions.ts) at `http.listen`, with the admin token the gateway reads
 * (`SCAN_GATEWAY_ADMIN_TOKEN`, the credential, or `http.adminTokenFile`). The mapping holds the
 * open containers in memory, so only the running gateway can close one. Exit 0 closed, 1 refused
 * (none open, no gateway, wrong token), 2 usage or configuration error.
 */
export function registerContainersCommand(program: Command, io: OpsIo): void {
  const containers = program
    .command('containers')
    .description('the containers of the stations (modules, packs, pallets): close or abandon one');
  containers
    .command('close')
    .description(
      'close the open container of a station short (recorded as incomplete), or abandon it, with who and why',
    )
    .argument('<container>', 'the container name of the configuration, e.g. module')
    .requiredOption('--station <station>', 'the input id (per: input) or DCP key (per: dcp)')
    .requiredOption('--by <name>', 'who closes it (recorded)')
    .requiredOption('--why <text>', 'why (recorded)')
    .option('--abandon', 'abandon it instead of closing it short')
    .option('-c, --config <file>', 'configuration file', DEFAULT_CONFIG)
    .option('--url <url>', 'the gateway, when not at http.listen (e.g. https://gw-1:8080)')
    .addHelpText(
      'after',
      '\nExample:\n  scan-gateway containers close module --station st20 --by "Anna (line lead)" --why "cell 4 scrapped"\n\n' +
        'Exit codes: 0 closed, 1 refused (none open, gateway not running, wrong token), 2 usage or configuration error.\n',
    )
    .action(
      async (
        container: string,
        opts: {
          station: string;
          by: string;
          why: string;
          abandon?: boolean;
          config: string;
          url?: string;
        },
      ) => {
        let url: string;
        let token: string | undefined;
        try {
          const loaded = loadConfig(opts.config, { baseDir: io.cwd, env: io.env });
          const http = loaded.config.http;
          const scheme = http.tls ? 'https' : 'http';
          const listen = http.listen
            .replace(/^0\.0\.0\.0:/, '127.0.0.1:')
            .replace(/^\[::\]:/, '[::1]:');
          url = opts.url ?? `${scheme}://${listen}`;
          token = readAdminToken({ env: io.env, file: http.adminTokenFile, baseDir: io.cwd });
        } catch (err) {
          fail(io, 'containers close', (err as Error).message, ExitCodes.USAGE);
        }
        if (!token)
          fail(
            io,
            'containers close',
            'no admin token is configured (SCAN_GATEWAY_ADMIN_TOKEN, the admin-token credential or http.adminTokenFile)',
            ExitCodes.USAGE,
          );
        let answer: { ok?: boolean; message?: string; error?: string };
        try {
          const res = await fetch(new URL('/api/v1/admin/close-container', url), {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({
              container,
              station: opts.station,
              by: opts.by,
              why: opts.why,
              abandon: opts.abandon === true,
            }),
          });
          answer = (await res.json().catch(() => ({ error: res.statusText }))) as typeof answer;
        } catch (err) {
          fail(
            io,
            'containers close',
            `the gateway at ${url} did not answer (${(err as Error).message}); is it running?`,
            ExitCodes.FAILED,
          );
        }
        if (answer.ok !== true)
          fail(io, 'containers close', answer.error ?? 'refused', ExitCodes.FAILED);
        io.stdout.write(`${answer.message ?? 'closed'}\n`);
        throw new CommandExit(ExitCodes.OK);
      },
    );
}
