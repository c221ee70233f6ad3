import { createServer } from 'node:net';

/**
 * A TCP port free on 127.0.0.1 at the moment of asking (bound to port 0, read, closed), for a
 * server a test starts as a child process (mosquitto, a gateway, sshd) that cannot report its own.
 * Another process may take it before it is used: tests that start many servers retry on EADDRINUSE.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        address && typeof address === 'object'
          ? resolve(address.port)
          : reject(new Error('no port')),
      );
    });
  });
}
