import { spawn } from 'node:child_process';

/**
 * Runs Debian's `kcat` (librdkafka), the reference Kafka client of the status-event interop tests.
 * Rejects when kcat is not installed (the test must fail, not skip: `.ci/run` installs it) or
 * runs longer than `timeoutMs`; a non-zero exit is a result, not a rejection.
 */
export function kcat(
  args: string[],
  options: { input?: string; timeoutMs?: number } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('kcat', args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(
          `kcat ${args.join(' ')} ran over ${options.timeoutMs ?? 60_000} ms\nstdout: ${stdout}\nstderr: ${stderr}`,
        ),
      );
    }, options.timeoutMs ?? 60_000);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`kcat cannot run (install Debian's kcat, as .ci/run does): ${err.message}`));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(options.input ?? '');
  });
}

/** kcat options for SASL_SSL with SCRAM-SHA-512, as the sandbox's `GET /_sandbox/kafka` describes. */
export function kcatSasl(
  bootstrapServers: string,
  user: string,
  password: string,
  caFile: string,
): string[] {
  return [
    '-b',
    bootstrapServers,
    '-X',
    'security.protocol=SASL_SSL',
    '-X',
    'sasl.mechanisms=SCRAM-SHA-512',
    '-X',
    `sasl.username=${user}`,
    '-X',
    `sasl.password=${password}`,
    '-X',
    `ssl.ca.location=${caFile}`,
  ];
}
