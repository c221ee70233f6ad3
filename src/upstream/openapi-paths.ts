/**
 * The operations of `docs/upstream-openapi.yaml` (contract §4, §5). Status codes the contract does
 * not show are the sandbox's choices, listed in docs/upstream.md.
 */

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const JSON_ANSWER_TYPES = ['application/json', 'text/json', 'text/plain'] as const;

function jsonAnswer(description: string, schema: Record<string, unknown>) {
  return {
    description,
    content: Object.fromEntries(JSON_ANSWER_TYPES.map((t) => [t, { schema }])),
  };
}

function problemAnswer(description: string) {
  return {
    description,
    content: { 'application/problem+json': { schema: ref('ProblemDetails') } },
  };
}

const responseRef = (name: string) => ({ $ref: `#/components/responses/${name}` });

/** Answers shared by every authorized operation. */
export const OPENAPI_RESPONSES = {
  Unauthorized: {
    description:
      'Missing, malformed, wrongly signed or expired bearer token (§7). Carries WWW-Authenticate: Bearer.',
    content: { 'application/json': { schema: ref('ProblemDetails') } },
  },
  TooManyRequests: {
    description:
      'Rate limited; Retry-After gives the wait in seconds. Rate limits are not shown by the contract (§8).',
    headers: {
      'Retry-After': { schema: { type: 'integer', minimum: 0 }, description: 'Seconds to wait.' },
    },
    content: { 'application/problem+json': { schema: ref('ProblemDetails') } },
  },
  ServerError: problemAnswer('The service failed or is unavailable (500, 503); retry later.'),
};

const common = {
  '401': responseRef('Unauthorized'),
  '429': responseRef('TooManyRequests'),
  '5XX': responseRef('ServerError'),
};

/** Every path of contract §4 plus the token endpoint of §5 (on its own server). */
export const OPENAPI_PATHS = {
  '/api/product/v3/products': {
    get: {
      tags: ['Product'],
      operationId: 'listProducts',
      summary: 'List the products of the authorized customer with their keys (§4.1).',
      responses: {
        '200': jsonAnswer('The products.', { type: 'array', items: ref('ProductModelKeyAndName') }),
        ...common,
      },
    },
  },
  '/api/product/v3/products/create': {
    post: {
      tags: ['Product'],
      operationId: 'createProduct',
      summary: 'Create a product of a set type (§4.2). Status: work in progress.',
      description:
        'The service sets the template of the type; every property is at its default and version is 0.',
      requestBody: {
        required: true,
        content: Object.fromEntries(
          ['application/json', 'text/json', 'application/*+json'].map((t) => [
            t,
            { schema: ref('CreateProductRequest') },
          ]),
        ),
      },
      responses: {
        '200': jsonAnswer(
          'The new product with all template properties at their defaults.',
          ref('ProductModel'),
        ),
        '400': problemAnswer('A field is missing or the product type is unknown.'),
        '409': problemAnswer('The customer has a product with this key already.'),
        ...common,
      },
    },
  },
  '/api/trace/v3/scans': {
    post: {
      tags: ['Trace'],
      operationId: 'uploadScans',
      summary:
        'Upload a batch of scans for asynchronous processing (§4.3). Bodies of 5.8 MiB or more are refused.',
      requestBody: {
        required: true,
        content: { 'application/json': { schema: { type: 'array', items: ref('Scan') } } },
      },
      responses: {
        '202': {
          description: 'Accepted for processing.',
          content: { 'application/json': { schema: ref('UploadAcceptedResponse') } },
        },
        '400': problemAnswer(
          'Not a JSON array of scans, empty, or a scan is invalid; `errors` names index and field.',
        ),
        '413': problemAnswer('The body is 5.8 MiB or more; use the pre-signed upload.'),
        '415': problemAnswer(
          'The content type is not application/json (a charset parameter is allowed).',
        ),
        ...common,
      },
    },
  },
  '/api/trace/v3/scans/preSignedUrl': {
    post: {
      tags: ['Trace'],
      operationId: 'requestPresignedUrl',
      summary:
        'Obtain an address for uploading one large batch (§4.4). Valid 30 minutes, usable once.',
      responses: {
        '200': {
          description: 'The address and the batch id.',
          content: { 'application/json': { schema: ref('PreSignedUrlResponse') } },
        },
        ...common,
      },
    },
  },
  '/api/trace/v3/scans/{requestId}/status': {
    get: {
      tags: ['Trace'],
      operationId: 'getScanStatus',
      summary: 'Processing status of a batch (§4.6). Unknown ids answer 200 with state NotFound.',
      parameters: [
        {
          name: 'requestId',
          in: 'path',
          required: true,
          description: 'The id returned at upload.',
          schema: { type: 'string', pattern: '^\\d+$' },
        },
      ],
      responses: {
        '200': jsonAnswer('The status; requestId is a number here.', ref('ScanStatus')),
        '400': problemAnswer('The request id is not a number.'),
        ...common,
      },
    },
  },
  '/oauth2/token': {
    servers: [
      {
        url: '{auth_url}',
        description: 'Authorization server (per environment).',
        variables: { auth_url: { default: 'http://127.0.0.1:8090' } },
      },
    ],
    post: {
      tags: ['Auth'],
      operationId: 'requestToken',
      summary: 'OAuth 2.0 client credentials token request (§5).',
      security: [],
      requestBody: {
        required: true,
        content: { 'application/x-www-form-urlencoded': { schema: ref('TokenRequest') } },
      },
      responses: {
        '200': {
          description: 'A JWT bearer token.',
          content: { 'application/json': { schema: ref('TokenResponse') } },
        },
        '400': {
          description: 'invalid_request or unsupported_grant_type.',
          content: { 'application/json': { schema: ref('OAuthError') } },
        },
        '401': {
          description: 'invalid_client: unknown client or wrong secret.',
          content: { 'application/json': { schema: ref('OAuthError') } },
        },
        '5XX': {
          description: 'The auth server failed (the sandbox answers so under its token faults).',
          content: { 'application/json': { schema: ref('OAuthError') } },
        },
      },
    },
  },
};

/** The pre-signed PUT (§4.5): its address comes from §4.4, so it is not a path of this document. */
export const PRESIGNED_UPLOAD_EXTENSION = {
  summary: 'Upload a batch to the address from requestPresignedUrl (§4.5).',
  method: 'PUT',
  url: 'The `url` member of PreSignedUrlResponse (an absolute, pre-signed address; not below base_url).',
  security: 'None: no Authorization header is sent.',
  rules: [
    'The address is valid for 30 minutes and accepts one upload; for a further upload, obtain a new address and requestId.',
    'Processing is tracked with the requestId returned together with the address; until the upload arrives its status is NotFound.',
    'Content-Type is exactly application/json (the address is signed for it); a refused request does not use the address up.',
  ],
  requestBody: {
    required: true,
    content: { 'application/json': { schema: { type: 'array', items: ref('Scan') } } },
  },
  responses: {
    '200': { description: 'Stored.' },
    '400': {
      description:
        'An Authorization header was sent: S3-style XML error body with Code InvalidArgument (only one auth mechanism allowed).',
      content: {
        'application/xml': {
          schema: {
            type: 'string',
            example:
              '<Error><Code>InvalidArgument</Code><Message>Only one auth mechanism allowed; …</Message><ArgumentName>Authorization</ArgumentName></Error>',
          },
        },
      },
    },
    '403': {
      description:
        'Used already or expired (Code AccessDenied), or a Content-Type other than application/json (Code SignatureDoesNotMatch); S3-style XML error body.',
      content: {
        'application/xml': {
          schema: {
            type: 'string',
            example:
              '<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>',
          },
        },
      },
    },
  },
};
