import { describe, expect, it } from 'vitest';
import { ensureSystemTools } from '../setup/system-tools.js';

// The layers' setup never lets a test skip for a missing tool: it installs (as root with apt-get,
// not exercised here: it would change this machine) or stops with the line that installs.

describe("the suite's setup of system tools", () => {
  it('stops a layer that needs root, naming why and the layer that does not', () => {
    expect(() =>
      ensureSystemTools('integration', () => {}, { isRoot: false, path: process.env.PATH ?? '' }),
    ).toThrow(
      /integration tests run as root \(the full-disk tests mount a small tmpfs\).*npm run test:unit/,
    );
  });

  it('without apt-get, stops at once with the exact install line for what is missing', () => {
    const lines: string[] = [];
    let message = '';
    try {
      ensureSystemTools('e2e', (l) => lines.push(l), { isRoot: true, path: '/nonexistent' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/^test setup: the e2e tests drive tools this machine lacks: /);
    expect(message).toMatch(/Install them with: sudo apt-get install -y [a-z0-9 -]*\bchromium\b/);
    expect(message).toMatch(/apt-get install -y [a-z0-9 -]*\bsocat\b/);
    // Nothing was installed or announced.
    expect(lines).toEqual([]);
  });
});
