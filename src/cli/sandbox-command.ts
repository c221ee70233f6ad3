import { resolve } from 'node:path';
import type { Command } from 'commander';
import { isGatewayError, ErrorCodes } from '../errors.js';
import type { Logger } from '../log.js';
import { DEMO_CLIENT_SECRET_FILE } from '../paths.js';
import type { RunningSandbox, SandboxOptions } from '@scan-gateway/sandbox';
import { CommandExit, ExitCodes } from './exit.js';
import { importSandbox } from '../app/sandbox-part.js';

/** What `sandbox` needs from the process edge. */
export interface SandboxCommandIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  logger: Logger;
  /** Settles when the process should stop (SIGINT/SIGTERM in main.ts); the sandbox then closes. */
  stopSignal?: Promise<unknown>;
  /** Alternative stop trigger (tests). */
  signal?: AbortSignal;
  /** Base for a relative `clientSecretFile` in the sandbox configuration. Default: the process's cwd. */
  cwd?: string;
}

/**
 * `scan-gateway sandbox [--host H] [--port N] [--kafka-port N] [--config FILE]`: runs the local emulator of the
 * upstream service until `io.stopSignal` settles or `io.signal` aborts; the action's promise
 * resolves once the sandbox has closed. Prints the URL and the client ids, never a secret.
 * Exit codes (thrown as `CommandExit`): 2 bad option or configuration, 1 cannot listen.
 */
export function registerSandboxCommand(program: Command, io: SandboxCommandIo): void {
  program
    .command('sandbox')
    .description(
      'run the local emulator of the Battery Product and Traceability Scan Service (OAuth, products, scans, status, faults)',
    )
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--port <port>', 'port to listen on (0 = any free port)', '8090')
    .option(
      '--kafka-port <port>',
      'port of the Kafka endpoint (status events over SASL_SSL; 0 = any free port; default 9093, or any with --port 0)',
    )
    .option(
      '-c, --config <file>',
      'sandbox configuration (clients, timings, faults); see docs/upstream.md',
    )
    .option(
      '--sftp-port <port>',
      'also run the SFTP endpoint on this port (0 = any free port; contract §4.7, docs/delivery.md)',
    )
    .option(
      '--sftp-root <dir>',
      'folder the SFTP endpoint keeps the files in (default a new temporary folder)',
    )
    .addHelpText(
      'after',
      '\nExample:\n  scan-gateway sandbox --port 8090\n  curl -s -X PUT localhost:8090/_sandbox/faults -H "content-type: application/json" -d \'{"errorRate":0.2}\'\n' +
        '\nWithout --config the sandbox knows one client, demo-client, whose secret is config/demo-client-secret.' +
        '\nExit codes: 0 stopped by a signal, 1 cannot listen, 2 bad option or configuration.',
    )
    .action(
      async (opts: {
        host: string;
        port: string;
        kafkaPort?: string;
        config?: string;
        sftpPort?: string;
        sftpRoot?: string;
      }) => {
        // The sandbox is a workspace package of its own (packages/sandbox), loaded only when it runs.
        const { DEMO_CLIENT_ID, DEMO_DCPS, loadSandboxConfig, startSandbox } =
          await importSandbox();
        const port = Number(opts.port);
        if (!Number.isInteger(port) || port < 0 || port > 65_535) {
          io.stderr.write(
            `scan-gateway sandbox: --port must be a number from 0 to 65535, got "${opts.port}"\n`,
          );
          throw new CommandExit(ExitCodes.USAGE);
        }
        const kafkaPort = opts.kafkaPort === undefined ? undefined : Number(opts.kafkaPort);
        if (
          kafkaPort !== undefined &&
          (!Number.isInteger(kafkaPort) || kafkaPort < 0 || kafkaPort > 65_535)
        ) {
          io.stderr.write(
            `scan-gateway sandbox: --kafka-port must be a number from 0 to 65535, got "${opts.kafkaPort}"\n`,
          );
          throw new CommandExit(ExitCodes.USAGE);
        }
        const sftpPort = opts.sftpPort === undefined ? undefined : Number(opts.sftpPort);
        if (
          sftpPort !== undefined &&
          (!Number.isInteger(sftpPort) || sftpPort < 0 || sftpPort > 65_535)
        ) {
          io.stderr.write(
            `scan-gateway sandbox: --sftp-port must be a number from 0 to 65535, got "${opts.sftpPort}"\n`,
          );
          throw new CommandExit(ExitCodes.USAGE);
        }
        let fromFile: SandboxOptions = {};
        if (opts.config !== undefined) {
          try {
            fromFile = loadSandboxConfig(resolve(io.cwd ?? '.', opts.config), {
              baseDir: io.cwd ?? '.',
            });
          } catch (err) {
            io.stderr.write(`scan-gateway sandbox: ${(err as Error).message}\n`);
            throw new CommandExit(ExitCodes.USAGE);
          }
        }
        let sandbox: RunningSandbox;
        try {
          // --kafka-port wins over the file's kafka.port.
          const kafka = {
            ...(fromFile.kafka === false ? {} : fromFile.kafka),
            ...(kafkaPort !== undefined ? { port: kafkaPort } : {}),
          };
          const sftp =
            sftpPort === undefined
              ? {}
              : {
                  sftp: {
                    port: sftpPort,
                    ...(opts.sftpRoot ? { root: resolve(io.cwd ?? '.', opts.sftpRoot) } : {}),
                  },
                };
          sandbox = await startSandbox({
            demoSecretFile: DEMO_CLIENT_SECRET_FILE,
            ...fromFile,
            kafka,
            host: opts.host,
            port,
            logger: io.logger,
            ...sftp,
          });
        } catch (err) {
          const usage =
            isGatewayError(err, ErrorCodes.SECRET) || isGatewayError(err, ErrorCodes.CONFIG);
          io.stderr.write(
            `scan-gateway sandbox: cannot start on ${opts.host}:${port}: ${(err as Error).message}\n`,
          );
          throw new CommandExit(usage ? ExitCodes.USAGE : ExitCodes.FAILED);
        }
        const clients = fromFile.clients?.map((c) => ({ id: c.clientId, dcps: c.dcps })) ?? [
          { id: DEMO_CLIENT_ID, dcps: [...DEMO_DCPS] },
        ];
        io.stdout.write(
          `Upstream sandbox listening on ${sandbox.url} (use it as upstream.baseUrl and upstream.authUrl)\n`,
        );
        for (const c of clients) io.stdout.write(`  client ${c.id}: DCPs ${c.dcps.join(', ')}\n`);
        const kafkaInfo = sandbox.kafka?.info();
        if (kafkaInfo) {
          io.stdout.write(
            `  status events: Kafka at ${kafkaInfo.bootstrapServers} (SASL_SSL, SCRAM-SHA-512, topic ${kafkaInfo.topic}; CA at ${sandbox.url}/_sandbox/kafka)\n`,
          );
        }
        io.stdout.write(
          `  controls: ${sandbox.url}/_sandbox/faults, /_sandbox/scans, /_sandbox/requests, /_sandbox/kafka\n`,
        );
        if (sandbox.sftp) {
          const s = sandbox.sftp;
          io.stdout.write(
            `SFTP endpoint on ${s.host}:${s.port}, host key ${s.hostKey} (upstream.sftp.hostKey); user = client id, password = its secret\n`,
          );
          io.stdout.write(`  files of a client in ${s.folderOf('<clientId>')}\n`);
        }

        const closed = new Promise<void>((resolve) =>
          sandbox.app.server.once('close', () => resolve()),
        );
        const stop = new Promise<void>((resolve) => {
          void io.stopSignal?.then(
            () => resolve(),
            () => resolve(),
          );
          if (io.signal?.aborted) resolve();
          io.signal?.addEventListener('abort', () => resolve(), { once: true });
        });
        await Promise.race([closed, stop]);
        await sandbox.close();
        io.stdout.write('Upstream sandbox stopped\n');
      },
    );
}
