import type { RouteMount } from '../lifecycle/component.ts';
import { buildOpenApiDocument } from './openapi-document.ts';

/** `GET /openapi.json`: the API document, built once on first request (an operator endpoint). */
export function openApiRoute(version: string): RouteMount {
  let document: string | undefined;
  return {
    surface: 'operator',
    mount(app, edge) {
      app.get('/openapi.json', edge.operatorAuth, (c) => {
        document ??= JSON.stringify(buildOpenApiDocument(version));
        return c.body(document, 200, { 'content-type': 'application/json' });
      });
    },
  };
}
