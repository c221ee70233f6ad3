// `node service-check.mjs CONFIG RUNNING` (the package's postinst, with the bundled runtime):
// whether the service would start with CONFIG, judged by `scan-gateway config check --as
// scan-gateway` run the way systemd starts the unit. The unit is read as systemd has it, drop-ins
// included (`systemctl show`): its environment, Environment= then EnvironmentFile= (which wins, as in
// systemd), and its LoadCredential= files, copied into a private folder named by
// $CREDENTIALS_DIRECTORY; the check runs as root and judges file access as the service user. So the
// client secret counts wherever it comes from: the credential, upstream.clientSecretFile, or
// SCAN_GATEWAY_CLIENT_SECRET in the unit's environment. RUNNING=yes: the gateway of this
// configuration holds its listen addresses, so "in use" is no problem (a TLS listener cannot say
// whose it is). Prints each reason the service would not start, one a line; exit 0 when there is
// none, 1 otherwise. Without a running systemd (a chroot), the unit's own two credentials.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const [config, running] = process.argv.slice(2);
const systemd = fs.existsSync('/run/systemd/system');
const show = (p) => {
  if (!systemd) return '';
  try {
    return execFileSync('systemctl', ['show', '-p', p, '--value', 'scan-gateway.service'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
  } catch {
    return '';
  }
};
// systemctl writes a space, a newline or an unprintable byte inside one value as \xNN, a backslash as \\.
const unescape = (s) =>
  s.replace(/\\(x[0-9a-fA-F]{2}|\\)/g, (_, e) =>
    e === '\\' ? '\\' : String.fromCharCode(parseInt(e.slice(1), 16)),
  );
const problems = [];
const env = { PATH: process.env.PATH || '/usr/sbin:/usr/bin:/sbin:/bin' };
for (const word of show('Environment').trim().split(/ +/)) {
  const a = unescape(word);
  const i = a.indexOf('=');
  if (i > 0) env[a.slice(0, i)] = a.slice(i + 1);
}
for (const line of show('EnvironmentFiles').split('\n')) {
  const m = /^(.*) \(ignore_errors=(yes|no)\)$/.exec(line.trim());
  if (!m) continue;
  let text;
  try {
    text = fs.readFileSync(m[1], 'utf8');
  } catch (err) {
    if (m[2] === 'no')
      problems.push(
        `the unit's EnvironmentFile=${m[1]} cannot be read (${err.code}): the service would not start`,
      );
    continue;
  }
  for (const l of text.split('\n')) {
    const x = /^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/.exec(l);
    if (!x) continue;
    const q = /^"(.*)"$|^'(.*)'$/.exec(x[2]);
    env[x[1]] = q ? (q[1] ?? q[2]) : x[2];
  }
}
// The unit's credentials; the package's own two when systemd is not running or names none.
let loads = show('LoadCredential')
  .split('\n')
  .map((l) => /^([^:\s]+):(\/\S*)$/.exec(l.trim()))
  .filter(Boolean)
  .map((m) => [m[1], m[2]]);
if (loads.length === 0)
  loads = [
    ['client-secret', '/etc/scan-gateway/client-secret'],
    ['admin-token', '/etc/scan-gateway/admin-token'],
  ];
const creds = fs.mkdtempSync(path.join(os.tmpdir(), 'scan-gateway-check-'));
try {
  for (const [id, file] of loads) {
    try {
      fs.copyFileSync(file, path.join(creds, id));
    } catch (err) {
      problems.push(
        `the unit's LoadCredential=${id}:${file} cannot be read (${err.code}): the service would not start`,
      );
    }
  }
  env.CREDENTIALS_DIRECTORY = creds;
  const r = spawnSync(
    '/usr/bin/scan-gateway',
    ['config', 'check', '--config', config, '--as', 'scan-gateway', '--json'],
    { env, encoding: 'utf8', cwd: '/' },
  );
  let result;
  try {
    result = JSON.parse(r.stdout.trim().split('\n').pop() || '');
  } catch {
    problems.push(
      `config check did not answer (exit ${r.status}): ${(r.stdout + r.stderr).trim()}`,
    );
  }
  if (result) {
    for (const p of result.problems ?? []) {
      // Beside the running gateway its own ports are taken.
      if (running === 'yes' && /is in use/.test(p.message)) continue;
      const at = p.line ? `${p.line}:${p.column ?? 1}: ` : '';
      problems.push(`${at}${p.path ? `${p.path}: ` : ''}${p.message}`);
    }
    if (result.valid && result.clientSecret !== 'found')
      problems.push(`client secret ${result.clientSecret}: the service would stop at start`);
  }
} finally {
  fs.rmSync(creds, { recursive: true, force: true });
}
for (const p of problems) console.log(`${config}: ${p}`);
process.exit(problems.length > 0 ? 1 : 0);
