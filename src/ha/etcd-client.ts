import { readFile } from 'node:fs/promises';
import type { Dispatcher } from 'undici';
import type { HaConfig } from '../config/ha-schema.js';
import { readSecret } from '../config/secrets.js';
import { ErrorCodes, GatewayError } from '../errors.js';
// undici loads when the first etcd client connects: a site without `ha` loads it only for delivery.
import { loadUndici } from '../http-client.js';

/**
 * The few calls of etcd v3 the leader election needs, through etcd's JSON gateway (`/v3/...`,
 * the gRPC API as JSON over HTTP/1.1) with undici: no gRPC client in the gateway's memory.
 * Keys and values travel base64-encoded, 64-bit integers as decimal strings (etcd's
 * `api/etcdserverpb/rpc.proto` through grpc-gateway's JSON mapping).
 *
 * Endpoints are tried in order on a connection failure or a timeout, starting with the one that
 * answered last; each request has its own deadline ({@link EtcdOptions.requestTimeoutMs}), well
 * below the lease's time to live, so a dead member costs one deadline, not the lease.
 */
export interface EtcdOptions {
  endpoints: readonly string[];
  /** Deadline of one request to one endpoint, ms. */
  requestTimeoutMs: number;
  caFile?: string | undefined;
  certFile?: string | undefined;
  keyFile?: string | undefined;
  username?: string | undefined;
  passwordFile?: string | undefined;
}

/** A key as the range answers it. */
export interface EtcdKeyValue {
  value: string;
  /** Revision at which the key was created: the leader epoch of its holder. */
  createRevision: number;
  lease: string;
}

/** Outcome of one campaign transaction. */
export type CampaignResult =
  { won: true; epoch: number } | { won: false; holder: EtcdKeyValue | undefined };

export class EtcdClient {
  private dispatcher: Dispatcher | undefined;
  private preferred = 0;
  private token: string | undefined;
  private password: string | undefined;
  /** The endpoint that answered the last request, or undefined when the last request failed everywhere. */
  lastEndpoint: string | undefined;

  constructor(private readonly options: EtcdOptions) {}

  /** Options of the `ha.etcd` section. */
  static fromConfig(ha: HaConfig): EtcdClient {
    const e = ha.etcd;
    return new EtcdClient({
      endpoints: e.endpoints,
      // A tenth of the TTL: all three members can be asked within one renewal period (a third of it).
      requestTimeoutMs: Math.max(300, Math.floor(ha.leaseTtlMs / 10)),
      caFile: e.caFile,
      certFile: e.certFile,
      keyFile: e.keyFile,
      username: e.username,
      passwordFile: e.passwordFile,
    });
  }

  /**
   * Reads the TLS files and the password file. @throws GatewayError `SCANGW_E_HA_ETCD` when a
   * TLS file cannot be read; `SCANGW_E_SECRET` for the password file.
   */
  async open(): Promise<void> {
    const o = this.options;
    const tlsFile = async (file: string | undefined): Promise<Buffer | undefined> => {
      if (file === undefined) return undefined;
      try {
        return await readFile(file);
      } catch (err) {
        throw new GatewayError(
          ErrorCodes.HA_ETCD,
          `ha.etcd: cannot read ${file}: ${(err as Error).message}`,
          { cause: err },
        );
      }
    };
    const [ca, cert, key] = await Promise.all([
      tlsFile(o.caFile),
      tlsFile(o.certFile),
      tlsFile(o.keyFile),
    ]);
    this.password =
      o.username !== undefined
        ? await readSecret({
            what: 'etcd password (ha.etcd.passwordFile)',
            file: o.passwordFile,
            env: {},
          })
        : undefined;
    const { Agent } = await loadUndici();
    this.dispatcher = new Agent({
      connect: {
        timeout: o.requestTimeoutMs,
        rejectUnauthorized: true,
        ...(ca ? { ca } : {}),
        ...(cert ? { cert } : {}),
        ...(key ? { key } : {}),
      },
      headersTimeout: o.requestTimeoutMs,
      bodyTimeout: o.requestTimeoutMs,
      keepAliveTimeout: 30_000,
      connections: 4,
    });
  }

  async close(): Promise<void> {
    const d = this.dispatcher;
    this.dispatcher = undefined;
    await d?.destroy();
  }

  /** Grants a lease; answers its id. */
  async grant(ttlMs: number): Promise<string> {
    const answer = await this.call<{ ID?: string }>('/v3/lease/grant', {
      TTL: Math.ceil(ttlMs / 1000),
    });
    if (!answer.ID) throw new GatewayError(ErrorCodes.HA_ETCD, 'etcd granted no lease');
    return answer.ID;
  }

  /** Renews a lease once; answers its remaining TTL in seconds (0: the lease is gone). */
  async keepAlive(lease: string): Promise<number> {
    const answer = await this.call<{ result?: { TTL?: string } }>('/v3/lease/keepalive', {
      ID: lease,
    });
    return Number(answer.result?.TTL ?? 0);
  }

  async revoke(lease: string): Promise<void> {
    await this.call('/v3/lease/revoke', { ID: lease });
  }

  /** The key, or undefined when nobody holds it. */
  async get(key: string): Promise<EtcdKeyValue | undefined> {
    const answer = await this.call<{ kvs?: RawKv[] }>('/v3/kv/range', { key: b64(key) });
    return kvOf(answer.kvs?.[0]);
  }

  /**
   * Puts `key = value` with `lease` if and only if the key does not exist (its create revision is
   * 0), in one transaction. Won: the epoch is the revision of that put (the key's create
   * revision). Lost: the holder as the same transaction read it.
   */
  async campaign(key: string, value: string, lease: string): Promise<CampaignResult> {
    const k = b64(key);
    const answer = await this.call<{
      header?: { revision?: string };
      succeeded?: boolean;
      responses?: { response_range?: { kvs?: RawKv[] } }[];
    }>('/v3/kv/txn', {
      compare: [{ key: k, target: 'CREATE', result: 'EQUAL', create_revision: '0' }],
      success: [{ request_put: { key: k, value: b64(value), lease } }],
      failure: [{ request_range: { key: k } }],
    });
    if (answer.succeeded === true)
      return { won: true, epoch: Number(answer.header?.revision ?? 0) };
    return { won: false, holder: kvOf(answer.responses?.[0]?.response_range?.kvs?.[0]) };
  }

  /**
   * POSTs `body` as JSON to each endpoint in turn from the preferred one, until one answers.
   * @throws GatewayError `SCANGW_E_HA_ETCD` when none answers, or one answers an error.
   */
  private async call<T>(path: string, body: unknown, retriedLogin = false): Promise<T> {
    const dispatcher = this.dispatcher;
    if (!dispatcher)
      throw new GatewayError(ErrorCodes.NOT_RUNNING, 'the etcd client is not open', {
        retryable: true,
      });
    if (
      this.options.username !== undefined &&
      this.token === undefined &&
      path !== '/v3/auth/authenticate'
    )
      await this.login();
    const { endpoints, requestTimeoutMs } = this.options;
    const failures: string[] = [];
    for (let i = 0; i < endpoints.length; i++) {
      const at = (this.preferred + i) % endpoints.length;
      const endpoint = endpoints[at]!;
      let status: number;
      let text: string;
      try {
        const { request } = await loadUndici();
        const res = await request(new URL(path, endpoint), {
          method: 'POST',
          dispatcher,
          body: JSON.stringify(body),
          headers: {
            'content-type': 'application/json',
            ...(this.token !== undefined && path !== '/v3/auth/authenticate'
              ? { authorization: this.token }
              : {}),
          },
          signal: AbortSignal.timeout(requestTimeoutMs),
        });
        status = res.statusCode;
        text = await res.body.text();
      } catch (err) {
        failures.push(`${endpoint}: ${(err as { code?: string }).code ?? (err as Error).message}`);
        continue;
      }
      this.preferred = at;
      this.lastEndpoint = endpoint;
      if (status >= 200 && status < 300) return JSON.parse(text) as T;
      // An expired or unknown auth token: log in again once.
      if (this.options.username !== undefined && !retriedLogin && /token/i.test(text)) {
        this.token = undefined;
        return this.call<T>(path, body, true);
      }
      throw new GatewayError(
        ErrorCodes.HA_ETCD,
        `etcd ${endpoint}${path} answered ${status}: ${text.slice(0, 200)}`,
      );
    }
    this.lastEndpoint = undefined;
    throw new GatewayError(
      ErrorCodes.HA_ETCD,
      `no etcd endpoint answered ${path}: ${failures.join('; ')}`,
      { retryable: true },
    );
  }

  private async login(): Promise<void> {
    const answer = await this.call<{ token?: string }>('/v3/auth/authenticate', {
      name: this.options.username,
      password: this.password,
    });
    if (!answer.token)
      throw new GatewayError(
        ErrorCodes.HA_ETCD,
        `etcd refused the login of user ${this.options.username}`,
      );
    this.token = answer.token;
  }
}

interface RawKv {
  value?: string;
  create_revision?: string;
  lease?: string;
}

function kvOf(kv: RawKv | undefined): EtcdKeyValue | undefined {
  if (!kv) return undefined;
  return {
    value: Buffer.from(kv.value ?? '', 'base64').toString('utf8'),
    createRevision: Number(kv.create_revision ?? 0),
    lease: kv.lease ?? '0',
  };
}

function b64(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64');
}
