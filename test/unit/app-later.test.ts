import { describe, expect, it } from 'vitest';
import { Later } from '../../src/app/later.js';
import { ErrorCodes } from '../../src/errors.js';

describe('Later: a part built after the one that calls it', () => {
  it('answers the bound part, and refuses a call before the bind and a second bind', () => {
    const later = new Later<{ n: number }>('the disk guard');
    expect(() => later.get()).toThrow(
      expect.objectContaining({
        code: ErrorCodes.NOT_RUNNING,
        message: 'the disk guard is not built yet',
      }),
    );
    const part = { n: 1 };
    expect(later.bind(part)).toBe(part);
    expect(later.get()).toBe(part);
    expect(() => later.bind({ n: 2 })).toThrow(
      expect.objectContaining({ code: ErrorCodes.INTERNAL }),
    );
    expect(later.get()).toBe(part);
  });
});
