import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/paths.js';

/** The compiled daemon, as systemd runs it (`npm test` builds first). */
export const MAIN_JS = join(PACKAGE_ROOT, 'dist/src/main.js');

export interface GatewayProcess {
  child: ChildProcess;
  /** The health server's base URL, read from the daemon's own start-up line. */
  httpUrl: string;
  output: () => string;
  /** SIGKILL: no chance to flush or say goodbye. */
  kill(): Promise<void>;
  /** SIGTERM and wait for the exit code. */
  stop(): Promise<number | null>;
}

/**
 * Starts `scan-gateway run --config FILE` as a child process and waits until it serves health, found
 * in the info-level JSON log line "scan-gateway started" (so `log.level` must be info or lower).
 */
export async function startGateway(
  configFile: string,
  env: Record<string, string>,
  cwd: string,
): Promise<GatewayProcess> {
  const child = spawn(process.execPath, [MAIN_JS, 'run', '--config', configFile], {
    cwd,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => resolve(code)),
  );
  const httpUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`gateway did not start within 60 s:\n${out}`)),
      // Catches a hang only: a loaded machine may take seconds to start node and open the buffer.
      60_000,
    );
    const check = () => {
      // The JSON log line that says it started (stderr hints are for terminals only).
      const m = /"http":"(https?:\/\/[^"/]+)"[^\n]*"msg":"scan-gateway started"/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    child.stdout.on('data', check);
    child.stderr.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code} before it was up:\n${out}`));
    });
  });
  return {
    child,
    httpUrl,
    output: () => out,
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

/**
 * Writes `dir/config.yaml` for the end-to-end tests' gateway: one CSV file input (`dir/inbox`,
 * columns `barcode` and `read_at`) into the goods-in DCP GI-01, the buffer at `dir/buffer.db`, the
 * sandbox at `sandboxUrl` as upstream (client `demo-client`, its secret from the environment), the
 * health server on a free loopback port and the info-level log that {@link startGateway} reads.
 *
 * @param opts.delivery the contents of the `delivery` flow map, e.g. `mode: direct, maxBatchScans: 400`.
 * @param opts.upstream more lines of the `upstream` block (indented by the caller), e.g. `statusEvents`.
 * @returns the file's path.
 */
export function writeInboxConfig(
  dir: string,
  opts: {
    site: string;
    sandboxUrl: string;
    delivery: string;
    requestTimeoutMs?: number;
    upstream?: string;
  },
): string {
  const file = join(dir, 'config.yaml');
  writeFileSync(
    file,
    `site: { id: ${opts.site}, timezone: Europe/Berlin }
upstream:
  baseUrl: ${opts.sandboxUrl}
  authUrl: ${opts.sandboxUrl}
  clientId: demo-client
  requestTimeoutMs: ${opts.requestTimeoutMs ?? 5000}
${opts.upstream ?? ''}buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { ${opts.delivery} }
http: { listen: 127.0.0.1:0 }
# info: startGateway finds the health address in the "scan-gateway started" log line
log: { level: info }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042, duplicateWindowMs: 0 }
inputs:
  - { id: inbox, type: files, dir: ${join(dir, 'inbox')}, format: csv, barcodeColumn: barcode, timeColumn: read_at, dcp: GI-01, stableMs: 30 }
`,
  );
  return file;
}
