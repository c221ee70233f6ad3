import { hostname, networkInterfaces } from 'node:os';

/** Host names a loopback client uses; always accepted. */
export const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '[::1]'];

/** Whether a listen host (`http.listen` without the port) means every address of the machine. */
export function isWildcardHost(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]' || host === '';
}

/** Whether a listen host is loopback only (127.0.0.0/8, ::1, localhost). */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/**
 * The Host header check of the local server (DNS rebinding defence): a page on a foreign site
 * that rebinds its own name to 127.0.0.1 still sends its own name as `Host`, so answering only
 * known names keeps the status, metrics and page from being read through it.
 *
 * Accepted: {@link LOOPBACK_HOSTS}, the listen host, `extra` (`http.allowedHosts`), and, when
 * the server listens on every address, this machine's host name and interface addresses. An
 * entry without a port matches any port: the name is what a rebinding page cannot choose, and
 * `fastify.inject()` and port-0 listeners would otherwise need the port known in advance. Names
 * compare case-insensitively; a trailing dot of a fully qualified name is ignored.
 *
 * @returns a predicate over the raw `Host` header value (undefined = no header: refused).
 */
export function hostAllowList(
  listenHost: string,
  extra: readonly string[] = [],
): (host: string | undefined) => boolean {
  const names = new Set<string>();
  const withPort = new Set<string>();
  const add = (entry: string) => {
    const { name, port } = splitHost(entry);
    if (port === undefined) names.add(name);
    else withPort.add(`${name}:${port}`);
  };
  for (const h of LOOPBACK_HOSTS) add(h);
  if (isWildcardHost(listenHost)) {
    add(hostname());
    for (const list of Object.values(networkInterfaces())) {
      for (const a of list ?? [])
        add(a.family === 'IPv6' ? `[${a.address.replace(/%.*$/, '')}]` : a.address);
    }
  } else {
    add(listenHost.includes(':') && !listenHost.startsWith('[') ? `[${listenHost}]` : listenHost);
  }
  for (const e of extra) add(e);
  return (host) => {
    if (host === undefined || host === '') return false;
    const { name, port } = splitHost(host);
    return names.has(name) || (port !== undefined && withPort.has(`${name}:${port}`));
  };
}

/** `name[:port]` of a Host value, the name lower-cased without a trailing dot; `[v6]` kept bracketed. */
function splitHost(value: string): { name: string; port: string | undefined } {
  const v = value.trim().toLowerCase();
  const m = /^(\[[^\]]*\]|[^:]*)(?::(\d+))?$/.exec(v);
  if (!m) return { name: v, port: undefined };
  return { name: (m[1] ?? '').replace(/\.$/, ''), port: m[2] };
}
