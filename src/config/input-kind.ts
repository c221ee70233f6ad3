import { z } from 'zod';
import { ErrorCodes, GatewayError } from '../errors.js';
import { key } from './common-schemas.js';

/**
 * What the configuration needs to know of an input kind: its schema and what its entries claim
 * (ports, folders, devices, secrets). The kinds themselves live in `src/inputs/<kind>/`, one
 * descriptor each, listed by `src/inputs/registry.ts`; that registry hands each descriptor to
 * {@link addInputKindSpec} when it loads, as a Telegraf plugin adds itself to `inputs.Inputs`. The
 * configuration, below the inputs in the import direction, sees only this half of a descriptor.
 */

/** The keys every input has, whatever its kind; each kind's schema spreads them in. */
export const inputBaseKeys = {
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

/**
 * One entry of `inputs` as the parts outside its kind see it. The object holds its kind's keys
 * too (validated by its kind's schema); only the kind's own folder reads them, through its type.
 */
export interface InputConfig {
  id: string;
  type: string;
  dcp: string;
  /** A name for people, shown beside the id. */
  name?: string;
  noReadStrings: string[];
}

/**
 * Something an input claims outside the gateway, for `config check` and the start's preflight
 * (config/preflight.ts). `key` is the input's key that names it (`dir`, `port`).
 * - `folder`: a folder the input writes in (must be writable, created when missing);
 * - `device`: a device it opens read-write (may be absent now: a note, not a problem);
 *   `accessHint` follows a refused access (the group such devices belong to);
 * - `file`: a file it reads (absent `path`: not configured);
 * - `env`: an environment variable it needs; `missing` says what happens without it;
 * - `listen`: an address it listens on, `host:port`;
 * - `session`: something only one client may hold (a broker session by its client id), `id`
 *   comparing equal for the same; `clash` ends the message of a second input holding it.
 *
 * Two inputs claiming one folder, address or session are refused (config/cross-check.ts).
 */
export type InputResource =
  | { kind: 'folder'; key: string; path: string }
  | { kind: 'device'; key: string; path: string; accessHint?: string }
  | { kind: 'file'; key: string; path: string | undefined }
  | { kind: 'env'; key: string; name: string; missing: string }
  | { kind: 'listen'; key: string; address: string }
  | { kind: 'session'; key: string; id: string; clash: string };

/**
 * The fields an input hands the mapping, for a rule's `{ field: … }` (config/field-sources.ts):
 * `none` (only the code), `only` these keys, or `json`: any member of the payload's `objectPath`
 * object plus `keys`.
 */
export type InputFields =
  | { kind: 'none'; why: string }
  | { kind: 'only'; keys: string[]; why: string }
  | { kind: 'json'; keys: string[]; objectPath: string };

/** A secret an input reads (a password, a token): from `envName` first, else from `file`. */
export interface InputSecret {
  /** For messages: `password of input broker`. */
  what: string;
  envName?: string | undefined;
  file?: string | undefined;
}

/**
 * The configuration's half of an input kind's descriptor (the whole one: `src/inputs/kind.ts`).
 * Methods take the entry as its kind's schema made it.
 */
export interface InputKindSpec<C extends InputConfig = InputConfig> {
  /** The value of `type` that selects this kind. */
  readonly type: string;
  /**
   * Its entry's zod schema: a strict object with `type: z.literal(type)` and {@link inputBaseKeys}.
   * Every key has `.describe()` (docs/configuration.md is generated from it).
   */
  readonly schema: z.ZodType<C>;
  /** True when the input can run on either node under `ha` (a serial port is wired to one box). */
  readonly haMovable: boolean;
  /** When not movable: what to do instead, ending "it does not fail over: …". */
  readonly haAdvice?: string;
  /** Ports, folders, devices, files and variables the entry claims. */
  resources(config: C): InputResource[];
  /** The fields its reads carry, for a rule's `{ field: … }`. */
  fieldSources(config: C): InputFields;
  /** The secrets it reads, for the log's scrubber (config/secrets.ts). */
  secrets(config: C): InputSecret[];
  /**
   * Problems found when the file is loaded, beyond the schema (a token too short), each at one of
   * the entry's keys. `env` is the process environment.
   */
  loadProblems?(
    config: C,
    env: Record<string, string | undefined>,
  ): { key: string; message: string }[];
  /**
   * What of a change only a restart applies, as `inputs.<id>…` entries of a reload's
   * `needsRestart`; `before` is undefined for an added input.
   */
  restartNeeded?(before: C | undefined, after: C): string[];
}

const specs = new Map<string, InputKindSpec>();
let union: z.ZodType<InputConfig> | undefined;

/**
 * Adds a kind to the configuration's union. Called by `src/inputs/registry.ts` for each kind it
 * lists and by `registerInputKind` for a plugin's, before any configuration is read.
 *
 * @throws GatewayError `SCANGW_E_INTERNAL` when a kind of that `type` is there already, or its
 *   schema is not an object with `type: z.literal(type)`.
 */
export function addInputKindSpec(spec: InputKindSpec): void {
  if (specs.has(spec.type))
    throw new GatewayError(ErrorCodes.INTERNAL, `input kind "${spec.type}" is registered twice`);
  // The union is discriminated by `type`: the schema must be an object whose `type` is this literal.
  const typeKey = (spec.schema as unknown as { shape?: Record<string, unknown> }).shape?.['type'];
  if (!(typeKey instanceof z.ZodLiteral) || !typeKey.values.has(spec.type))
    throw new GatewayError(
      ErrorCodes.INTERNAL,
      `input kind "${spec.type}": its schema must be a z.object with type: z.literal('${spec.type}')`,
    );
  specs.set(spec.type, spec);
  union = undefined;
}

/** The kind of an entry, by its `type`; undefined for a type no kind has. */
export function inputKindSpec(type: string): InputKindSpec | undefined {
  return specs.get(type);
}

/**
 * The schema of one `inputs` entry: the registered kinds' schemas as a union discriminated by
 * `type`, built on first use after a kind was added.
 *
 * @throws GatewayError `SCANGW_E_INTERNAL` when no kind is registered (`src/inputs/registry.ts`
 *   was not loaded before the configuration was read).
 */
export function inputEntrySchema(): z.ZodType<InputConfig> {
  if (union) return union;
  const schemas = [...specs.values()].map((s) => s.schema);
  const [first, ...rest] = schemas;
  if (!first)
    throw new GatewayError(
      ErrorCodes.INTERNAL,
      'no input kind is registered: src/inputs/registry.ts must be loaded before a configuration is read',
    );
  union = z.discriminatedUnion('type', [first, ...rest] as unknown as [
    z.ZodObject<{ type: z.ZodLiteral<string> }>,
  ]) as unknown as z.ZodType<InputConfig>;
  return union;
}
