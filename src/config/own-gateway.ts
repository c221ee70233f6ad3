import { createHash } from 'node:crypto';

// Not `import … from 'node:http'`: an ES module's import of node:http reads every export of it to
// make the module's namespace, and its WebSocket export then loads the runtime's own copy of
// undici (about 15 ms and some MiB of heap, for nothing the gateway uses).
const { get } = process.getBuiltinModule('node:http');

/**
 * How `config check` tells its own running gateway from another program on the same ports: the
 * gateway answers `GET /healthz` with the header {@link INSTANCE_HEADER}, an id derived from its
 * buffer file (two gateways never share one buffer, so the buffer names the instance). A check of
 * the same configuration derives the same id.
 */

/** Response header of `/healthz` that carries {@link gatewayInstanceId}. */
export const INSTANCE_HEADER = 'x-scan-gateway-instance';

/** The instance id of a gateway: the first 16 hex digits of SHA-256 of its resolved buffer path (no path shown). */
export function gatewayInstanceId(bufferPath: string): string {
  return createHash('sha256').update(bufferPath, 'utf8').digest('hex').slice(0, 16);
}

/** Who answers `/healthz` on an address: this configuration's gateway, another scan-gateway, or nobody that says so. */
export type GatewayOnAddress = 'own' | 'other' | 'none';

/** Longest wait for the `/healthz` answer, in ms: a gateway on loopback answers in milliseconds. */
const PROBE_TIMEOUT_MS = 2000;

/**
 * Asks `GET http://<listen>/healthz` (`listen` = `http.listen`; 0.0.0.0 and :: are asked on
 * loopback) whether a scan-gateway runs there and whether it is the one of `bufferPath`.
 * Never throws: a refused, slow or foreign answer is `none`.
 */
export function probeGateway(listen: string, bufferPath: string): Promise<GatewayOnAddress> {
  const m = /^\[?([^\]]*)\]?:(\d+)$/.exec(listen);
  if (!m) return Promise.resolve('none');
  const host = m[1] === '0.0.0.0' ? '127.0.0.1' : m[1] === '::' ? '::1' : m[1]!;
  return new Promise((done) => {
    const req = get(
      { host, port: Number(m[2]), path: '/healthz', timeout: PROBE_TIMEOUT_MS },
      (res) => {
        res.resume();
        const id = res.headers[INSTANCE_HEADER];
        done(
          typeof id !== 'string' ? 'none' : id === gatewayInstanceId(bufferPath) ? 'own' : 'other',
        );
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => done('none'));
  });
}
