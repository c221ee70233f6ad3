import { describe, expect, it } from 'vitest';
import { RotatingToken, TOKEN_OVERLAP_MS } from '../../src/listener/rotating-token.js';

const is = (given: string) => (token: string) => token === given;

describe('a token a reload replaces', () => {
  it('accepts the old token until the new one is used, then only the new one', () => {
    const token = new RotatingToken('old-token', () => 0);
    expect(token.replace('new-token')).toBe(true);
    expect(token.accepts(is('old-token'))).toBe(true);
    expect(token.accepts(is('new-token'))).toBe(true);
    expect(token.accepts(is('old-token'))).toBe(false);
  });

  it('drops the old token after the overlap even when the new one was never used', () => {
    let now = 0;
    const token = new RotatingToken('old-token', () => now);
    token.replace('new-token');
    now = TOKEN_OVERLAP_MS - 1;
    expect(token.accepts(is('old-token'))).toBe(true);
    now = TOKEN_OVERLAP_MS;
    expect(token.accepts(is('old-token'))).toBe(false);
    expect(token.accepts(is('new-token'))).toBe(true);
  });

  it('keeps nothing when the token is removed, and reports no change for the same value', () => {
    const token = new RotatingToken('old-token', () => 0);
    expect(token.replace('old-token')).toBe(false);
    expect(token.replace(undefined)).toBe(true);
    expect(token.configured()).toBe(false);
    expect(token.accepts(is('old-token'))).toBe(false);
  });
});
