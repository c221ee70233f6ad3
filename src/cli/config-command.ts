import { readFileSync, writeFileSync } from 'node:fs';
import { haNotes } from '../config/ha-schema.js';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import {
  configJsonSchema,
  renderConfigDocs,
  renderConfigReference,
} from '../config/json-schema.js';
import {
  formatProblems,
  loadConfig,
  type ConfigProblem,
  type LoadedConfig,
} from '../config/load.js';
import { readClientSecret } from '../config/secrets.js';
import { isGatewayError, ErrorCodes } from '../errors.js';
import { derivedQuotaForPath, quotaTooLargeForDisk } from '../buffer/disk-guard.js';
import { DERIVED_QUOTA_RECHECK_MS } from '../buffer/disk-quota.js';
import { starterConfig, starterInputTypes } from './config-init.js';
import { lookupUser, preflight, type PreflightFinding } from '../config/preflight.js';
import { fieldSourceNotes } from '../config/field-sources.js';
import { lookupKeyNotes } from '../config/lookup-keys.js';
import { ackOnNotes } from '../config/verdict-reasons.js';
import { CommandExit, ExitCodes } from './exit.js';

/** The process edge `config` needs (main.ts provides it). */
export interface ConfigCommandIo {
  stdout: NodeJS.WritableStream;
  cwd: string;
  env: Record<string, string | undefined>;
  /** The user id running the command (root gets a note that `--as` judges access as the service user). */
  uid?: number;
}

/**
 * `scan-gateway config check | init | schema | docs`.
 *
 * - `check`: validates a file; prints every problem as `file:line:column: key.path: message`.
 *   Exit 0 valid, 2 invalid or unreadable.
 * - `init`: writes a commented starter configuration for the inputs named (config-init.ts).
 * - `schema`: prints the JSON Schema of the configuration (for editors and CI).
 * - `docs`: prints the generated reference of docs/configuration.md, or with `--write FILE` renews
 *   the generated part of that file.
 */
export function registerConfigCommand(program: Command, io: ConfigCommandIo): void {
  const config = program
    .command('config')
    .description('check the configuration, print its JSON Schema or its reference');
  config
    .command('check')
    .description('validate a configuration file and print every problem with its line')
    .option('-c, --config <file>', 'configuration file', '/etc/scan-gateway/config.yaml')
    .option('--json', 'print the result as JSON')
    .option(
      '--offline',
      'check the file only: not the files it names, environment variables or listen addresses (a file prepared on another machine)',
    )
    .option(
      '--as <user>',
      'judge file access as this user (run as root: --as scan-gateway, the service user)',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  scan-gateway config check --config /etc/scan-gateway/config.yaml --as scan-gateway   # as root, on the gateway\n' +
        '  scan-gateway config check --config site.yaml --offline                             # prepared elsewhere\n\nExit codes: 0 valid, 2 invalid or unreadable.',
    )
    .action(async (opts: { config: string; json?: boolean; offline?: boolean; as?: string }) => {
      let loaded: LoadedConfig;
      try {
        loaded = loadConfig(opts.config, { baseDir: io.cwd, env: io.env, skipSecret: true });
      } catch (err) {
        if (!isGatewayError(err, ErrorCodes.CONFIG)) throw err;
        const problems = (err.details.problems ?? []) as ConfigProblem[];
        if (opts.json)
          io.stdout.write(`${JSON.stringify({ file: opts.config, valid: false, problems })}\n`);
        else
          io.stdout.write(
            `${opts.config}: ${problems.length} problem${problems.length === 1 ? '' : 's'}\n${formatProblems(problems)}\n`,
          );
        throw new CommandExit(ExitCodes.USAGE);
      }
      const c = loaded.config;
      let secret: string;
      try {
        readClientSecret(c, io.env);
        secret = 'found';
      } catch (err) {
        // `check` often runs where the secret is not (a laptop, CI): a note, not a failure.
        secret = `not found here (${(err as Error).message})`;
      }
      let disk: string;
      try {
        // A quota the disk cannot hold means the disk fills before the quota is reached. Only a
        // note, not a failure: `check` may run on another machine than the gateway.
        if (c.buffer.maxBytes === undefined) {
          const d = derivedQuotaForPath(c.buffer.path);
          disk = `buffer.maxBytes not set: the byte quota is derived from the disk at start and rechecked every ${DERIVED_QUOTA_RECHECK_MS === 1000 ? 'second' : `${DERIVED_QUOTA_RECHECK_MS / 1000} s`} (here now ${d.bytes} bytes of scans)`;
        } else {
          disk =
            quotaTooLargeForDisk(c.buffer.path, c.buffer.maxBytes) ??
            'the buffer quota fits the disk here';
        }
      } catch (err) {
        disk = `not examined (${(err as Error).message})`;
      }
      // What the running gateway would need on this machine, unless the file was prepared elsewhere.
      const findings: PreflightFinding[] = [];
      if (!opts.offline) {
        const user = opts.as !== undefined ? lookupUser(opts.as) : undefined;
        if (user === undefined && io.uid === 0) {
          findings.push({
            severity: 'note',
            where: '',
            message:
              'checked as root, who may read everything: add --as scan-gateway to judge file access as the service user',
          });
        }
        findings.push(...(await preflight(c, { env: io.env, user })));
      }
      // A rule's field that an input never supplies passes the schema but yields nothing on the line.
      for (const n of fieldSourceNotes(c))
        findings.push({ severity: 'note', where: n.where, message: n.message });
      // A lookup key that is no valid value of the AI feeding it (a GTIN's check digit) never matches.
      for (const n of lookupKeyNotes(c))
        findings.push({ severity: 'note', where: n.where, message: n.message });
      findings.push(...haNotes(c));
      findings.push(...ackOnNotes(c));
      const preflightProblems = findings.filter((f) => f.severity === 'problem');
      const notes = findings.filter((f) => f.severity === 'note');
      const line = (f: PreflightFinding) =>
        `${opts.config}: ${f.where ? `${f.where}: ` : ''}${f.message}`;
      if (preflightProblems.length > 0) {
        if (opts.json) {
          io.stdout.write(
            `${JSON.stringify({ file: opts.config, valid: false, problems: preflightProblems.map((f) => ({ file: opts.config, path: f.where, message: f.message })), notes })}\n`,
          );
        } else {
          const n = preflightProblems.length;
          io.stdout.write(
            `${opts.config}: ${n} problem${n === 1 ? '' : 's'} on this machine (the file itself is valid; --offline skips these checks)\n` +
              `${preflightProblems.map(line).join('\n')}\n${notes.map((f) => `note: ${line(f)}\n`).join('')}`,
          );
        }
        throw new CommandExit(ExitCodes.USAGE);
      }
      const summary = {
        file: opts.config,
        valid: true,
        checked: opts.offline
          ? 'the file only (--offline)'
          : `the file, the files and folders it names${opts.as ? ` (as ${opts.as})` : ''}, environment variables, listen addresses`,
        notes: notes.map((f) => (f.where ? `${f.where}: ${f.message}` : f.message)),
        dcps: c.dcps.length,
        inputs: c.inputs.map((i) => `${i.id} (${i.type})`),
        rules: c.rules.map((r) => r.name),
        containers: c.containers.map((k) => k.name),
        lookups: Object.keys(c.lookups),
        clientSecret: secret,
        disk,
      };
      if (opts.json) {
        io.stdout.write(`${JSON.stringify(summary)}\n`);
      } else {
        io.stdout.write(
          `${opts.config}: valid (${summary.dcps} ${summary.dcps === 1 ? 'DCP' : 'DCPs'}, inputs: ${summary.inputs.join(', ') || 'none'}; ` +
            `rules: ${summary.rules.join(', ') || 'none (default mapping)'}; containers: ${summary.containers.join(', ') || 'none'})\n` +
            `client secret: ${secret}\n` +
            `disk: ${disk}\n` +
            `checked: ${summary.checked}\n` +
            summary.notes.map((n) => `note: ${n}\n`).join(''),
        );
      }
      throw new CommandExit(ExitCodes.OK);
    });

  config
    .command('init')
    .description(
      'write a commented starter configuration for the inputs named (it passes config check)',
    )
    .option(
      '-i, --input <type>',
      `an input to include, repeatable: ${starterInputTypes().join(', ')}`,
      (v: string, prev: string[]) => [...prev, v],
      [] as string[],
    )
    .option('-o, --output <file>', 'write to this file (mode 0640) instead of stdout')
    .option('--force', 'overwrite an existing --output file')
    .option('--data-dir <dir>', 'folder of the buffer and the inbox', '/var/lib/scan-gateway')
    .option(
      '--listen <address>',
      'http.listen: address of the health page and API',
      '127.0.0.1:8080',
    )
    .option('--site <id>', "site.id (default: this machine's host name)")
    .option('--timezone <zone>', "site.timezone, IANA (default: this machine's zone)")
    .addHelpText(
      'after',
      '\nExamples:\n  scan-gateway config init --input serial --input files > config.yaml\n' +
        '  scan-gateway config init --input mqtt --output /etc/scan-gateway/config.yaml',
    )
    .action(
      (opts: {
        input: string[];
        output?: string;
        force?: boolean;
        dataDir: string;
        listen: string;
        site?: string;
        timezone?: string;
      }) => {
        const unknown = opts.input.filter((t) => !starterInputTypes().includes(t));
        if (unknown.length > 0) {
          io.stdout.write(
            `config init: unknown input type ${unknown.map((t) => `"${t}"`).join(', ')}; one of: ${starterInputTypes().join(', ')}\n`,
          );
          throw new CommandExit(ExitCodes.USAGE);
        }
        const text = starterConfig({
          inputs: opts.input,
          dataDir: resolve(io.cwd, opts.dataDir),
          listen: opts.listen,
          siteId: opts.site,
          timezone: opts.timezone,
        });
        if (!opts.output) {
          io.stdout.write(text);
          throw new CommandExit(ExitCodes.OK);
        }
        const file = resolve(io.cwd, opts.output);
        try {
          // wx: never overwrite a configuration by accident; 0640: readable by the service's group only.
          writeFileSync(file, text, { flag: opts.force ? 'w' : 'wx', mode: 0o640 });
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          io.stdout.write(
            `config init: ${code === 'EEXIST' ? `${opts.output} exists; --force overwrites it` : `cannot write ${opts.output}: ${(err as Error).message}`}\n`,
          );
          throw new CommandExit(ExitCodes.USAGE);
        }
        io.stdout.write(
          `${opts.output}: written; next: edit the CHANGE-ME values, then scan-gateway config check --config ${opts.output}\n`,
        );
        throw new CommandExit(ExitCodes.OK);
      },
    );

  config
    .command('schema')
    .description('print the JSON Schema of the configuration file')
    .addHelpText(
      'after',
      '\nExample:\n  scan-gateway config schema > scan-gateway.schema.json\n  # in config.yaml, for editors: # yaml-language-server: $schema=./scan-gateway.schema.json',
    )
    .action(() => {
      io.stdout.write(`${JSON.stringify(configJsonSchema(), null, 2)}\n`);
      throw new CommandExit(ExitCodes.OK);
    });

  config
    .command('docs')
    .description('print the configuration reference (Markdown), or renew it in a file')
    .option(
      '--write <file>',
      'replace the generated part of this Markdown file (docs/configuration.md)',
    )
    .addHelpText(
      'after',
      '\nExample:\n  scan-gateway config docs --write docs/configuration.md   # what `npm run docs:config` does',
    )
    .action((opts: { write?: string }) => {
      if (!opts.write) {
        io.stdout.write(renderConfigReference());
        throw new CommandExit(ExitCodes.OK);
      }
      const file = resolve(io.cwd, opts.write);
      const before = readFileSync(file, 'utf8');
      const after = renderConfigDocs(before);
      if (after !== before) writeFileSync(file, after);
      io.stdout.write(`${opts.write}: ${after === before ? 'up to date' : 'renewed'}\n`);
      throw new CommandExit(ExitCodes.OK);
    });
}
