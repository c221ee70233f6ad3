import { stringify } from 'yaml';
import { z } from 'zod';
import {
  createProductRequestSchema,
  dateTimePropertySchema,
  linkPropertySchema,
  numericPropertySchema,
  oauthErrorSchema,
  oneOfPropertySchema,
  presignedUrlResponseSchema,
  problemDetailsSchema,
  productModelKeyAndNameSchema,
  productModelSchema,
  scanAttributeSchema,
  scanFailureSchema,
  scanSchema,
  scanStateSchema,
  scanStatusWireSchema,
  stringPropertySchema,
  tokenRequestSchema,
  tokenResponseSchema,
  typedPropertySchema,
  uomPropertySchema,
  uploadAcceptedSchema,
} from '@scan-gateway/contract';
import { OPENAPI_PATHS, OPENAPI_RESPONSES, PRESIGNED_UPLOAD_EXTENSION } from './openapi-paths.js';

/**
 * `docs/upstream-openapi.yaml`, generated from the zod contract so the document cannot drift from
 * what the client validates and the sandbox answers (a test fails when the committed file is stale).
 */

/** Components, by the name they have in the document (§2, §5, §7). */
const COMPONENTS: ReadonlyArray<readonly [string, z.ZodType]> = [
  ['ProductModelKeyAndName', productModelKeyAndNameSchema],
  ['CreateProductRequest', createProductRequestSchema],
  ['ProductModel', productModelSchema],
  ['TypedProperty', typedPropertySchema],
  ['StringProperty', stringPropertySchema],
  ['DateTimeProperty', dateTimePropertySchema],
  ['UomProperty', uomPropertySchema],
  ['NumericProperty', numericPropertySchema],
  ['OneOfProperty', oneOfPropertySchema],
  ['LinkProperty', linkPropertySchema],
  ['Scan', scanSchema],
  ['ScanAttribute', scanAttributeSchema],
  ['UploadAcceptedResponse', uploadAcceptedSchema],
  ['PreSignedUrlResponse', presignedUrlResponseSchema],
  ['ScanState', scanStateSchema],
  ['ScanStatus', scanStatusWireSchema],
  ['ScanFailure', scanFailureSchema],
  ['ProblemDetails', problemDetailsSchema],
  ['TokenRequest', tokenRequestSchema],
  ['TokenResponse', tokenResponseSchema],
  ['OAuthError', oauthErrorSchema],
];

const TYPED_PROPERTY_MAPPING: Record<string, string> = {
  string: 'StringProperty',
  dateTime: 'DateTimeProperty',
  uom: 'UomProperty',
  numeric: 'NumericProperty',
  oneOf: 'OneOfProperty',
  link: 'LinkProperty',
};

/** The component schemas as OpenAPI 3.0 Schema Objects, referring to each other by `$ref`. */
export function buildComponentSchemas(): Record<string, Record<string, unknown>> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of COMPONENTS) registry.add(schema, { id });
  const out = z.toJSONSchema(registry, {
    target: 'openapi-3.0',
    io: 'input',
    uri: (id) => `#/components/schemas/${id}`,
  });
  const schemas = clean(out.schemas) as Record<string, Record<string, unknown>>;
  const typed = schemas.TypedProperty;
  if (typed) {
    typed.discriminator = {
      propertyName: 'type',
      mapping: Object.fromEntries(
        Object.entries(TYPED_PROPERTY_MAPPING).map(([k, v]) => [k, `#/components/schemas/${v}`]),
      ),
    };
  }
  return schemas;
}

/** The whole OpenAPI 3.0 document of the service (contract §1, §4, §5, §9). */
export function buildOpenApiDocument(): Record<string, unknown> {
  return {
    openapi: '3.0.3',
    info: {
      title: 'Battery Product and Traceability Scan Service',
      version: 'v3',
      description:
        'Products of the authorized customer and traceability scans: batch upload, large batches through a ' +
        'pre-signed address, processing status. Generated from packages/contract/src/contract.ts; choices where the ' +
        'contract shows nothing are listed in docs/upstream.md. The pre-signed PUT has no fixed path and ' +
        'is described under x-presigned-upload.',
    },
    servers: [
      {
        url: '{base_url}',
        description: 'Service base address (per environment).',
        variables: {
          base_url: {
            default: 'http://127.0.0.1:8090',
            description: 'The local sandbox by default.',
          },
        },
      },
    ],
    security: [{ Bearer: [] }],
    tags: [
      { name: 'Product', description: 'Product definitions (§4.1, §4.2).' },
      { name: 'Trace', description: 'Traceability scans (§4.3–§4.6).' },
      { name: 'Auth', description: 'OAuth 2.0 client credentials (§5).' },
    ],
    paths: OPENAPI_PATHS,
    components: {
      schemas: buildComponentSchemas(),
      responses: OPENAPI_RESPONSES,
      securitySchemes: {
        Bearer: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description:
            'Access token from POST {auth_url}/oauth2/token (client credentials), valid one hour.',
        },
      },
    },
    'x-presigned-upload': PRESIGNED_UPLOAD_EXTENSION,
  };
}

/** The document as committed in docs/upstream-openapi.yaml. */
export function renderOpenApiYaml(): string {
  return (
    '# Generated from packages/contract/src/contract.ts by src/upstream/openapi.ts. Do not edit by hand:\n' +
    '# run `npm run build && node dist/src/upstream/generate-openapi.js`.\n' +
    stringify(buildOpenApiDocument(), { lineWidth: 0, aliasDuplicateObjects: false })
  );
}

// zod writes `$id` (not an OpenAPI 3.0 keyword) and the safe-integer bounds of z.int() (noise).
function clean(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(clean);
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (key === '$id' || key === '$schema') continue;
    if (
      (key === 'minimum' && v === Number.MIN_SAFE_INTEGER) ||
      (key === 'maximum' && v === Number.MAX_SAFE_INTEGER)
    )
      continue;
    out[key] = clean(v);
  }
  return out;
}
