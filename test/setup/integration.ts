import { ensureSystemTools } from './system-tools.js';

/** Global setup of the integration layer (vitest.config.ts): root and its tools, before any test. */
export default function setup(): void {
  ensureSystemTools('integration');
}
