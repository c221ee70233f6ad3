import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TryResult } from '../../src/cli/try-command.js';
import { fieldSourceNotes } from '../../src/config/field-sources.js';
import { jsonFieldsSchema } from '../../src/inputs/schema-parts.js';
import type { MqttInputConfig } from '../../src/inputs/mqtt/schema.js';
import { loadConfig } from '../../src/config/load.js';
import { jsonRead } from '../../src/inputs/json-read.js';
import { messageToItem } from '../../src/inputs/mqtt/mqtt-payload.js';
import { Mapper } from '../../src/mapping/mapper.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { runTry } from '../helpers/try-cli.js';

const CONFIG = join(PACKAGE_ROOT, 'test/fixtures/site-trial/site.yaml');
const VISION =
  '{"code":"PK-000815","ts":"2026-11-27T10:00:00Z","station":"EOL-3","voltage":3.652,"meas":{"temp":24.5}}';

function tryIt(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  return runTry(CONFIG, Date.parse('2026-11-27T10:00:01Z'), args);
}

describe('any payload field as an attribute (fields.attributeFields)', () => {
  it('takes a top-level field and a nested path as text; an absent path adds nothing', () => {
    const fields = jsonFieldsSchema.parse({
      attributeFields: { voltage: 'voltage', temp: 'meas.temp', humidity: 'meas.rh' },
    });
    const r = jsonRead(JSON.parse(VISION), fields);
    expect(r).toEqual({
      ok: true,
      fields: {
        code: 'PK-000815',
        sourceTime: '2026-11-27T10:00:00Z',
        attributes: { voltage: '3.652', temp: '24.5' },
      },
    });
  });

  it('refuses a read whose attribute field holds an object, naming the path', () => {
    const fields = jsonFieldsSchema.parse({ attributeFields: { m: 'meas' } });
    expect(jsonRead(JSON.parse(VISION), fields)).toMatchObject({
      ok: false,
      field: 'meas',
      reason: expect.stringContaining('(attribute m) must be text'),
    });
  });

  it('refuses "." and empty path segments, pointing at attributeFields', () => {
    const dot = jsonFieldsSchema.safeParse({ attributes: '.' });
    expect(dot.success).toBe(false);
    expect(dot.error?.issues[0]?.message).toContain('attributeFields');
    expect(jsonFieldsSchema.safeParse({ attributeFields: { t: 'meas..temp' } }).success).toBe(
      false,
    );
    expect(jsonFieldsSchema.safeParse({ code: '.' }).success).toBe(false);
  });

  it('an MQTT message gives the scan its voltage; a rule attribute without a value is noted, not silent', () => {
    const { config } = loadConfig(CONFIG, { baseDir: PACKAGE_ROOT, env: {}, skipSecret: true });
    const mapper = new Mapper(config);
    const input = config.inputs.find((i) => i.id === 'vision') as MqttInputConfig | undefined;
    if (input?.type !== 'mqtt') throw new Error('fixture: vision is an mqtt input');
    const item = messageToItem(
      input,
      'plant/EOL-3/scans',
      Buffer.from('{"code":"PK-000815","voltage":3.652}'),
      new Date('2026-11-27T10:00:01Z'),
    );
    if (item.kind !== 'read') throw new Error(item.rejection.reason);
    const out = mapper.map(item.read);
    expect(out).toMatchObject({
      outcome: 'scan',
      scan: { dcpKey: 'EOL-3', attributes: [{ key: 'voltage', value: '3.652' }] },
    });
    expect(out.outcome === 'scan' ? out.notes : undefined).toEqual([
      'attribute cellTemp not sent: field temp has no value in this read',
    ]);
  });

  it('config check notes a field an input never supplies, and one a JSON input gives only inside its attributes object', () => {
    const { config } = loadConfig(CONFIG, { baseDir: PACKAGE_ROOT, env: {}, skipSecret: true });
    const notes = fieldSourceNotes(config);
    expect(notes).toContainEqual(
      expect.objectContaining({
        where: 'rules[modules].attributes.voltage',
        input: 'assembly',
        kind: 'never',
      }),
    );
    expect(notes).toContainEqual(
      expect.objectContaining({
        where: 'rules[eol].attributes.cellTemp',
        input: 'mes',
        kind: 'objectOnly',
      }),
    );
    expect(notes).toContainEqual(
      expect.objectContaining({
        where: 'rules[eol].attributes.cellTemp',
        input: 'inbox',
        kind: 'never',
      }),
    );
    // vision maps temp by attributeFields: nothing to say.
    expect(notes.filter((n) => n.input === 'vision')).toEqual([]);
  });
});

describe('scan-gateway try --payload', () => {
  it("runs the MQTT input's own parsing: topic level as DCP, attributeFields, time stamp", async () => {
    const r = await tryIt(
      '--input',
      'vision',
      '--topic',
      'plant/EOL-3/scans',
      '--payload',
      VISION,
      '--json',
    );
    expect(r.code).toBe(0);
    const [result] = JSON.parse(r.out) as TryResult[];
    expect(result).toMatchObject({
      outcome: 'scan',
      fromInput: {
        dcp: 'EOL-3',
        time: '2026-11-27T10:00:00Z',
        attributes: { voltage: '3.652', temp: '24.5' },
        origin: { topic: 'plant/EOL-3/scans' },
      },
      scan: {
        reference: 'PK-000815',
        timeStamp: '2026-11-27T11:00:00',
        dcpKey: 'EOL-3',
        attributes: [
          { key: 'voltage', value: '3.652' },
          { key: 'temp', value: '24.5' },
          { key: 'cellTemp', value: '24.5' },
        ],
      },
    });
  });

  it('shows what the input refuses, with its reason: a topic outside dcpFromTopic, JSON that does not parse', async () => {
    const topic = await tryIt(
      '--input',
      'vision',
      '--topic',
      'other/EOL-3',
      '--payload',
      VISION,
      '--json',
    );
    expect(topic.code).toBe(1);
    expect((JSON.parse(topic.out) as TryResult[])[0]).toMatchObject({
      outcome: 'rejected',
      reason: expect.stringContaining('does not match dcpFromTopic'),
    });
    const bad = await tryIt('--input', 'mes', '--payload', '{"code":', '--json');
    expect((JSON.parse(bad.out) as TryResult[])[0]).toMatchObject({
      outcome: 'rejected',
      reason: expect.stringContaining('body is not JSON'),
    });
  });

  it('asks for --topic where the input takes the DCP from it', async () => {
    const r = await tryIt('--input', 'vision', '--payload', VISION);
    expect(r.code).toBe(2);
    expect(r.err).toContain('give --topic');
  });

  it('an HTTP ingest body of two reads gives two results; a CSV payload is parsed with its header', async () => {
    const http = await tryIt(
      '--input',
      'mes',
      '--payload',
      '[{"code":"PK-1","voltage":3.6},{"code":"PK-2"}]',
      '--json',
    );
    const results = JSON.parse(http.out) as TryResult[];
    expect(results.map((x) => x.scan)).toMatchObject([
      { reference: 'PK-1', attributes: [{ key: 'voltage', value: '3.6' }] },
      { reference: 'PK-2', attributes: [] },
    ]);
    expect(results[1]?.notes).toEqual([
      'attribute cellTemp not sent: field temp has no value in this read',
    ]);
    const csv = await tryIt('--input', 'inbox', '--payload', 'barcode,U\nPK-3,3.7\n', '--json');
    expect((JSON.parse(csv.out) as TryResult[])[0]).toMatchObject({
      outcome: 'scan',
      scan: { reference: 'PK-3', attributes: [{ key: 'voltage', value: '3.7' }] },
      fromInput: { origin: { file: 'payload.csv', line: 2 } },
    });
  });

  it('says when the input makes no read of the payload, and a CSV row without its header is refused as the input refuses the file', async () => {
    const empty = await tryIt('--input', 'inbox', '--payload', 'barcode,U\n');
    expect(empty.code).toBe(2);
    expect(empty.err).toContain(
      'input inbox makes no read of this payload (a csv payload is the header row, then the rows)',
    );
    const headless = await tryIt('--input', 'inbox', '--payload', 'PK-3,3.7', '--json');
    expect(headless.code).toBe(1);
    expect((JSON.parse(headless.out) as TryResult[])[0]).toMatchObject({
      outcome: 'rejected',
      reason: expect.stringContaining('the whole file is refused'),
    });
  });

  it('prints the static note for the input and the per-read note in text', async () => {
    const r = await tryIt('--input', 'assembly', 'MOD-0001');
    expect(r.code).toBe(0);
    expect(r.out).toContain(
      'note: rules[modules].attributes.voltage: { field: voltage } never has a value on input assembly',
    );
    expect(r.out).toContain(
      'note: attribute voltage not sent: field voltage has no value in this read',
    );
  });
});
