import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { configJsonSchema, renderConfigDocs, renderConfigReference } from '../config/json-schema.js';
import { formatProblems, loadConfig, type ConfigProblem, type LoadedConfig } from '../config/load.js';
import { readClientSecret } from '../config/secrets.js';
import { isGatewayError, ErrorCodes } from '../errors.js';
import { derivedQuotaForPath, quotaTooLargeForDisk } from '../buffer/disk-guard.js';
import { CommandExit, ExitCodes } from './exit.js';

/** The process edge `config` needs (main.ts provides it). */
export interface ConfigCommandIo {
  stdout: NodeJS.WritableStream;
  cwd: string;
  env: Record<string, string | undefined>;
}

/**
 * `scan-gateway config check | schema | docs`.
 *
 * - `check`: validates a file; prints every problem as `file:line:column: key.path: message`.
 *   Exit 0 valid, 2 invalid or unreadable.
 * - `schema`: prints the JSON Schema of the configuration (for editors and CI).
 * - `docs`: prints the generated reference of docs/configuration.md, or with `--write FILE` renews
 *   the generated part of that file.
 */
export function registerConfigCommand(program: Command, io: ConfigCommandIo): void {
  const config = program.command('config').description('check the configuration, print its JSON Schema or its reference');
  config
    .command('check')
    .description('validate a configuration file and print every problem with its line')
    .option('-c, --config <file>', 'configuration file', '/etc/scan-gateway/config.yaml')
    .option('--json', 'print the result as JSON')
    .addHelpText('after', '\nExample:\n  scan-gateway config check --config /etc/scan-gateway/config.yaml\n\nExit codes: 0 valid, 2 invalid or unreadable.')
    .action((opts: { config: string; json?: boolean }) => {
      let loaded: LoadedConfig;
      try {
        loaded = loadConfig(opts.config, { baseDir: io.cwd, env: io.env, skipSecret: true });
      } catch (err) {
        if (!isGatewayError(err, ErrorCodes.CONFIG)) throw err;
        const problems = (err.details.problems ?? []) as ConfigProblem[];
        if (opts.json) io.stdout.write(`${JSON.stringify({ file: opts.config, valid: false, problems })}\n`);
        else io.stdout.write(`${opts.config}: ${problems.length} problem${problems.length === 1 ? '' : 's'}\n${formatProblems(problems)}\n`);
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
        // Issue 19: a quota the disk cannot hold means the disk fills first. A note: `check` may run on another machine.
        if (c.buffer.maxBytes === undefined) {
          const d = derivedQuotaForPath(c.buffer.path);
          disk = `buffer.maxBytes not set: the byte quota is derived from the disk at start and every minute (here now ${d.bytes} bytes of scans)`;
        } else {
          disk = quotaTooLargeForDisk(c.buffer.path, c.buffer.maxBytes) ?? 'the buffer quota fits the disk here';
        }
      } catch (err) {
        disk = `not examined (${(err as Error).message})`;
      }
      const summary = {
        file: opts.config,
        valid: true,
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
            `disk: ${disk}\n`,
        );
      }
      throw new CommandExit(ExitCodes.OK);
    });

  config
    .command('schema')
    .description('print the JSON Schema of the configuration file')
    .addHelpText('after', '\nExample:\n  scan-gateway config schema > scan-gateway.schema.json\n  # in config.yaml, for editors: # yaml-language-server: $schema=./scan-gateway.schema.json')
    .action(() => {
      io.stdout.write(`${JSON.stringify(configJsonSchema(), null, 2)}\n`);
      throw new CommandExit(ExitCodes.OK);
    });

  config
    .command('docs')
    .description('print the configuration reference (Markdown), or renew it in a file')
    .option('--write <file>', 'replace the generated part of this Markdown file (docs/configuration.md)')
    .addHelpText('after', '\nExample:\n  scan-gateway config docs --write docs/configuration.md   # what `npm run docs:config` does')
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
