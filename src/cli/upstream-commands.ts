import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import { ErrorCodes, isGatewayError } from '../errors.js';
import type { UpstreamClient } from '../upstream/client.js';
import {
  MAX_DIRECT_BODY_BYTES,
  describeIssues,
  isTerminalState,
  scanBatchSchema,
  type ScanStatus,
} from '@scan-gateway/contract';
import { CommandExit, ExitCodes } from './exit.js';
import { formatBytes, formatProducts, formatStatus } from '../upstream/format.js';
import type { SftpConnector } from '../upstream/sftp-client.js';
import { batchFileName, remoteJoin, sendFile } from '../delivery/sftp-transfer.js';
import { silentLogger } from '../log.js';
// The input kinds, before this command reads a configuration (its `inputs` are checked by them).
import '../inputs/registry.js';

/** What the upstream commands need from the process edge. */
export interface UpstreamCommandDeps {
  /** Builds a client from a gateway configuration file; throws `CONFIG`/`SECRET` GatewayErrors. */
  resolveClient(configPath: string): Promise<UpstreamClient>;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  /** Base of a relative `upload` file. Default: the process's cwd. */
  cwd?: string;
  /** First status poll interval of `upload`, in ms (doubles up to 5 s). Default 250. */
  pollIntervalMs?: number;
  /**
   * The SFTP route of a configuration file (`upload --route sftp`); throws `CONFIG` when
   * `upstream.sftp` is missing, `SECRET` when its login cannot be read.
   */
  resolveSftp?(
    configPath: string,
  ): Promise<{ connector: SftpConnector; siteId: string; fileNameTemplate: string }>;
}

const DEFAULT_CONFIG = '/etc/scan-gateway/config.yaml';
const EXIT_HELP =
  '\nExit codes: 0 done, 1 the operation failed, 2 usage or configuration error, 3 upstream unreachable or credentials refused.';

interface CommonOptions {
  config: string;
  json?: boolean;
}

/**
 * `products list`, `products create`, `status <requestId>` and `upload <file.json>`: the upstream
 * service from the command line, with the gateway's configuration and credentials. Human output by
 * default, `--json` for scripts. Results end as a thrown `CommandExit` (see docs/upstream.md).
 */
export function registerUpstreamCommands(program: Command, deps: UpstreamCommandDeps): void {
  const products = program
    .command('products')
    .description("the service's products of this client (contract §4.1, §4.2)");

  withCommon(products.command('list').description('list the products of the authorized customer'))
    .addHelpText(
      'after',
      `\nExample:\n  scan-gateway products list --config config/demo.yaml${EXIT_HELP}`,
    )
    .action(async (opts: CommonOptions) => {
      await run(deps, 'products list', opts, async (client) => {
        const list = await client.listProducts();
        deps.stdout.write(opts.json ? `${JSON.stringify(list)}\n` : formatProducts(list));
        return ExitCodes.OK;
      });
    });

  withCommon(
    products
      .command('create')
      .description('create a product; the service fills in the template of its type'),
  )
    .requiredOption('--key <key>', 'key of the new product')
    .requiredOption('--name <name>', 'name of the new product')
    .option('--type <type>', 'product type', 'BatteryPack')
    .addHelpText(
      'after',
      `\nExample:\n  scan-gateway products create --key PACK-B --name "Battery pack B" --config config/demo.yaml${EXIT_HELP}`,
    )
    .action(async (opts: CommonOptions & { key: string; name: string; type: string }) => {
      await run(deps, 'products create', opts, async (client) => {
        const model = await client.createProduct({
          key: opts.key,
          name: opts.name,
          ofType: opts.type,
        });
        const count = Object.keys(model.properties).length;
        deps.stdout.write(
          opts.json
            ? `${JSON.stringify(model)}\n`
            : `Created product ${model.key} (${opts.type}), version ${model.version}, ${count} properties at template defaults\n`,
        );
        return ExitCodes.OK;
      });
    });

  withCommon(
    program.command('status').description('processing status of an uploaded batch (contract §4.6)'),
  )
    .argument('<requestId>', 'the id returned at upload')
    .addHelpText(
      'after',
      `\nExample:\n  scan-gateway status 1723456789012 --config config/demo.yaml\n\nExits 1 when the batch is Failed, HasFailures or NotFound.${EXIT_HELP}`,
    )
    .action(async (requestId: string, opts: CommonOptions) => {
      await run(deps, 'status', opts, async (client) => {
        const status = await client.getScanStatus(requestId);
        deps.stdout.write(opts.json ? `${JSON.stringify(status)}\n` : formatStatus(status));
        return status.state === 'Failed' ||
          status.state === 'HasFailures' ||
          status.state === 'NotFound'
          ? ExitCodes.FAILED
          : ExitCodes.OK;
      });
    });

  withCommon(
    program
      .command('upload')
      .description(
        'upload a JSON array of scans (direct below 5.8 MiB, else pre-signed; or by SFTP) and follow its status',
      ),
  )
    .argument('<file>', 'JSON file holding an array of scans (contract §2.5)')
    .option('--presigned', 'use the pre-signed upload whatever the size')
    .option(
      '--route <route>',
      'direct, presigned or sftp (upstream.sftp; contract §4.7); default: direct below 5.8 MiB, else presigned',
    )
    .option('--timeout <seconds>', 'how long to follow the status before giving up', '300')
    .addHelpText(
      'after',
      `\nExample:\n  scan-gateway upload scans.json --config config/demo.yaml\n  scan-gateway upload scans.json --route sftp --config config/demo.yaml\n\nExits 1 when the batch ends Failed or HasFailures, or is not finished within --timeout. With --route sftp the file is written (as NAME.part, size checked, renamed) and the command ends: the contract gives no status of a file transfer.${EXIT_HELP}`,
    )
    .action(
      async (
        file: string,
        opts: CommonOptions & { presigned?: boolean; route?: string; timeout: string },
      ) => {
        const timeoutMs = Number(opts.timeout) * 1000;
        if (!Number.isFinite(timeoutMs) || timeoutMs <= 0)
          fail(
            deps,
            'upload',
            `--timeout must be a positive number, got "${opts.timeout}"`,
            ExitCodes.USAGE,
          );
        if (opts.route !== undefined && !['direct', 'presigned', 'sftp'].includes(opts.route))
          fail(
            deps,
            'upload',
            `--route must be direct, presigned or sftp, got "${opts.route}"`,
            ExitCodes.USAGE,
          );
        if (opts.presigned && opts.route !== undefined && opts.route !== 'presigned')
          fail(
            deps,
            'upload',
            `--presigned and --route ${opts.route} contradict each other`,
            ExitCodes.USAGE,
          );
        const body = readScanFile(deps, resolve(deps.cwd ?? '.', file));
        if (opts.route === 'sftp') {
          await uploadSftp(deps, opts, body);
          return;
        }
        await run(deps, 'upload', opts, async (client) => {
          const bytes = Buffer.byteLength(body.text, 'utf8');
          const via =
            opts.route === 'presigned' ||
            opts.presigned ||
            (opts.route !== 'direct' && bytes > MAX_DIRECT_BODY_BYTES)
              ? 'presigned'
              : 'direct';
          const human = (line: string) => {
            if (!opts.json) deps.stdout.write(line);
          };
          human(
            `Uploading ${body.count} scans (${formatBytes(bytes)}) ${via === 'direct' ? 'directly' : 'through a pre-signed address'}\n`,
          );
          let requestId: string;
          if (via === 'direct') {
            requestId = (await client.uploadScans(body.text)).requestId;
          } else {
            const address = await client.requestPresignedUpload();
            requestId = address.requestId;
            await client.putPresigned(address.url, body.text);
          }
          human(`Accepted as request ${requestId}\n`);
          const status = await follow(
            client,
            requestId,
            timeoutMs,
            deps.pollIntervalMs ?? 250,
            (s) => human(`  ${s.state}\n`),
          );
          if (opts.json)
            deps.stdout.write(
              `${JSON.stringify({ requestId, via, scans: body.count, bytes, status })}\n`,
            );
          else deps.stdout.write(status ? formatStatus(status) : '');
          if (!status || !isTerminalState(status.state)) {
            deps.stderr.write(
              `scan-gateway upload: request ${requestId} not finished after ${opts.timeout} s (last state ${status?.state ?? 'none'})\n`,
            );
            return ExitCodes.FAILED;
          }
          return status.state === 'Success' ? ExitCodes.OK : ExitCodes.FAILED;
        });
      },
    );
}

/**
 * `upload --route sftp`: the crash-safe steps of delivery (src/delivery/sftp-transfer.ts) for one
 * file. Its name is the configured template with `{batchId}` = `cli`, so the same content sent
 * twice is found on the server the second time and not written again.
 */
async function uploadSftp(
  deps: UpstreamCommandDeps,
  opts: CommonOptions,
  body: { text: string; count: number },
): Promise<void> {
  if (!deps.resolveSftp)
    fail(deps, 'upload', 'the SFTP route is not available here', ExitCodes.USAGE);
  let route: Awaited<ReturnType<NonNullable<UpstreamCommandDeps['resolveSftp']>>>;
  try {
    route = await deps.resolveSftp(opts.config);
  } catch (err) {
    fail(deps, 'upload', (err as Error).message, exitCodeOf(err));
  }
  const data = Buffer.from(body.text, 'utf8');
  const sha256 = createHash('sha256').update(data).digest('hex');
  const remotePath = remoteJoin(
    route.connector.remoteDir,
    batchFileName(route.fileNameTemplate, { siteId: route.siteId, batchId: 'cli', sha256 }),
  );
  if (!opts.json)
    deps.stdout.write(
      `Transferring ${body.count} scans (${formatBytes(data.length)}) by SFTP to ${remotePath}\n`,
    );
  let outcome: string;
  try {
    outcome = await sendFile({
      connector: route.connector,
      logger: silentLogger(),
      remotePath,
      bytes: data.length,
      body: () => Readable.from([data]),
      what: 'the file',
    });
  } catch (err) {
    fail(deps, 'upload', (err as Error).message, exitCodeOf(err));
  }
  if (opts.json) {
    deps.stdout.write(
      `${JSON.stringify({ route: 'sftp', remotePath, sha256, scans: body.count, bytes: data.length, outcome, state: 'transferred' })}\n`,
    );
  } else {
    deps.stdout.write(
      outcome === 'found'
        ? `Already on the server (same name and size): not sent again\n`
        : `Transferred: ${remotePath} (sha256 ${sha256}); size verified on the server\n`,
    );
  }
}

function withCommon(command: Command): Command {
  return command
    .option(
      '-c, --config <file>',
      'gateway configuration (upstream address and credentials)',
      DEFAULT_CONFIG,
    )
    .option('--json', 'print the result as JSON');
}

/** Polls until a terminal state or the deadline; NotFound counts as "not visible yet". */
async function follow(
  client: UpstreamClient,
  requestId: string,
  timeoutMs: number,
  firstIntervalMs: number,
  onChange: (s: ScanStatus) => void,
): Promise<ScanStatus | undefined> {
  const deadline = Date.now() + timeoutMs;
  let interval = firstIntervalMs;
  let last: ScanStatus | undefined;
  for (;;) {
    const status = await client.getScanStatus(requestId);
    if (status.state !== last?.state) onChange(status);
    last = status;
    if (isTerminalState(status.state) || Date.now() + interval > deadline) return last;
    await sleep(interval);
    interval = Math.min(interval * 2, 5000);
  }
}

/** Reads and checks an upload file: a non-empty JSON array of valid scans. Exit 2 otherwise. */
function readScanFile(deps: UpstreamCommandDeps, path: string): { text: string; count: number } {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    fail(deps, 'upload', `${path}: ${(err as Error).message}`, ExitCodes.USAGE);
  }
  if (!Array.isArray(raw) || raw.length === 0)
    fail(deps, 'upload', `${path}: expected a non-empty JSON array of scans`, ExitCodes.USAGE);
  const checked = scanBatchSchema.safeParse(raw);
  if (!checked.success)
    fail(deps, 'upload', `${path}: ${describeIssues(checked.error)}`, ExitCodes.USAGE);
  // Sent as written (compacted), not as zod's output, so fields unknown to the contract pass through.
  return { text: JSON.stringify(raw), count: raw.length };
}

function fail(deps: UpstreamCommandDeps, command: string, message: string, code: number): never {
  deps.stderr.write(`scan-gateway ${command}: ${message}\n`);
  throw new CommandExit(code, message);
}

/** Resolves the client, runs `body`, closes the client, and turns every failure into a CommandExit. */
async function run(
  deps: UpstreamCommandDeps,
  command: string,
  opts: CommonOptions,
  body: (client: UpstreamClient) => Promise<number>,
): Promise<void> {
  let client: UpstreamClient;
  try {
    client = await deps.resolveClient(opts.config);
  } catch (err) {
    fail(deps, command, (err as Error).message, exitCodeOf(err));
  }
  let code: number;
  try {
    code = await body(client);
  } catch (err) {
    if (err instanceof CommandExit) throw err;
    fail(deps, command, (err as Error).message, exitCodeOf(err));
  } finally {
    await client.close();
  }
  if (code !== ExitCodes.OK) throw new CommandExit(code);
}

/** The exit code of a failure: 2 usage/config, 3 unreachable or refused credentials, 1 otherwise. */
export function exitCodeOf(err: unknown): number {
  if (!isGatewayError(err)) return ExitCodes.FAILED;
  switch (err.code) {
    case ErrorCodes.CONFIG:
    case ErrorCodes.SECRET:
    case ErrorCodes.USAGE:
      return ExitCodes.USAGE;
    case ErrorCodes.UPSTREAM_NETWORK:
    case ErrorCodes.UPSTREAM_AUTH:
    case ErrorCodes.SFTP_NETWORK:
    case ErrorCodes.SFTP_AUTH:
    case ErrorCodes.SFTP_HOST_KEY:
      return ExitCodes.UNREACHABLE;
    case ErrorCodes.UPSTREAM_HTTP:
      // 408, 429 and 5xx: the service is not answering usefully right now.
      return err.retryable ? ExitCodes.UNREACHABLE : ExitCodes.FAILED;
    default:
      return ExitCodes.FAILED;
  }
}
