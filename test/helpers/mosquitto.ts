import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { freePort } from './ports.js';

/** TLS material of a broker's listener (PEM files). */
export interface BrokerTls {
  caFile: string;
  certFile: string;
  keyFile: string;
  /** Clients must present a certificate signed by `caFile`. */
  requireClientCertificate?: boolean;
}

/** A real mosquitto broker for tests, on 127.0.0.1 and a free port, with persistence in `dir`. */
export interface Broker {
  /** `mqtt://127.0.0.1:<port>`, or `mqtts://` with TLS */
  url: string;
  port: number;
  /** Folder of the broker's configuration, persistence file and log. */
  dir: string;
  /** SIGTERM: mosquitto saves its persistence file and exits. */
  stop(): Promise<void>;
  /** SIGKILL: no goodbye, no final save (persistence is written after every change, see below). */
  kill(): Promise<void>;
  /** Starts the broker again on the same port with the same persistence file. */
  restart(): Promise<void>;
  /** The broker's log so far (for failure messages). */
  log(): string;
}

/** Catches a hang only: a loaded machine may be slow to start a broker. */
const START_TIMEOUT_MS = 30_000;

/** The mosquitto binary: on PATH, or Debian's /usr/sbin/mosquitto (not on a normal user's PATH). */
function mosquittoBinary(): string {
  const probe = spawnSync('mosquitto', ['-h'], { stdio: 'ignore' });
  if (!probe.error) return 'mosquitto';
  if (existsSync('/usr/sbin/mosquitto')) return '/usr/sbin/mosquitto';
  throw new Error(
    'mosquitto is required for the MQTT tests but was not found; install it: apt-get install mosquitto',
  );
}

async function accepting(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Starts mosquitto with a temporary configuration in `dir`: one listener on 127.0.0.1, anonymous
 * clients, persistence on (written after every change, so even SIGKILL loses nothing the broker
 * acknowledged), and no limits on queued or in-flight messages (mosquitto's defaults silently drop
 * QoS 1 messages of a busy or offline client).
 *
 * Started as root, mosquitto drops to its own user: `dir` is made writable for it, and every
 * folder above `dir` must be traversable (a `mkdtemp` folder is not: chmod it 0o755).
 *
 * @throws Error when mosquitto is not installed (the test must fail, not skip) or does not start.
 */
export async function startMosquitto(
  dir: string,
  options: {
    tls?: BrokerTls;
    /** Also log notices (e.g. "Dropping too large outgoing PUBLISH"). */ logNotices?: boolean;
    /**
     * Save persistence every this many seconds instead of after every change. For tests that queue
     * thousands of messages and never kill the broker: a save after each one rewrites the whole
     * file every time (quadratic) and takes minutes on a loaded machine.
     */
    autosaveSeconds?: number;
  } = {},
): Promise<Broker> {
  const binary = mosquittoBinary();
  await mkdir(dir, { recursive: true });
  // Started as root, mosquitto drops to its own user before writing persistence: let it write here.
  await chmod(dir, 0o777);
  const port = await freePort();
  const configFile = join(dir, 'mosquitto.conf');
  await writeFile(
    configFile,
    [
      `listener ${port} 127.0.0.1`,
      ...(options.tls
        ? [
            `cafile ${options.tls.caFile}`,
            `certfile ${options.tls.certFile}`,
            `keyfile ${options.tls.keyFile}`,
            `require_certificate ${options.tls.requireClientCertificate ? 'true' : 'false'}`,
          ]
        : []),
      'allow_anonymous true',
      'persistence true',
      `persistence_location ${dir}/`,
      ...(options.autosaveSeconds !== undefined
        ? [`autosave_interval ${options.autosaveSeconds}`, 'autosave_on_changes false']
        : ['autosave_interval 1', 'autosave_on_changes true']),
      'max_queued_messages 0',
      'max_inflight_messages 0',
      'log_dest stderr',
      'log_type error',
      'log_type warning',
      ...(options.logNotices ? ['log_type notice'] : []),
      '',
    ].join('\n'),
  );
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let output = '';

  const launch = async (): Promise<void> => {
    const proc = spawn(binary, ['-c', configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    proc.stdout
      ?.setEncoding('utf8')
      .on('data', (t: string) => (output = (output + t).slice(-8000)));
    proc.stderr
      ?.setEncoding('utf8')
      .on('data', (t: string) => (output = (output + t).slice(-8000)));
    let gone = false;
    exited = new Promise((resolve) => proc.once('exit', () => ((gone = true), resolve())));
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (!(await accepting(port))) {
      if (gone) throw new Error(`mosquitto exited before listening on ${port}:\n${output}`);
      if (Date.now() > deadline) {
        proc.kill('SIGKILL');
        throw new Error(
          `mosquitto did not listen on ${port} within ${START_TIMEOUT_MS} ms:\n${output}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  const end = async (signal: NodeJS.Signals): Promise<void> => {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill(signal);
    await exited;
  };

  await launch();
  return {
    url: `${options.tls ? 'mqtts' : 'mqtt'}://127.0.0.1:${port}`,
    port,
    dir,
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
    async restart() {
      await end('SIGTERM');
      await launch();
    },
    log: () => output,
  };
}

/** PEM files of a throw-away CA, a server certificate for 127.0.0.1 and a client certificate. */
export interface TestPki {
  caFile: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

/**
 * Makes a CA, a server certificate (subjectAltName IP:127.0.0.1) and a client certificate with
 * openssl in `dir`, readable by the broker's own user.
 *
 * @throws Error when openssl is not installed (the test must fail, not skip) or fails.
 */
export async function createTestPki(dir: string): Promise<TestPki> {
  await mkdir(dir, { recursive: true });
  await chmod(dir, 0o777);
  const run = (args: string[]): void => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (r.error)
      throw new Error(
        `openssl is required for the MQTT TLS test but could not be run (${r.error.message}); install it: apt-get install openssl`,
      );
    if (r.status !== 0) throw new Error(`openssl ${args.join(' ')} failed: ${r.stderr}`);
  };
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  run([
    'req',
    '-x509',
    ...key,
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=scan-gateway test CA',
  ]);
  await writeFile(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1\n');
  run(['req', ...key, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1']);
  run([
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.pem',
    '-days',
    '2',
    '-extfile',
    'server.ext',
  ]);
  run(['req', ...key, '-keyout', 'client.key', '-out', 'client.csr', '-subj', '/CN=scan-gateway']);
  run([
    'x509',
    '-req',
    '-in',
    'client.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'client.pem',
    '-days',
    '2',
  ]);
  for (const f of ['ca.pem', 'server.pem', 'server.key', 'client.pem', 'client.key'])
    await chmod(join(dir, f), 0o644);
  return {
    caFile: join(dir, 'ca.pem'),
    serverCert: join(dir, 'server.pem'),
    serverKey: join(dir, 'server.key'),
    clientCert: join(dir, 'client.pem'),
    clientKey: join(dir, 'client.key'),
  };
}
