import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import type { ProductKeyUse } from '../../src/mapping/mapper.js';
import { ProductCheck } from '../../src/mapping/product-check.js';

function logSink() {
  const stream = new PassThrough();
  const lines: Record<string, unknown>[] = [];
  stream.on('data', (chunk: Buffer) => {
    for (const l of chunk.toString().split('\n'))
      if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
  });
  return { logger: createLogger({ level: 'info', destination: stream, format: 'json' }), lines };
}

describe('product check against the upstream product list', () => {
  it('reports mapped and seen keys the list does not hold, with where they are written', async () => {
    const { logger, lines } = logSink();
    let list: { key: string }[] | Error = [{ key: 'PACK-A' }];
    let configured: ProductKeyUse[] = [
      { key: 'PACK-A', where: ['dcps GI-01'] },
      { key: 'MOD-48V', where: ['lookups.moduleTypeToProduct'] },
    ];
    const told: string[][] = [];
    const check = new ProductCheck({
      listProducts: async () => {
        if (list instanceof Error) throw list;
        return list;
      },
      configuredKeys: () => configured,
      observedKeys: () => ['PACK-A', 'CELL-X'],
      onProducts: (keys) => told.push([...keys]),
      intervalMs: 3_600_000,
      rejectUnknown: false,
      logger,
      now: () => Date.parse('2026-11-18T06:00:00Z'),
    });
    expect(check.snapshot()).toEqual({ state: 'unchecked', missing: [], rejectUnknown: false });

    await check.checkNow();
    expect(check.snapshot()).toEqual({
      state: 'missing',
      checkedAt: '2026-11-18T06:00:00.000Z',
      products: 1,
      missing: [
        { key: 'MOD-48V', where: ['lookups.moduleTypeToProduct'] },
        { key: 'CELL-X', where: ['seen in reads'] },
      ],
      rejectUnknown: false,
    });
    expect(told).toEqual([['PACK-A']]);

    // Said once, not at every check.
    await check.checkNow();
    const warnings = () =>
      lines.filter(
        (l) =>
          l.level === 40 &&
          String(l.msg).startsWith('product keys not in the upstream product list'),
      );
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]?.msg).toBe(
      'product keys not in the upstream product list: MOD-48V, CELL-X',
    );

    // A failed fetch keeps the last list and says so.
    list = new Error('connect ECONNREFUSED');
    await check.checkNow();
    expect(check.snapshot()).toMatchObject({
      state: 'missing',
      products: 1,
      lastError: { message: 'connect ECONNREFUSED' },
    });

    // The list gains the keys; a reload drops the other one.
    list = [{ key: 'PACK-A' }, { key: 'MOD-48V' }, { key: 'CELL-X' }];
    configured = [{ key: 'PACK-A', where: ['dcps GI-01'] }];
    await check.checkNow();
    expect(check.snapshot()).toEqual({
      state: 'ok',
      checkedAt: '2026-11-18T06:00:00.000Z',
      products: 3,
      missing: [],
      rejectUnknown: false,
    });
  });

  it('says error when no list was ever fetched, and shares one fetch between concurrent checks', async () => {
    const { logger } = logSink();
    let calls = 0;
    const check = new ProductCheck({
      listProducts: async () => {
        calls++;
        await new Promise((r) => setTimeout(r, 20));
        throw new Error('401 Unauthorized');
      },
      configuredKeys: () => [],
      observedKeys: () => [],
      intervalMs: 60_000,
      rejectUnknown: true,
      logger,
    });
    await Promise.all([check.checkNow(), check.checkNow()]);
    expect(calls).toBe(1);
    expect(check.snapshot()).toMatchObject({
      state: 'error',
      missing: [],
      rejectUnknown: true,
      lastError: { message: '401 Unauthorized' },
    });
    expect(check.knownProducts()).toBeUndefined();
  });
});
