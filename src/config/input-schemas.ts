import { z } from 'zod';
import { key } from './common-schemas.js';
import { VERDICT_REASONS } from './verdict-reasons.js';

/**
 * The `inputs` section of the configuration: one schema per input type, joined into a
 * discriminated union on `type`. Part of the one configuration schema (schema.ts). What each key
 * does at run time is described in docs/inputs.md.
 */

const inputBase = {
  id: key.describe('Identifier of this input, unique in the file.'),
  dcp: key.describe('Key of the DCP (from `dcps`) that reads of this input belong to.'),
  name: z
    .string()
    .trim()
    .min(1)
    .max(80)
    .optional()
    .describe(
      'A name for people (e.g. "ST-10 cell reader"), shown beside the id on the page and the station screen.',
    ),
  noReadStrings: z
    .array(z.string())
    .default(['NOREAD', 'ERROR', 'NR', 'NoRead'])
    .describe('Texts the scanner sends when it could not read a code: counted, never sent.'),
};

/** Longest read (barcode) taken by default, in bytes: above any real symbol (QR: 2,953 bytes). */
export const DEFAULT_MAX_READ_LENGTH = 4096;

/**
 * A byte sequence written as text: one character per byte (`"\r\n"`, `"\x06"` in YAML double
 * quotes), so only characters U+0000–U+00FF are allowed.
 */
export const byteString = z
  .string()
  .min(1)
  .refine(
    (s) => [...s].every((ch) => (ch.codePointAt(0) ?? 0) <= 0xff),
    'may only hold byte values \\x00-\\xff, one character per byte',
  );

const maxReadLength = z
  .number()
  .int()
  .positive()
  .max(1024 * 1024)
  .default(DEFAULT_MAX_READ_LENGTH)
  .describe(
    'Longest read in bytes; a longer one is stored as a rejection holding its first bytes.',
  );

/**
 * Pause that ends an overlong serial/TCP read being dropped, in ms: far above the gaps inside one
 * read (a scanner sends a read in one burst), below the time between two scans.
 */
export const DEFAULT_OVERLONG_PAUSE_MS = 200;

/** Framing and acknowledgement keys shared by byte-stream inputs (serial, tcp). */
const streamKeys = {
  framing: z
    .enum(['terminator', 'stxEtx', 'silence'])
    .default('terminator')
    .describe(
      'terminator = a read ends at `terminator`; stxEtx = a read sits between `stx` and `etx`; silence = a read ends when no byte came for `silenceMs`.',
    ),
  terminator: byteString
    .default('\r')
    .describe(
      'framing terminator: byte sequence that ends a read; YAML escapes such as "\\r\\n" work in double quotes.',
    ),
  stx: byteString
    .refine((s) => s.length === 1, 'must be one byte')
    .default('\x02')
    .describe('framing stxEtx: the byte that starts a read.'),
  etx: byteString
    .refine((s) => s.length === 1, 'must be one byte')
    .default('\x03')
    .describe('framing stxEtx: the byte that ends a read.'),
  silenceMs: z
    .number()
    .int()
    .min(1)
    .max(10_000)
    .default(50)
    .describe('framing silence: a read ends after this long without a byte, in ms.'),
  stripPrefix: byteString
    .optional()
    .describe('Bytes removed from the start of a read when present (a scanner-added prefix).'),
  stripSuffix: byteString
    .optional()
    .describe('Bytes removed from the end of a read when present (a scanner-added suffix).'),
  maxReadLength,
  overlongPauseMs: z
    .number()
    .int()
    .min(10)
    .max(10_000)
    .default(DEFAULT_OVERLONG_PAUSE_MS)
    .describe(
      'framing terminator and stxEtx: a read longer than maxReadLength is dropped (but for its first bytes) up to its terminator or ETX, or up to a pause this long without a byte, in ms; the next byte starts a new read.',
    ),
  ackBytes: byteString
    .optional()
    .describe(
      'Bytes written back to the scanner after a read is committed (many scanners beep on them); with ackOn verdict, only for a read that became a scan.',
    ),
  nakBytes: byteString
    .optional()
    .describe(
      'Bytes written back when a read is not taken: with ackOn verdict, every read that did not become a scan; with ackOn commit, one framing rejected (overlong, cut off, empty) or the buffer refused.',
    ),
  ackOn: z
    .enum(['commit', 'verdict'])
    .default('commit')
    .describe(
      "What ackBytes mean. verdict = the read became a scan and is stored (a refused, rejected, duplicate or no-read gets nakBytes: the operator hears it); commit = the read is stored, whatever the mapping made of it (a refused read is ack'd too). The default becomes verdict in a later release.",
    ),
  nakBytesByReason: z
    .partialRecord(z.enum(VERDICT_REASONS), byteString)
    .optional()
    .describe(
      `Bytes written back instead of nakBytes for a read not taken for this reason, e.g. { noContainer: "\\x15\\x15" } for a distinct beep; reasons: ${VERDICT_REASONS.join(', ')}.`,
    ),
};

/**
 * Where the fields of a JSON read are: dotted paths into each object (`data.code`). Used by MQTT
 * JSON payloads, ndjson/json files.
 */
/**
 * A dotted path into a JSON object: names (or list indexes) joined by dots, none empty. `.` and
 * `a..b` name nothing, so they are refused here rather than yielding nothing on every read.
 */
const jsonPath = z
  .string()
  .min(1)
  .regex(
    /^[^.]+(\.[^.]+)*$/,
    'is not a path into the payload: names joined by dots, none empty (e.g. `meas.temp`); "." names no field',
  );

export const jsonFieldsSchema = z
  .object({
    code: jsonPath.default('code').describe('Path of the barcode text (required in every read).'),
    time: jsonPath
      .default('ts')
      .describe('Path of the read time stamp, ISO 8601 (optional in a read).'),
    dcp: jsonPath.default('dcp').describe('Path of the DCP key (optional in a read).'),
    parents: jsonPath
      .default('parents')
      .describe('Path of the parent reference(s): text or a list of texts (optional).'),
    attributes: z
      .string()
      .min(1)
      .regex(
        /^[^.]+(\.[^.]+)*$/,
        'is the path of an object of attributes (e.g. `attributes`); "." is not one: to take fields of the payload itself as attributes, list them in `attributeFields` (e.g. `attributeFields: { voltage: voltage }`)',
      )
      .default('attributes')
      .describe(
        'Path of an object of attributes; text, number and boolean values are taken as text (optional). Fields outside such an object: `attributeFields`.',
      ),
    attributeFields: z
      .record(z.string().regex(/^\S+$/, 'an attribute key is text without white space'), jsonPath)
      .optional()
      .describe(
        "Attributes taken from any field of the payload, as attribute key → path (e.g. `{ voltage: voltage, temp: 'meas.temp' }`), as `attributeColumns` does for CSV. Text, number and boolean values are taken as text; a field absent from a payload adds nothing; an object or list there refuses the read with the path. A key here wins over the same key in the `attributes` object.",
      ),
  })
  .strict();

/** `type: files`: a watched folder (docs/inputs.md, "files"). */
export const filesInputSchema = z
  .object({
    ...inputBase,
    type: z.literal('files'),
    dir: z
      .string()
      .min(1)
      .describe('Folder to watch; `processed/` and `failed/` are created inside it.'),
    format: z
      .enum(['lines', 'csv', 'ndjson', 'json'])
      .default('lines')
      .describe(
        'lines = one barcode per line; csv = header row, then rows; ndjson = one JSON read per line; json = a JSON array of reads.',
      ),
    barcodeColumn: z
      .string()
      .default('barcode')
      .describe('csv: header of the column holding the barcode.'),
    timeColumn: z
      .string()
      .optional()
      .describe('csv: header of the column holding the read time stamp.'),
    dcpColumn: z
      .string()
      .optional()
      .describe('csv: header of the column holding the DCP key (overrides `dcp` where filled).'),
    parentColumn: z
      .string()
      .optional()
      .describe('csv: header of the column holding a parent reference.'),
    attributeColumns: z
      .record(z.string().min(1), z.string().min(1))
      .optional()
      .describe('csv: attributes taken from columns, as attribute key → column header.'),
    delimiter: z.string().length(1).default(',').describe('csv: field delimiter.'),
    fields: jsonFieldsSchema
      .prefault({})
      .describe('ndjson and json: where the fields of a read are in each object.'),
    maxReadLength,
    rememberFilesDays: z
      .number()
      .int()
      .min(0)
      .default(30)
      .describe(
        'A file whose content was ingested within this many days is not ingested again (content hash); 0 = off.',
      ),
    stableMs: z
      .number()
      .int()
      .min(0)
      .default(500)
      .describe('A file is read once its size has not changed for this long, in ms.'),
    usePolling: z
      .boolean()
      .default(false)
      .describe('Poll instead of inotify (needed on SMB/NFS shares).'),
    maxFileBytes: z
      .number()
      .int()
      .min(1)
      .default(2 * 1024 * 1024 * 1024)
      .describe(
        'Largest file taken, in bytes; a larger file goes to failed/ with the reason (files are read in chunks, so memory does not grow with the size).',
      ),
    allowHardLinks: z
      .boolean()
      .default(false)
      .describe(
        'Read a file that has more than one name (a hard link). Off by default: a hard link needs no right on the file it names, so anyone who may drop files could have the gateway read and show a key or password file; such a file goes to failed/ unread. Turn on only for a writer that makes hard links on purpose.',
      ),
  })
  .strict();

/** `type: serial`: a scanner on a serial port (docs/inputs.md, "serial"). */
export const serialInputSchema = z
  .object({
    ...inputBase,
    ...streamKeys,
    type: z.literal('serial'),
    path: z
      .string()
      .min(1)
      .describe('Device path; prefer /dev/serial/by-id/… which survives re-plugging.'),
    baudRate: z.number().int().positive().default(9600),
    dataBits: z.union([z.literal(5), z.literal(6), z.literal(7), z.literal(8)]).default(8),
    stopBits: z.union([z.literal(1), z.literal(1.5), z.literal(2)]).default(1),
    parity: z.enum(['none', 'even', 'odd', 'mark', 'space']).default('none'),
    flowControl: z
      .enum(['none', 'rtscts', 'xonxoff'])
      .default('none')
      .describe('none; rtscts = hardware (RTS/CTS lines); xonxoff = software (XON/XOFF bytes).'),
    reconnectMs: z
      .number()
      .int()
      .positive()
      .default(2000)
      .describe('First delay before reopening a lost device, in ms; doubles up to reconnectMaxMs.'),
    reconnectMaxMs: z
      .number()
      .int()
      .positive()
      .default(10_000)
      .describe('Longest delay between two reopen attempts, in ms.'),
  })
  .strict();

const LITERAL_PASSWORD =
  'a literal password is refused in the configuration file; put it in a file named by passwordFile, or in an environment variable named by passwordEnv';

/** `type: mqtt`: topics of a broker, persistent QoS 1 session (docs/inputs.md, "mqtt"). */
export const mqttInputSchema = z
  .object({
    ...inputBase,
    type: z.literal('mqtt'),
    url: z
      .string()
      .regex(
        /^(mqtts?|wss?):\/\/[^/\s]+/,
        'must be mqtt://, mqtts://, ws:// or wss:// followed by host[:port]',
      )
      .refine((u) => !/^[a-z]+:\/\/[^/@]*:[^/@]*@/i.test(u), LITERAL_PASSWORD)
      .describe('Broker address: mqtt://host:1883, mqtts://host:8883, ws(s)://host/mqtt.'),
    topics: z
      .array(
        z
          .string()
          .min(1)
          .refine(
            isTopicFilter,
            'is not a valid MQTT topic filter (+ and # take a whole level; # only last)',
          ),
      )
      .min(1)
      .describe('Topic filters to subscribe to, wildcards + and # allowed.'),
    clientId: z
      .string()
      .min(1)
      .max(128)
      .describe(
        "Stable client id: the broker keeps this id's session (and its queued messages) while the gateway is down.",
      ),
    format: z
      .enum(['text', 'json'])
      .default('text')
      .describe('text = the payload is the barcode; json = an object with the fields of `fields`.'),
    fields: jsonFieldsSchema
      .prefault({})
      .describe('json: where the fields of a read are in the payload.'),
    dcpFromTopic: z
      .string()
      .refine(
        (p) => p.split('/').filter((l) => l === '{dcp}').length === 1,
        'must hold the level {dcp} exactly once, e.g. plant/{dcp}/scans',
      )
      .optional()
      .describe(
        'Topic pattern whose {dcp} level names the DCP, e.g. plant/{dcp}/scans; + matches any level, # the rest.',
      ),
    qos: z
      .union([z.literal(0), z.literal(1)])
      .default(1)
      .describe('Subscription QoS: 1 = at least once (keep it); 0 loses messages.'),
    protocolVersion: z
      .union([z.literal(4), z.literal(5)])
      .default(5)
      .describe('5 = MQTT 5 (default), 4 = MQTT 3.1.1.'),
    sessionExpirySec: z
      .number()
      .int()
      .min(0)
      .max(0xffff_ffff)
      .default(7 * 24 * 3600)
      .describe(
        'MQTT 5: how long the broker keeps the session (and queues messages) while the gateway is away, in s.',
      ),
    caFile: z
      .string()
      .min(1)
      .optional()
      .describe("PEM bundle of the certificate authorities that signed the broker's certificate."),
    certFile: z
      .string()
      .min(1)
      .optional()
      .describe(
        'PEM client certificate (with keyFile), for brokers that authenticate clients by certificate.',
      ),
    keyFile: z.string().min(1).optional().describe('PEM private key of certFile.'),
    username: z.string().min(1).optional().describe('User name for the broker.'),
    passwordFile: z
      .string()
      .min(1)
      .optional()
      .describe('File holding the broker password (e.g. a systemd credential).'),
    passwordEnv: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')
      .optional()
      .describe('Name of the environment variable holding the broker password.'),
    password: z
      .never({ error: LITERAL_PASSWORD })
      .optional()
      .describe('Refused: a password never stands in this file (use passwordFile or passwordEnv).'),
    maxPayloadBytes: z
      .number()
      .int()
      .positive()
      .default(256 * 1024)
      .describe(
        'A larger payload is stored as a rejection (its first bytes) and acknowledged, never held whole in memory; MQTT 5: + 65 KiB is sent as maximumPacketSize, so the broker drops bigger packets (its log shows them).',
      ),
    maxInFlight: z
      .number()
      .int()
      .min(1)
      .max(65_535)
      .default(1000)
      .describe(
        'Most messages received and not yet committed and acknowledged (MQTT 5 receive maximum).',
      ),
    keepaliveSec: z.number().int().min(0).max(65_535).default(30).describe('MQTT keepalive, in s.'),
    reconnectMs: z
      .number()
      .int()
      .positive()
      .default(2000)
      .describe('Delay between reconnect attempts, in ms.'),
    connectTimeoutMs: z
      .number()
      .int()
      .positive()
      .default(30_000)
      .describe("Longest wait for the broker's answer to CONNECT, in ms."),
    statusTopic: z
      .union([
        z
          .string()
          .min(1)
          .refine((t) => !/[+#]/.test(t), 'must not hold wildcards'),
        z.literal(false),
      ])
      .optional()
      .describe(
        'Retained online/offline/paused status (last will: offline); default scan-gateway/<clientId>/status; false = none.',
      ),
    verdictTopic: z
      .string()
      .min(1)
      .refine((t) => !/[+#]/.test(t), 'must not hold wildcards')
      .optional()
      .describe(
        "Topic on which each read's verdict is published once committed (QoS 1, not retained), as JSON { reference, verdict: ack|nak, reason, input, time }: for a stack light or a vision system. Unset = none.",
      ),
  })
  .strict()
  .superRefine((c, ctx) => {
    if ((c.certFile === undefined) !== (c.keyFile === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: [c.certFile ? 'keyFile' : 'certFile'],
        message: 'certFile and keyFile go together',
      });
    }
    if (c.passwordFile !== undefined && c.passwordEnv !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['passwordEnv'],
        message: 'set passwordFile or passwordEnv, not both',
      });
    }
    if ((c.passwordFile !== undefined || c.passwordEnv !== undefined) && c.username === undefined) {
      ctx.addIssue({ code: 'custom', path: ['username'], message: 'a password needs a username' });
    }
  });

/** `type: tcp`: network readers, as client or server, framed like serial (docs/inputs.md, "tcp"). */
export const tcpInputSchema = z
  .object({
    ...inputBase,
    ...streamKeys,
    type: z.literal('tcp'),
    mode: z
      .enum(['client', 'server'])
      .describe(
        "Who opens the connection. server = the scanner connects to us (the reader is set up with the gateway's address and port as its target; we listen on `host`:`port`); client = we connect to the scanner (the reader listens, as many fixed-mount cameras do by default).",
      ),
    host: z
      .string()
      .min(1)
      .describe(
        "client: the reader's host name or address; server: the address to listen on (0.0.0.0 = all).",
      ),
    port: z
      .number()
      .int()
      .min(0)
      .max(65_535)
      .describe("client: the reader's port; server: the port to listen on."),
    keepAliveMs: z
      .number()
      .int()
      .min(0)
      .default(10_000)
      .describe('TCP keepalive: idle time before the first probe, in ms; 0 = off.'),
    idleTimeoutMs: z
      .number()
      .int()
      .min(0)
      .default(0)
      .describe(
        'Drop (client: and reconnect) a connection that sent nothing for this long, in ms; 0 = never. For readers that send heartbeats.',
      ),
    connectTimeoutMs: z
      .number()
      .int()
      .positive()
      .default(10_000)
      .describe('client: longest wait for a connection, in ms.'),
    reconnectMs: z
      .number()
      .int()
      .positive()
      .default(1000)
      .describe('client: first delay before reconnecting, in ms; doubles up to reconnectMaxMs.'),
    reconnectMaxMs: z
      .number()
      .int()
      .positive()
      .default(30_000)
      .describe('client: longest delay between two connection attempts, in ms.'),
    maxConnections: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(32)
      .describe('server: most readers connected at once; more are refused.'),
    expectReaders: z
      .number()
      .int()
      .min(0)
      .max(1000)
      .default(0)
      .describe(
        'server: readers that should be connected; fewer is a problem on the page and /healthz (SCANGW_H_INPUT_NO_READER). 0 = none expected (the input still says `waiting for reader` while none is).',
      ),
  })
  .strict();

/** `type: http`: `POST /api/v1/reads` on the local server (docs/inputs.md, "http"). */
export const httpInputSchema = z
  .object({
    ...inputBase,
    type: z.literal('http'),
    tokenFile: z
      .string()
      .min(1)
      .optional()
      .describe(
        'File holding the bearer token clients must send (e.g. a systemd credential); at least 16 characters.',
      ),
    tokenEnv: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')
      .default('SCAN_GATEWAY_INGEST_TOKEN')
      .describe(
        'Environment variable holding the bearer token (at least 16 characters); checked before tokenFile.',
      ),
    maxBodyBytes: z
      .number()
      .int()
      .min(1024)
      .max(64 * 1024 * 1024)
      .default(1024 * 1024)
      .describe('Largest request body, in bytes; larger is answered 413.'),
    maxReadsPerRequest: z
      .number()
      .int()
      .min(1)
      .max(100_000)
      .default(10_000)
      .describe('Most reads in one request; more is answered 413.'),
    maxReadsInFlight: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(20_000)
      .describe(
        'Most reads of requests being stored at once (received, parsed, not yet committed); a request past it is answered 503 with Retry-After, before its body is read when the reads in flight are at it already. A request is always taken when none is in flight. Bounds the memory ingest holds.',
      ),
    retryAfterSec: z
      .number()
      .int()
      .min(1)
      .max(3600)
      .default(5)
      .describe('Retry-After of a 503 answer (intake paused), in s.'),
    fields: jsonFieldsSchema
      .prefault({})
      .describe('Where the fields of a read are in each posted object.'),
    maxReadLength,
  })
  .strict();

/** One entry of `inputs`, by `type`. */
export const inputSchema = z.discriminatedUnion('type', [
  filesInputSchema,
  serialInputSchema,
  mqttInputSchema,
  tcpInputSchema,
  httpInputSchema,
]);

export type InputConfig = z.infer<typeof inputSchema>;
export type FilesInputConfig = z.infer<typeof filesInputSchema>;
export type SerialInputConfig = z.infer<typeof serialInputSchema>;
export type MqttInputConfig = z.infer<typeof mqttInputSchema>;
export type TcpInputConfig = z.infer<typeof tcpInputSchema>;
export type HttpInputConfig = z.infer<typeof httpInputSchema>;
export type JsonFieldsConfig = z.infer<typeof jsonFieldsSchema>;
/** The framing and acknowledgement keys of serial and tcp inputs. */
export type StreamInputConfig = Pick<SerialInputConfig, keyof typeof streamKeys>;

/** True for a valid MQTT topic filter: `+` and `#` take a whole level, `#` only the last (MQTT 5 §4.7). */
export function isTopicFilter(filter: string): boolean {
  const levels = filter.split('/');
  return levels.every((level, i) => {
    if (level === '#') return i === levels.length - 1;
    if (level === '+') return true;
    return !level.includes('#') && !level.includes('+');
  });
}
