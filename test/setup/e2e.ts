import { ensureRuntimes } from './runtimes.js';
import { ensureSystemTools } from './system-tools.js';

/** Global setup of the e2e layer (vitest.config.ts): root, its tools and the pinned runtimes. */
export default function setup(): void {
  ensureSystemTools('e2e');
  ensureRuntimes();
}
