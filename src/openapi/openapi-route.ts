import { declareRoute } from '../edge/route-declaration.ts';
import type { RouteMount } from '../lifecycle/component.ts';

export const OPENAPI_ROUTE = declareRoute({
  method: 'get',
  path: '/openapi.json',
  surface: 'operator',
  operationId: 'openapi',
  summary: 'This document',
  responses: {
    200: {
      description: 'The OpenAPI 3.1 document (also committed as docs/openapi.json).',
      schema: { type: 'object', required: ['openapi', 'info', 'paths'] },
    },
  },
});

/**
 * `GET /openapi.json`: the API document, built once on first request (an operator endpoint).
 * `document` assembles it (src/service/api-routes.ts: every route riskgate serves).
 */
export function openApiRoute(document: () => object): RouteMount {
  let text: string | undefined;
  return {
    surface: 'operator',
    routes: [OPENAPI_ROUTE],
    mount(app, edge) {
      OPENAPI_ROUTE.mount(app, edge.operatorAuth, (c) => {
        text ??= JSON.stringify(document());
        return c.body(text, 200, { 'content-type': 'application/json' });
      });
    },
  };
}
