import { describe, expect, it } from 'vitest';
import { httpSchema } from '../../src/config/local-schemas.js';
import { plainAddress, trustedClients } from '../../src/listener/connection-guard.js';

describe('trustedClients', () => {
  it('trusts 127.0.0.1 and ::1 but not the rest of 127.0.0.0/8 unless listed', () => {
    const trusted = trustedClients([]);
    expect(trusted('127.0.0.1')).toBe(true);
    expect(trusted('::1')).toBe(true);
    expect(trusted('::ffff:127.0.0.1')).toBe(true);
    expect(trusted('127.0.0.2')).toBe(false);
    expect(trusted('unknown')).toBe(false);
  });

  it('matches listed addresses and networks, IPv4 seen through an IPv6 listener included', () => {
    const trusted = trustedClients(['10.20.7.0/24', '192.168.1.5', 'fd00:1::/32']);
    expect(trusted('10.20.7.200')).toBe(true);
    expect(trusted('::ffff:10.20.7.9')).toBe(true);
    expect(trusted('10.20.8.1')).toBe(false);
    expect(trusted('192.168.1.5')).toBe(true);
    expect(trusted('192.168.1.6')).toBe(false);
    expect(trusted('fd00:1:abcd::7')).toBe(true);
    expect(trusted('fd00:2::7')).toBe(false);
  });

  it('spells IPv4-mapped addresses as IPv4 and leaves others alone', () => {
    expect(plainAddress('::ffff:10.0.0.5')).toBe('10.0.0.5');
    expect(plainAddress('::ffff:abcd')).toBe('::ffff:abcd');
    expect(plainAddress('fe80::1')).toBe('fe80::1');
  });
});

describe('http.trustedClients in the schema', () => {
  it('takes addresses and networks and refuses anything else', () => {
    const ok = httpSchema.parse({ trustedClients: ['10.20.7.0/24', '192.168.1.5', '::1/128'] });
    expect(ok.trustedClients).toHaveLength(3);
    expect(httpSchema.parse({}).trustedClients).toEqual([]);
    for (const bad of ['gateway.local', '10.0.0.0/33', '10.0.0.0/', '10.0.0.1/8/1', '::1/129']) {
      const r = httpSchema.safeParse({ trustedClients: [bad] });
      expect(r.success, bad).toBe(false);
    }
  });

  it('defaults the handshake bounds and the reserve', () => {
    const limits = httpSchema.parse({}).limits;
    expect(limits).toMatchObject({
      trustedReserve: 16,
      tlsHandshakeTimeoutMs: 3000,
      maxPendingHandshakes: 32,
    });
  });
});
