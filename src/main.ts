#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { registerConfigCommand } from './cli/config-command.js';
import { CommandExit, ExitCodes } from './cli/exit.js';
import { registerOpsCommands } from './cli/ops-commands.js';
import { registerRunCommand } from './cli/run-command.js';
import { registerSandboxCommand } from './cli/sandbox-command.js';
import { registerReplayCommand } from './cli/replay-command.js';
import { registerTraceCommand } from './cli/trace-command.js';
import { registerTryCommand } from './cli/try-command.js';
import { registerUpstreamCommands } from './cli/upstream-commands.js';
import { loadConfig } from './config/load.js';
import { isBufferUnopenable, isGatewayError, ErrorCodes, GatewayError } from './errors.js';
import { readSftpCredentials } from './config/secrets.js';
import { sftpConnector } from './upstream/sftp-client.js';
import { createLogger } from './log.js';
import { VERSION } from './paths.js';
import { UpstreamClient, clientOptionsFromConfig } from './upstream/client.js';

/**
 * The process edge: the only module that touches argv, env, signals and the exit code.
 * Exit codes: 0 ok; 1 the operation failed; 2 usage or configuration error; 3 upstream unreachable
 * or authentication refused; 4 the buffer cannot be opened (see cli/exit.ts, docs/cli.md).
 */
async function main(argv: string[]): Promise<number> {
  // `run` and `sandbox` stop gracefully on SIGTERM/SIGINT; any other command (a `products list`
  // waiting on a silent upstream, say) ends at once, with the shell's exit code for the signal.
  let longRunning = false;
  const stopSignal = new Promise<string>((resolve) => {
    for (const sig of ['SIGTERM', 'SIGINT'] as const) {
      process.once(sig, () => {
        if (longRunning) return resolve(sig);
        process.stderr.write(`scan-gateway: interrupted (${sig})\n`);
        process.exit(sig === 'SIGINT' ? 130 : 143);
      });
    }
  });
  const program = new Command('scan-gateway')
    .version(VERSION)
    .description(
      'Edge daemon for battery factories: barcode reads from serial and TCP scanners, MQTT, dropped files and HTTP become scans, ' +
        'buffered durably in SQLite and delivered to the Battery Product and Traceability Scan Service.',
    )
    .showHelpAfterError()
    .exitOverride()
    .hook('preAction', (_program, action) => {
      longRunning = action.name() === 'run' || action.name() === 'sandbox';
    });
  const io = { stdout: process.stdout, stderr: process.stderr, env: process.env, cwd: process.cwd() };
  // SIGHUP reloads the configuration (run only); without a listener it would end the process.
  const onHangup = (listener: () => void) => void process.on('SIGHUP', listener);
  registerRunCommand(program, { ...io, stopSignal, pid: process.pid, onHangup });
  registerOpsCommands(program, { ...io, ...(process.getuid ? { uid: process.getuid() } : {}) });
  registerTraceCommand(program, { ...io, ...(process.getuid ? { uid: process.getuid() } : {}) });
    registerConfigCommand(program, { ...io, ...(process.getuid ? { uid: process.getuid() } : {}) });
  registerSandboxCommand(program, { ...io, logger: createLogger(), stopSignal });
  registerReplayCommand(program, io);
  registerTryCommand(program, io);
  registerUpstreamCommands(program, {
    ...io,
    resolveClient: async (configPath: string) => {
      const loaded = loadConfig(configPath, { baseDir: io.cwd, env: io.env });
      return new UpstreamClient(clientOptionsFromConfig(loaded.config.upstream, loaded));
    },
    resolveSftp: async (configPath: string) => {
      // The OAuth client secret is not needed to write a file by SFTP.
      const loaded = loadConfig(configPath, { baseDir: io.cwd, env: io.env, skipSecret: true });
      const sftp = loaded.config.upstream.sftp;
      if (!sftp) throw new GatewayError(ErrorCodes.CONFIG, `${configPath}: upstream.sftp is not configured (host, hostKey, a key or password)`);
      const login = readSftpCredentials(loaded.config, io.env);
      return {
        connector: sftpConnector({ sftp, clientId: loaded.config.upstream.clientId, privateKey: login.privateKey, password: login.password, minBytesPerSec: loaded.config.upstream.minUploadBytesPerSec }),
        siteId: loaded.config.site.id,
        fileNameTemplate: sftp.fileName,
      };
    },
  });
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (err) {
    if (err instanceof CommandExit) return err.exitCode;
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    if (isGatewayError(err, ErrorCodes.CONFIG) || isGatewayError(err, ErrorCodes.SECRET)) {
      process.stderr.write(`scan-gateway: ${err.message}\n`);
      return 2;
    }
    if (isBufferUnopenable(err)) {
      process.stderr.write(`scan-gateway: ${err.message}\n`);
      return ExitCodes.BUFFER_UNUSABLE;
    }
    if (isGatewayError(err, ErrorCodes.UPSTREAM_NETWORK) || isGatewayError(err, ErrorCodes.UPSTREAM_AUTH)) {
      process.stderr.write(`scan-gateway: ${err.message}\n`);
      return 3;
    }
    process.stderr.write(`scan-gateway: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

main(process.argv).then(
  (code) => {
    process.exitCode = code;
    // Handles left open by a library must not keep a finished command alive.
    setTimeout(() => process.exit(code), 2000).unref();
  },
  (err: unknown) => {
    process.stderr.write(`scan-gateway: ${String(err)}\n`);
    process.exit(1);
  },
);
