import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { unescapeRead, type TryResult } from '../../src/cli/try-command.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { runTry } from '../helpers/try-cli.js';

const GS = '\u001d';

function tryReads(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  return runTry(
    join(PACKAGE_ROOT, 'config/example.yaml'),
    Date.parse('2026-11-18T06:00:00Z'),
    args,
  );
}

describe('scan-gateway try', () => {
  it.each([
    ['<GS>', `A<GS>B`, `A${GS}B`],
    ['<gs> in lower case', `A<gs>B`, `A${GS}B`],
    ['\\x1d', 'A\\x1dB', `A${GS}B`],
    ['\\x1D and <RS>, <EOT>', 'A\\x1DB<RS>C<EOT>', `A${GS}B\u001eC\u0004`],
    ['<FNC1> as GS', 'A<FNC1>B', `A${GS}B`],
    ['<CR>, <LF>, <STX> as failures prints them', '<STX>A<CR><LF>', '\u0002A\r\n'],
    ['text without escapes', ']d1C24A0K3B0712345', ']d1C24A0K3B0712345'],
    ['UTF-8 as written', 'café', 'café'],
  ])('reads %s', (_what, given, bytes) => {
    expect(unescapeRead(given)).toEqual(Buffer.from(bytes, 'utf8'));
  });

  it('takes \\xHH as one byte, so a read that is not UTF-8 is reproduced as `failures` printed it', () => {
    expect(unescapeRead('caf\\xe9')).toEqual(Buffer.from([0x63, 0x61, 0x66, 0xe9]));
    expect(unescapeRead('caf\\xC3\\xA9')).toEqual(Buffer.from('café', 'utf8'));
  });

  it('refuses as the input would: a read over maxReadLength, and bytes that are not UTF-8', async () => {
    const long = await tryReads('--input', 'gi-scanner', '--json', 'A'.repeat(5000));
    expect(long.code).toBe(1);
    expect((JSON.parse(long.out) as TryResult[])[0]).toMatchObject({
      outcome: 'rejected',
      reason: expect.stringContaining('maxReadLength'),
    });
    const latin1 = await tryReads('--input', 'gi-scanner', '--json', 'caf\\xe9');
    expect(latin1.code).toBe(1);
    expect((JSON.parse(latin1.out) as TryResult[])[0]).toMatchObject({
      read: 'caf\\xe9',
      outcome: 'rejected',
      reason: expect.stringMatching(/UTF-8/),
    });
  });

  it('maps several reads in order: a pallet opens, its items get it, a double read is a duplicate', async () => {
    const r = await tryReads(
      '--input',
      'gi-scanner',
      '--json',
      ']C100095212345678901235400PO-4711',
      `]d2010952123454321310B2611-03<GS>21C2611030001234`,
      `]d2010952123454321310B2611-03<GS>21C2611030001234`,
      'NOREAD',
    );
    expect(r.code).toBe(0);
    const results = JSON.parse(r.out) as TryResult[];
    expect(results.map((x) => x.outcome)).toEqual(['scan', 'scan', 'duplicate', 'noRead']);
    expect(results[0]).toMatchObject({
      rule: 'pallet-sscc',
      container: {
        name: 'incoming-pallet',
        action: 'opened',
        parent: 'https://id.gs1.org/00/095212345678901235',
      },
    });
    expect(results[1]).toMatchObject({
      scan: {
        reference: 'https://id.gs1.org/01/09521234543213/21/C2611030001234',
        parents: ['https://id.gs1.org/00/095212345678901235'],
      },
      tried: ['pallet-sscc', 'gs1-serialised'],
      gs1: {
        canonical: {
          reference: 'https://id.gs1.org/01/09521234543213/21/C2611030001234',
          why: 'identified by AI 01 (GTIN), AI 21 (SERIAL); not part of the identity: AI 10 (BATCH/LOT)',
        },
      },
    });
    expect(results[2]?.reason).toBe(
      'same reference at GI-01 within 2000 ms: counted, not sent again',
    );
  });

  it('takes what the source supplies: station, time, fields, parents', async () => {
    const r = await tryReads(
      '-i',
      'gi-inbox',
      '--dcp',
      'GI-02',
      '--time',
      '2026-11-18T06:59:30+01:00',
      '--field',
      'supplier=SUP-0099',
      '--field',
      'deliveryNote=DN-1',
      '--json',
      ']d1C24A0K3B0712345',
    );
    expect(r.code).toBe(0);
    const [result] = JSON.parse(r.out) as TryResult[];
    expect(result?.scan).toEqual({
      reference: 'C24A0K3B0712345',
      timeStamp: '2026-11-18T06:59:30',
      dcpKey: 'GI-01',
      productModelKey: 'PACK-A',
      supplierKey: 'SUP-0099',
      parents: [],
      attributes: [
        { key: 'deliveryNote', value: 'DN-1' },
        { key: 'cellLot', value: '24A0K3B' },
      ],
    });
  });

  it('explains a rejection with the GS1 elements found, and exits 1', async () => {
    const r = await tryReads(
      '-i',
      'gi-inbox',
      '--dcp',
      'GI-07',
      `]d2010952123454321310B2611-03<GS>21C2611030001234`,
    );
    expect(r.code).toBe(1);
    expect(r.out).toContain('(01) GTIN: 09521234543213');
    expect(r.out).toContain('(21) SERIAL: C2611030001234');
    expect(r.out).toContain('rules tried: pallet-sscc, gs1-serialised');
    expect(r.out).toContain(
      '→ rejected: rule gs1-serialised: DCP: the DCP the source named is "GI-07", which lookup table goodsInStations has no entry for',
    );
  });

  it('refuses bad usage with exit 2', async () => {
    expect(await tryReads('-i', 'gi-scanner', '--field', 'novalue', 'X')).toMatchObject({
      code: 2,
      err: 'scan-gateway try: --field "novalue" must be name=value\n',
    });
    expect(await tryReads('-i', 'gi-scanner', '--at', 'yesterday', 'X')).toMatchObject({
      code: 2,
      err: 'scan-gateway try: --at "yesterday" is not a time stamp\n',
    });
  });
});
