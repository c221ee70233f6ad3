import { registerHooks } from 'node:module';
import { writeFileSync } from 'node:fs';

/**
 * Preloaded into a daemon by the startup benchmark (`node --import …/module-list.js`): records
 * every module the process loads (ES modules and CommonJS alike, through the runtime's synchronous
 * resolve hook) and writes them, one URL a line, to `$SG_BENCH_MODULE_LIST` when the process exits.
 * Only for the listing run: the hook costs time on every import, so timed starts go without it.
 */
const out = process.env.SG_BENCH_MODULE_LIST;
const seen = new Set<string>();
if (out) {
  registerHooks({
    resolve(specifier, context, nextResolve) {
      const result = nextResolve(specifier, context);
      seen.add(result.url);
      return result;
    },
  });
  process.once('exit', () => writeFileSync(out, [...seen].join('\n')));
}
