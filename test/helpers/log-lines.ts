import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/log.js';

/**
 * A JSON logger whose lines are kept in memory, for tests that assert on what was logged.
 * `lines` fills as the logger writes; `parsed()` gives them as objects.
 */
export function memoryLogger(level: 'trace' | 'debug' | 'info' | 'warn' = 'debug'): {
  logger: Logger;
  lines: string[];
  parsed(): { level: number; msg: string; [key: string]: unknown }[];
} {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(
        ...chunk
          .toString('utf8')
          .split('\n')
          .filter((l) => l !== ''),
      );
      done();
    },
  });
  return {
    logger: createLogger({ destination, format: 'json', level }),
    lines,
    parsed: () =>
      lines.map((l) => JSON.parse(l) as { level: number; msg: string; [key: string]: unknown }),
  };
}
