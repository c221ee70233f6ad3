import { z } from 'zod';

/**
 * The wire shapes of the Battery Product and Traceability Scan Service, as zod schemas: the single
 * source of the TypeScript types, of the client's response validation, of the sandbox's request
 * validation and of `docs/upstream-openapi.yaml`. Section numbers refer to
 * `docs/upstream-contract.md`. Objects strip unknown members (a real service may add fields), so every
 * schema describes what we read, not a closed set.
 */

/** 5.8 MiB = 6,081,740.8 bytes; a direct upload of 5.8 MiB or more is refused (§4.3, §4.7, §8). */
export const MAX_DIRECT_BODY_BYTES = 6_081_740;

/** Validity of a pre-signed upload address, in ms (§4.4, §8). */
export const PRESIGNED_VALIDITY_MS = 30 * 60 * 1000;

/** Validity of an access token, in seconds (§5, §8). */
export const TOKEN_VALIDITY_S = 3600;

/** Wire format of every time stamp: `yyyy-MM-ddTHH:mm:ss`, no zone, no fraction (§2.4, §2.5). */
export const WIRE_TIMESTAMP_PATTERN =
  /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d$/;

const wireTimestamp = z
  .string()
  .regex(WIRE_TIMESTAMP_PATTERN, 'must be yyyy-MM-ddTHH:mm:ss without zone')
  .describe('Local time stamp in the form yyyy-MM-ddTHH:mm:ss, no zone.');

// ---- Products (§2.1–§2.4) ---------------------------------------------------------------------

/** A list item of GET /api/product/v3/products (§2.1). */
export const productModelKeyAndNameSchema = z
  .object({
    key: z.string().describe('Product key.'),
    name: z.string().describe('Product name.'),
  })
  .describe('A product of the authorized customer (list item).');
export type ProductModelKeyAndName = z.infer<typeof productModelKeyAndNameSchema>;

/** Product types the service is known to accept (§2.2 shows only `BatteryPack`). */
export const PRODUCT_TYPES = ['BatteryPack'] as const;

/** Body of POST /api/product/v3/products/create (§2.2). */
export const createProductRequestSchema = z
  .object({
    key: z.string().min(1).describe('Key of the new product.'),
    name: z.string().min(1).describe('Name of the new product.'),
    ofType: z.string().min(1).describe('Product type; the only type shown is BatteryPack.'),
  })
  .describe('Request to create a product of a set type.');
export type CreateProductRequest = z.infer<typeof createProductRequestSchema>;

const propertyName = z.string().describe('Human-readable label of the property.');

/** §2.4 `type: string`. */
export const stringPropertySchema = z
  .object({ type: z.literal('string'), name: propertyName, value: z.string() })
  .describe('A text property.');
/** §2.4 `type: dateTime`. */
export const dateTimePropertySchema = z
  .object({ type: z.literal('dateTime'), name: propertyName, dateTime: wireTimestamp })
  .describe('A time stamp property.');
/** §2.4 `type: uom`: a number with its unit. */
export const uomPropertySchema = z
  .object({
    type: z.literal('uom'),
    name: propertyName,
    value: z.number(),
    uom: z.string().describe('The unit.'),
  })
  .describe('A measured quantity with its unit.');
/** §2.4 `type: numeric`. */
export const numericPropertySchema = z
  .object({ type: z.literal('numeric'), name: propertyName, value: z.number() })
  .describe('A number without unit.');
/** §2.4 `type: oneOf`: a value from a list. */
export const oneOfPropertySchema = z
  .object({
    type: z.literal('oneOf'),
    name: propertyName,
    value: z.string(),
    oneOf: z.array(z.string()).describe('Allowed values.'),
  })
  .describe('A choice from a list of allowed values; an empty value means not yet chosen.');
/** §2.4 `type: link`. */
export const linkPropertySchema = z
  .object({ type: z.literal('link'), name: propertyName, url: z.string() })
  .describe('A link to a document; `?` until set.');

/** A typed product property (§2.4), discriminated by `type`. */
export const typedPropertySchema = z
  .discriminatedUnion('type', [
    stringPropertySchema,
    dateTimePropertySchema,
    uomPropertySchema,
    numericPropertySchema,
    oneOfPropertySchema,
    linkPropertySchema,
  ])
  .describe('A typed product property; the members besides type and name depend on type.');
export type TypedProperty = z.infer<typeof typedPropertySchema>;
export type PropertyType = TypedProperty['type'];

/** The product returned by create (§2.3). */
export const productModelSchema = z
  .object({
    key: z.string().describe('Product key.'),
    properties: z
      .record(z.string(), typedPropertySchema)
      .describe('Map from property identifier to typed property.'),
    version: z.int().describe('0 on a newly created product.'),
  })
  .describe('A product with its typed properties.');
export type ProductModel = z.infer<typeof productModelSchema>;

// ---- Scans (§2.5–§2.7) ------------------------------------------------------------------------

/** One attribute of a scan; numbers are sent as text (§2.5). */
export const scanAttributeSchema = z
  .object({ key: z.string(), value: z.string() })
  .describe('An attribute of a scan; numbers are sent as text.');
export type ScanAttribute = z.infer<typeof scanAttributeSchema>;

/**
 * One scan of an upload (§2.5). Required members and limits are not shown by the contract; this
 * schema requires everything except `supplierKey` (Goods In only) and `clientKey` (Goods Out
 * only), see docs/upstream.md.
 */
export const scanSchema = z
  .object({
    reference: z.string().min(1).describe('Identifier of the scanned item.'),
    timeStamp: wireTimestamp,
    dcpKey: z.string().min(1).describe('Key of the data collection point.'),
    productModelKey: z.string().min(1).describe('Key of the product the item belongs to.'),
    supplierKey: z.string().min(1).optional().describe('Present on Goods In scans.'),
    clientKey: z.string().min(1).optional().describe('Present on Goods Out scans.'),
    parents: z.array(z.string()).describe('References of parent items; may be empty.'),
    attributes: z.array(scanAttributeSchema).describe('Attributes of the scan; may be empty.'),
  })
  .describe('One item passing a data collection point.');
export type Scan = z.infer<typeof scanSchema>;

/** An upload body: a JSON array of scans (§2.5, §4.3, §4.5). */
export const scanBatchSchema = z.array(scanSchema).describe('A batch of scans.');

/** Answer of a direct upload (§2.6). */
export const uploadAcceptedSchema = z
  .object({ requestId: z.string().min(1).describe('Identifier of the batch.') })
  .describe('The batch was accepted for asynchronous processing.');
export type UploadAccepted = z.infer<typeof uploadAcceptedSchema>;

/** Answer of POST /api/trace/v3/scans/preSignedUrl (§2.7). */
export const presignedUrlResponseSchema = z
  .object({
    url: z
      .string()
      .min(1)
      .describe('The pre-signed upload address; valid 30 minutes, usable once.'),
    requestId: z.string().min(1).describe('Identifier of the batch uploaded to url.'),
  })
  .describe('An address for uploading one large batch.');
export type PresignedUrlResponse = z.infer<typeof presignedUrlResponseSchema>;

// ---- Status (§2.8, §3) ------------------------------------------------------------------------

/** Every batch state (§3). */
export const SCAN_STATES = [
  'Received',
  'InProgress',
  'Success',
  'Failed',
  'HasFailures',
  'NotFound',
] as const;
export const scanStateSchema = z.enum(SCAN_STATES).describe('State of a scan batch.');
export type ScanState = z.infer<typeof scanStateSchema>;

/** States after which a batch does not change any more (§3). */
export const TERMINAL_STATES: readonly ScanState[] = ['Success', 'Failed', 'HasFailures'];

/** Whether a batch in `state` is finished (Success, Failed, HasFailures). NotFound is not terminal. */
export function isTerminalState(state: ScanState): boolean {
  return TERMINAL_STATES.includes(state);
}

/** One failed scan of a batch (§2.8). */
export const scanFailureSchema = z
  .object({ reference: z.string(), reason: z.string() })
  .describe('A scan that failed, with the reason.');
export type ScanFailure = z.infer<typeof scanFailureSchema>;

/**
 * The status object exactly as the service sends it (§2.8, also the status event payload §6):
 * `requestId` is a number here, unlike in §2.6/§2.7. Use {@link normalizeScanStatus} to get the
 * gateway's shape.
 */
export const scanStatusWireSchema = z
  .object({
    state: scanStateSchema,
    requestId: z.int().min(0).describe('The batch id, as a number.'),
    description: z.string().describe('Free text.'),
    processed: z.int().min(0).describe('Count of scans processed.'),
    failed: z.int().min(0).optional().describe('Count of failed scans; present on failure.'),
    failures: z
      .array(scanFailureSchema)
      .optional()
      .describe('One element per failed scan; present on failure.'),
  })
  .describe('Processing status of a batch.');
export type ScanStatusWire = z.infer<typeof scanStatusWireSchema>;

/** The gateway's status shape: as §2.8, with `requestId` a string like everywhere else. */
export interface ScanStatus {
  state: ScanState;
  requestId: string;
  description: string;
  processed: number;
  failed?: number;
  failures?: ScanFailure[];
}

/**
 * The one place where the numeric `requestId` of §2.8 becomes the string of §2.6/§2.7, so ids
 * compare equal whichever endpoint (or status event) they came from.
 */
export function normalizeScanStatus(wire: ScanStatusWire): ScanStatus {
  const status: ScanStatus = {
    state: wire.state,
    requestId: String(wire.requestId),
    description: wire.description,
    processed: wire.processed,
  };
  if (wire.failed !== undefined) status.failed = wire.failed;
  if (wire.failures !== undefined)
    status.failures = wire.failures.map((f) => ({ reference: f.reference, reason: f.reason }));
  return status;
}

// ---- Tolerant readers ---------------------------------------------------------------------------

/**
 * A requestId as any endpoint may send it: the contract shows a string in §2.6/§2.7 and a number in
 * §2.8, and nothing stops a service from using either form anywhere. Read both, keep a string.
 */
const requestIdReadSchema = z
  .union([z.string().min(1), z.int().min(0)])
  .transform((id) => String(id));
// (A number of 16 digits or more arrives here as the string of its digits: the client reads it so
// before JSON.parse would round it; see client.ts safeJson.)

/**
 * What the client accepts (Postel): the documented shapes above are what the sandbox sends and the
 * OpenAPI document describes; the client additionally accepts either form of `requestId`, and a
 * status without `description` or `processed` (a NotFound answer may well carry neither).
 */
export const uploadAcceptedReadSchema = z.looseObject({ requestId: requestIdReadSchema });
export const presignedUrlReadSchema = z.looseObject({
  url: z.string().min(1),
  requestId: requestIdReadSchema,
});
export const scanStatusReadSchema = z.looseObject({
  state: scanStateSchema,
  // The gateway knows which id it asked for; an id it cannot read must not stop the batch's status.
  requestId: requestIdReadSchema.optional().catch(undefined),
  description: z.string().optional(),
  processed: z.int().min(0).optional(),
  failed: z.int().min(0).optional(),
  failures: z.array(scanFailureSchema).optional(),
});

/** Reads a status answer (or status event) into the gateway's shape; `requestId` defaults to the one asked for. */
export function readScanStatus(
  wire: z.infer<typeof scanStatusReadSchema>,
  askedFor: string,
): ScanStatus {
  const status: ScanStatus = {
    state: wire.state,
    requestId: wire.requestId ?? askedFor,
    description: wire.description ?? '',
    processed: wire.processed ?? 0,
  };
  if (wire.failed !== undefined) status.failed = wire.failed;
  if (wire.failures !== undefined)
    status.failures = wire.failures.map((f) => ({ reference: f.reference, reason: f.reason }));
  return status;
}

// ---- Errors (§7) and authentication (§5) ------------------------------------------------------

/**
 * RFC 9457 problem details. The contract does not show the fields (§7); these are the RFC's
 * members, and extension members are kept.
 */
export const problemDetailsSchema = z
  .looseObject({
    type: z.string().optional().describe('URI reference identifying the problem type.'),
    title: z.string().optional().describe('Short summary of the problem type.'),
    status: z.int().optional().describe('The HTTP status code.'),
    detail: z.string().optional().describe('Explanation specific to this occurrence.'),
    instance: z.string().optional().describe('URI reference identifying this occurrence.'),
  })
  .describe('RFC 9457 problem details; extension members allowed.');
export type ProblemDetails = z.infer<typeof problemDetailsSchema>;

/** Form of POST {auth_url}/oauth2/token (§5). */
export const tokenRequestSchema = z
  .object({
    client_id: z.string().min(1),
    client_secret: z.string().min(1),
    grant_type: z.literal('client_credentials'),
  })
  .describe('OAuth 2.0 client credentials grant, form-encoded.');

/**
 * Token answer. The contract does not name the fields (§5); these are RFC 6749 §5.1's. Only
 * `access_token` is required; without `expires_in` the token's `exp` claim, else one hour, applies.
 */
export const tokenResponseSchema = z
  .object({
    access_token: z.string().min(1).describe('The JWT bearer token.'),
    token_type: z.string().optional().describe('Bearer.'),
    expires_in: z
      .union([z.number(), z.string().regex(/^\d+$/)])
      .optional()
      .describe('Lifetime in seconds.'),
  })
  .describe('OAuth 2.0 access token response (RFC 6749 §5.1).');
export type TokenResponse = z.infer<typeof tokenResponseSchema>;

/** OAuth 2.0 error answer of the token endpoint (RFC 6749 §5.2). */
export const oauthErrorSchema = z
  .object({
    error: z.string().describe('invalid_request, invalid_client, unsupported_grant_type, …'),
    error_description: z.string().optional(),
  })
  .describe('OAuth 2.0 error response (RFC 6749 §5.2).');

/** Render zod issues as `path: message; …` so an error names the offending field. */
export function describeIssues(error: z.ZodError, root = ''): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => `${formatPath(root, issue.path)}: ${issue.message}`)
    .join('; ');
}

/** `[3].attributes[0].key` style path, the form the sandbox and CLI use in messages. */
export function formatPath(root: string, path: readonly PropertyKey[]): string {
  let out = root;
  for (const part of path)
    out += typeof part === 'number' ? `[${part}]` : out === '' ? String(part) : `.${String(part)}`;
  return out === '' ? '(root)' : out;
}
