import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { validate } from '@readme/openapi-parser';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { buildOpenApiDocument, renderOpenApiYaml } from '../../src/upstream/openapi.js';

const FILE = join(PACKAGE_ROOT, 'docs/upstream-openapi.yaml');

describe('docs/upstream-openapi.yaml', () => {
  it('is what src/upstream/openapi.ts generates (regenerate: node dist/src/upstream/generate-openapi.js)', () => {
    // UPDATE_OPENAPI=1 rewrites the file instead of comparing, for use after a contract change.
    if (process.env.UPDATE_OPENAPI === '1') writeFileSync(FILE, renderOpenApiYaml());
    expect(readFileSync(FILE, 'utf8')).toBe(renderOpenApiYaml());
  });

  it('is a valid OpenAPI 3.0 document', async () => {
    const result = await validate(
      parse(readFileSync(FILE, 'utf8')) as Parameters<typeof validate>[0],
    );
    expect(result.valid ? [] : result.errors).toEqual([]);
    expect(result.specification).toBe('OpenAPI');
  });

  it('has the title, version, every path of §4, every schema of §2 and the Bearer scheme', () => {
    const doc = buildOpenApiDocument() as {
      openapi: string;
      info: { title: string; version: string };
      paths: Record<string, Record<string, { security?: unknown[] }>>;
      components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> };
      security: unknown[];
      'x-presigned-upload': { method: string };
    };
    expect(doc.openapi).toMatch(/^3\.0\./);
    expect(doc.info).toMatchObject({
      title: 'Battery Product and Traceability Scan Service',
      version: 'v3',
    });
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/api/product/v3/products',
        '/api/product/v3/products/create',
        '/api/trace/v3/scans',
        '/api/trace/v3/scans/preSignedUrl',
        '/api/trace/v3/scans/{requestId}/status',
        '/oauth2/token',
      ]),
    );
    expect(doc['x-presigned-upload'].method).toBe('PUT');
    expect(Object.keys(doc.components.schemas)).toEqual(
      expect.arrayContaining([
        'ProductModelKeyAndName',
        'CreateProductRequest',
        'ProductModel',
        'TypedProperty',
        'Scan',
        'UploadAcceptedResponse',
        'PreSignedUrlResponse',
        'ScanStatus',
        'ScanFailure',
        'ProblemDetails',
      ]),
    );
    expect(doc.components.securitySchemes.Bearer).toMatchObject({
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
    });
    expect(doc.security).toEqual([{ Bearer: [] }]);
    expect(doc.paths['/oauth2/token']?.post?.security).toEqual([]);
  });
});
