import { isIP } from 'node:net';

/**
 * Whether `hostname` (as `URL.hostname` gives it, IPv6 in brackets) names this machine: `localhost`
 * (and `*.localhost`, RFC 6761 §6.3), 127.0.0.0/8 or ::1. Traffic to it never crosses a network.
 */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  if (isIP(host) === 6)
    return host === '::1' || host === '0:0:0:0:0:0:0:1' || /^::ffff:127\./.test(host);
  return false;
}

/**
 * Why `url` may not carry the client secret or a token, or undefined when it may: only `https`, or
 * `http` to a loopback address (the sandbox, a local proxy/tunnel). The rule protects the secret
 * (contract §5: client credentials in the form) and the bearer token from anyone on the path.
 */
export function insecureUrlProblem(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined; // the schema reports a URL it cannot read
  }
  if (parsed.protocol === 'https:') return undefined;
  if (parsed.protocol === 'http:' && isLoopbackHost(parsed.hostname)) return undefined;
  if (parsed.protocol === 'http:') {
    return `must use https: over plain http the client secret and the access token would cross the network readable by anyone on the path (http is allowed only to loopback: 127.0.0.0/8, ::1, localhost; for a lab without TLS set upstream.allowInsecureHttp: true)`;
  }
  return `must be an https address, not ${parsed.protocol.replace(/:$/, '')}`;
}

/** Whether a proxy URL carries credentials (`user:pass@`), which belong in a file or the environment. */
export function hasUrlCredentials(url: string): boolean {
  try {
    const parsed = new URL(url);
    return parsed.username !== '' || parsed.password !== '';
  } catch {
    return false;
  }
}
