import type { FastifyInstance, preHandlerAsyncHookHandler } from 'fastify';
import { batteryPackTemplate } from '@scan-gateway/contract/battery-pack-template';
import {
  PRODUCT_TYPES,
  createProductRequestSchema,
  type ProductModel,
} from '@scan-gateway/contract';
import { callerOf } from './auth.js';
import { sendProblem, sendValidationProblem } from './problem.js';
import { isParsedBody, sendJson } from './respond.js';
import type { SandboxState } from './state.js';

/**
 * Product endpoints (contract §4.1, §4.2), per authorized client.
 * - GET  /api/product/v3/products: 200 with the client's products.
 * - POST /api/product/v3/products/create: 200 ProductModel with the whole BatteryPack template at
 *   its defaults and version 0; 400 for a missing field, unreadable body or unknown `ofType`;
 *   409 when the client already has a product with that key.
 */
export function registerProductRoutes(
  app: FastifyInstance,
  state: SandboxState,
  bearer: preHandlerAsyncHookHandler,
): void {
  app.get('/api/product/v3/products', { preHandler: bearer }, async (request, reply) => {
    return sendJson(request, reply, 200, state.listProducts(callerOf(request)));
  });

  app.post('/api/product/v3/products/create', { preHandler: bearer }, async (request, reply) => {
    const body = request.body;
    if (!isParsedBody(body) || (body.json === undefined && body.error === undefined)) {
      return sendProblem(
        request,
        reply,
        400,
        'A CreateProductRequest body (application/json) is required.',
      );
    }
    if (body.error !== undefined)
      return sendProblem(request, reply, 400, `The body is not valid JSON: ${body.error}`);
    const parsed = createProductRequestSchema.safeParse(body.json);
    if (!parsed.success)
      return sendValidationProblem(request, reply, parsed.error, 'CreateProductRequest');
    const { key, name, ofType } = parsed.data;
    if (!(PRODUCT_TYPES as readonly string[]).includes(ofType)) {
      return sendProblem(
        request,
        reply,
        400,
        `Unknown product type "${ofType}"; known: ${PRODUCT_TYPES.join(', ')}.`,
        {
          errors: { ofType: [`unknown product type ${ofType}`] },
        },
      );
    }
    if (!state.addProduct(callerOf(request), key, name)) {
      return sendProblem(request, reply, 409, `A product with key "${key}" exists already.`);
    }
    const model: ProductModel = { key, properties: batteryPackTemplate(), version: 0 };
    return sendJson(request, reply, 200, model);
  });
}
