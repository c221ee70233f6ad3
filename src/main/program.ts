import { setFlagsFromString } from 'node:v8';
import { Command, CommanderError } from 'commander';
import { config as zodConfig } from 'zod';
import { CommandExit, ExitCodes } from '../cli/exit.js';
import { isBufferUnopenable, isGatewayError, ErrorCodes, GatewayError } from '../errors.js';
import { VERSION } from '../paths.js';
// The input kinds, registered once for every command: any of them may read a configuration, whose
// `inputs` are checked by their kinds (src/inputs/registry.ts; each kind's module loads on use).
import '../inputs/registry.js';

// zod's interpreter, not its compiler: by default zod turns each object schema into a function
// (new Function) at its first parse, which made reading config/example.yaml about 15 ms slower
// at every start. Here a schema parses a configuration once per start or reload, an upstream
// answer or a status event per batch, a ready Scan per file line: rates at which the compiled
// form never pays back its compile.
zodConfig({ jitless: true });

/**
 * The process edge: the only module that touches argv, env, signals and the exit code.
 * Exit codes: 0 ok; 1 the operation failed; 2 usage or configuration error; 3 upstream unreachable
 * or authentication refused; 4 the buffer cannot be opened (see cli/exit.ts, docs/cli.md).
 */
async function main(argv: string[]): Promise<number> {
  // `run`, `sandbox` and `adopt` stop gracefully on SIGTERM/SIGINT; any other command (a `products list`
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
    // The runtime beside the gateway's own version: a package carries its own Node.js, and its
    // security updates reach a site only with a new package, so a support call needs both.
    .version(
      `scan-gateway ${VERSION} (Node.js ${process.version}, ${process.platform}-${process.arch}, ${process.execPath})`,
      '-V, --version',
      'print the gateway version and the Node.js runtime it runs on',
    )
    .description(
      'Edge daemon for battery factories: barcode reads from serial and TCP scanners, MQTT, dropped files and HTTP become scans, ' +
        'buffered durably in SQLite and delivered to the Battery Product and Traceability Scan Service.',
    )
    .showHelpAfterError()
    .exitOverride()
    .hook('preAction', (_program, action) => {
      longRunning = ['run', 'sandbox', 'adopt'].includes(action.name());
    });
  const io = {
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
    cwd: process.cwd(),
  };
  // SIGHUP reloads the configuration (run only); without a listener it would end the process.
  const onHangup = (listener: () => void) => void process.on('SIGHUP', listener);
  const uid = process.getuid ? { uid: process.getuid() } : {};
  // Each group of commands, by the names it registers, in the order `--help` lists them. Only the
  // group of the command being run is loaded, for start-up time and memory: the daemon (`run`)
  // never loads the sandbox, the SFTP client, the JSON Schema builder or the other commands' modules.
  const groups: { names: string[]; register: () => Promise<void> }[] = [
    {
      names: ['run'],
      register: async () =>
        (await import('../cli/run-command.js')).registerRunCommand(program, {
          ...io,
          stopSignal,
          pid: process.pid,
          onHangup,
        }),
    },
    {
      names: ['queue', 'failures', 'buffer'],
      register: async () =>
        (await import('../cli/ops-commands.js')).registerOpsCommands(program, { ...io, ...uid }),
    },
    {
      names: ['trace'],
      register: async () =>
        (await import('../cli/trace-command.js')).registerTraceCommand(program, { ...io, ...uid }),
    },
    {
      names: ['containers'],
      register: async () =>
        (await import('../cli/containers-command.js')).registerContainersCommand(program, io),
    },
    {
      names: ['config'],
      register: async () =>
        (await import('../cli/config-command.js')).registerConfigCommand(program, {
          ...io,
          ...uid,
        }),
    },
    {
      names: ['sandbox'],
      register: async () => {
        const [{ registerSandboxCommand }, { createLogger }] = await Promise.all([
          import('../cli/sandbox-command.js'),
          import('../log.js'),
        ]);
        registerSandboxCommand(program, { ...io, logger: createLogger(), stopSignal });
      },
    },
    {
      names: ['adopt'],
      register: async () =>
        (await import('../cli/adopt-command.js')).registerAdoptCommand(program, {
          ...io,
          stopSignal,
        }),
    },
    {
      names: ['replay'],
      register: async () =>
        (await import('../cli/replay-command.js')).registerReplayCommand(program, io),
    },
    {
      names: ['try'],
      register: async () => (await import('../cli/try-command.js')).registerTryCommand(program, io),
    },
    {
      names: ['products', 'status', 'upload'],
      register: async () => registerUpstream(program, io),
    },
  ];
  // The first word that is not an option names the command; none, `help` or an unknown word: all
  // groups, so help and "unknown command" list every command as before.
  const word = argv.slice(2).find((a) => !a.startsWith('-'));
  const chosen = groups.filter((g) => word !== undefined && g.names.includes(word));
  // The daemon: undici's HTTP parser (llhttp) is WebAssembly, which V8 recompiles with TurboFan
  // after the first upstream answers: a 30 MiB start-up peak and 10 MiB more at idle for parsing a
  // few small responses a second (docs/performance.md "Footprint"). The baseline compiler
  // (Liftoff) parses them as well. Set before any WebAssembly is compiled.
  if (word === 'run') setFlagsFromString('--liftoff-only');
  for (const g of chosen.length > 0 ? chosen : groups) await g.register();
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
    if (isBufferUnopenable(err) || isGatewayError(err, ErrorCodes.BUFFER_DAMAGED)) {
      process.stderr.write(`scan-gateway: ${err.message}\n`);
      return ExitCodes.BUFFER_UNUSABLE;
    }
    if (
      isGatewayError(err, ErrorCodes.UPSTREAM_NETWORK) ||
      isGatewayError(err, ErrorCodes.UPSTREAM_AUTH)
    ) {
      process.stderr.write(`scan-gateway: ${err.message}\n`);
      return 3;
    }
    process.stderr.write(`scan-gateway: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

/** The upstream commands (`products`, `status`, `upload`) with the clients they build from a configuration. */
async function registerUpstream(
  program: Command,
  io: {
    stdout: NodeJS.WriteStream;
    stderr: NodeJS.WriteStream;
    env: NodeJS.ProcessEnv;
    cwd: string;
  },
): Promise<void> {
  const { registerUpstreamCommands } = await import('../cli/upstream-commands.js');
  const { loadConfig } = await import('../config/load.js');
  registerUpstreamCommands(program, {
    ...io,
    resolveClient: async (configPath: string) => {
      const { UpstreamClient, clientOptionsFromConfig } = await import('../upstream/client.js');
      const loaded = loadConfig(configPath, { baseDir: io.cwd, env: io.env });
      return new UpstreamClient(clientOptionsFromConfig(loaded.config.upstream, loaded));
    },
    resolveSftp: async (configPath: string) => {
      // The OAuth client secret is not needed to write a file by SFTP.
      const loaded = loadConfig(configPath, { baseDir: io.cwd, env: io.env, skipSecret: true });
      const sftp = loaded.config.upstream.sftp;
      if (!sftp)
        throw new GatewayError(
          ErrorCodes.CONFIG,
          `${configPath}: upstream.sftp is not configured (host, hostKey, a key or password)`,
        );
      const [{ readSftpCredentials }, { sftpConnector }] = await Promise.all([
        import('../config/secrets.js'),
        import('../upstream/sftp-client.js'),
      ]);
      const login = readSftpCredentials(loaded.config, io.env);
      return {
        connector: sftpConnector({
          sftp,
          clientId: loaded.config.upstream.clientId,
          privateKey: login.privateKey,
          password: login.password,
          minBytesPerSec: loaded.config.upstream.minUploadBytesPerSec,
        }),
        siteId: loaded.config.site.id,
        fileNameTemplate: sftp.fileName,
      };
    },
  });
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
