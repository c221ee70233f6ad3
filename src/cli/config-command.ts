import type { Command } from 'commander';
import { loadConfig } from '../config/load.js';
import { CommandExit } from './exit.js';

/** `scan-gateway config check`: validates a configuration file. Exit 0 valid, 2 invalid. */
export function registerConfigCommand(program: Command, io: { stdout: NodeJS.WritableStream; cwd: string; env: Record<string, string | undefined> }): void {
  const config = program.command('config').description('check the configuration');
  config
    .command('check')
    .description('validate a configuration file and print every problem with its line')
    .option('-c, --config <file>', 'configuration file', '/etc/scan-gateway/config.yaml')
    .option('--json', 'print the result as JSON')
    .addHelpText('after', '\nExample:\n  scan-gateway config check --config /etc/scan-gateway/config.yaml\n\nExit codes: 0 valid, 2 invalid or unreadable.')
    .action((opts: { config: string; json?: boolean }) => {
      const loaded = loadConfig(opts.config, { baseDir: io.cwd, env: io.env, skipSecret: true });
      const summary = { file: opts.config, valid: true, dcps: loaded.config.dcps.length, inputs: loaded.config.inputs.map((i) => `${i.id} (${i.type})`) };
      io.stdout.write(opts.json ? `${JSON.stringify(summary)}\n` : `${opts.config}: valid (${summary.dcps} DCPs, inputs: ${summary.inputs.join(', ')})\n`);
      throw new CommandExit(0);
    });
}
