import { addInputKindSpec, type InputConfig } from '../config/input-kind.js';
import { ErrorCodes, GatewayError } from '../errors.js';
import { filesKind } from './files/kind.js';
import type { FilesInputConfig } from './files/schema.js';
import { httpKind } from './http/kind.js';
import type { HttpInputConfig } from './http/schema.js';
import type { InputKind } from './kind.js';
import { mqttKind } from './mqtt/kind.js';
import type { MqttInputConfig } from './mqtt/schema.js';
import { serialKind } from './serial/kind.js';
import type { SerialInputConfig } from './serial/schema.js';
import { tcpKind } from './tcp/kind.js';
import type { TcpInputConfig } from './tcp/schema.js';

/**
 * The input kinds the gateway knows, by `type`: the one list the configuration's `inputs` union,
 * preflight, `try`, `config init`, `ha`, status and metrics read. Adding a kind is a folder
 * `src/inputs/<kind>/` exporting one {@link InputKind} and one line here (docs/inputs.md,
 * "Writing an input kind").
 */
const kinds = new Map<string, InputKind>();

/**
 * Adds an input kind: its entries are then valid in `inputs`, and the gateway runs them. For a kind
 * kept outside this repository (a site's own PLC input, a test's scripted input): call it once at
 * start, before any configuration is read, as this module does for the kinds it lists.
 *
 * @throws GatewayError `SCANGW_E_INTERNAL` when a kind of that `type` is there already, or its
 *   schema is not a `z.object` with `type: z.literal(type)`.
 */
export function registerInputKind<C extends InputConfig>(kind: InputKind<C>): void {
  addInputKindSpec(kind as unknown as InputKind);
  kinds.set(kind.type, kind as unknown as InputKind);
}

for (const kind of [filesKind, serialKind, mqttKind, tcpKind, httpKind] as InputKind[])
  registerInputKind(kind);

/**
 * An entry of one of the built-in kinds, narrowed by `type`: for code that knows it holds one (a
 * test reading config/example.yaml). The gateway's own parts ask the entry's kind instead.
 */
export type BuiltInInputConfig =
  FilesInputConfig | SerialInputConfig | MqttInputConfig | TcpInputConfig | HttpInputConfig;

/** Every kind, in the order they were added (the built-in ones first, as listed above). */
export function inputKinds(): readonly InputKind[] {
  return [...kinds.values()];
}

/** The kind of a `type`, or undefined when none is registered. */
export function findInputKind(type: string): InputKind | undefined {
  return kinds.get(type);
}

/**
 * The kind of an entry (or of a `type`).
 *
 * @throws GatewayError `SCANGW_E_INTERNAL` for a type no kind has (the schema refuses such an
 *   entry, so this is a bug).
 */
export function inputKind(of: string | Pick<InputConfig, 'type'>): InputKind {
  const type = typeof of === 'string' ? of : of.type;
  const kind = kinds.get(type);
  if (!kind) throw new GatewayError(ErrorCodes.INTERNAL, `no input kind "${type}" is registered`);
  return kind;
}
