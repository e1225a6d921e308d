import { z } from 'zod';

/**
 * Checks real HTTP answers against riskgate's OpenAPI document: the path and method are documented,
 * the status is among the operation's responses, the content type is one it lists, and the body
 * validates against the JSON Schema the document gives for it.
 *
 * The schemas are read back from the document's JSON Schema with zod's `fromJSONSchema` (zod is
 * riskgate's own dependency; no JSON Schema validator is one): what is checked is what the document
 * says, not the zod schemas it was generated from, so a schema that lost a constraint or a field
 * on the way to the document shows. `#/components/schemas/` references are read as `$defs`.
 */

export interface OpenApiDocument {
  paths: Record<string, Record<string, unknown>>;
  components: { schemas: Record<string, object> };
}

interface Operation {
  responses: Record<string, { content?: Record<string, { schema: object }> }>;
}

/** One answer as received. */
export interface Answer {
  method: string;
  /** The request's path, without the query. */
  path: string;
  status: number;
  contentType: string | null;
  /** The body's text. */
  text: string;
}

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** The documented path template that `path` is an instance of (`/actions/{id}` for `/actions/x`). */
export function documentedPath(doc: OpenApiDocument, path: string): string | undefined {
  if (doc.paths[path] !== undefined) return path;
  return Object.keys(doc.paths).find((template) => {
    if (!template.includes('{')) return false;
    const pattern = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^/}]+\}/g, '[^/]+');
    return new RegExp(`^${pattern}$`).test(path);
  });
}

/** The documented operations, as `METHOD /template`. */
export function documentedOperations(doc: OpenApiDocument): string[] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m] !== undefined).map((m) => `${m.toUpperCase()} ${path}`),
  );
}

export function createAnswerValidator(doc: OpenApiDocument) {
  const defs = JSON.parse(
    JSON.stringify(doc.components.schemas).replaceAll('"#/components/schemas/', '"#/$defs/'),
  ) as Record<string, object>;
  const compiled = new Map<string, z.ZodType>();
  const zodOf = (schema: object): z.ZodType => {
    const key = JSON.stringify(schema).replaceAll('"#/components/schemas/', '"#/$defs/');
    let parsed = compiled.get(key);
    if (parsed === undefined) {
      parsed = z.fromJSONSchema({ ...JSON.parse(key), $defs: defs });
      compiled.set(key, parsed);
    }
    return parsed;
  };

  /** What is wrong with `answer` by the document; empty when it conforms. */
  return function violations(answer: Answer): string[] {
    const where = `${answer.method} ${answer.path} ${answer.status}`;
    const template = documentedPath(doc, answer.path);
    if (template === undefined) return [`${where}: the path is not documented`];
    const item = doc.paths[template]!;
    const operations = METHODS.map((m) => item[m] as Operation | undefined).filter((o) => o !== undefined);
    const own = item[answer.method.toLowerCase()] as Operation | undefined;
    // A method the path does not take is answered 405, documented on the path's operations.
    const candidates = own === undefined ? operations.filter((o) => o.responses['405']) : [own];
    if (candidates.length === 0) return [`${where}: the method is not documented for ${template}`];
    const response = candidates[0]!.responses[String(answer.status)];
    if (response === undefined) return [`${where}: the status is not documented`];
    if (response.content === undefined) {
      return answer.text === '' ? [] : [`${where}: documented without a body, answered one`];
    }
    const type = answer.contentType ?? '';
    const media =
      response.content[type] ??
      Object.entries(response.content).find(([t]) => t.split(';')[0] === type.split(';')[0])?.[1];
    if (media === undefined) {
      return [`${where}: content type ${type} is not one of ${Object.keys(response.content).join(', ')}`];
    }
    let body: unknown = answer.text;
    if (/json/.test(type)) {
      try {
        body = JSON.parse(answer.text);
      } catch {
        return [`${where}: the body is not JSON`];
      }
    }
    const result = zodOf(media.schema).safeParse(body);
    return result.success
      ? []
      : result.error.issues.map((i) => `${where}: ${i.path.join('.') || '(body)'}: ${i.message}`);
  };
}
