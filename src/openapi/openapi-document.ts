import { z } from 'zod';
import { decideRequestSchema, MAX_DECIDE_BODY_BYTES } from '../decide/decide-request.ts';
import { decideResponseSchema } from '../decide/decide-response.ts';
import {
  feedbackRequestSchema,
  feedbackResponseSchema,
  MAX_FEEDBACK_BODY_BYTES,
} from '../feedback/feedback-request.ts';

/**
 * The OpenAPI 3.1 description of `POST /decide`, generated from the same zod schemas that
 * validate requests and describe answers, so the document cannot drift from the code.
 */

const problemSchema = z.object({
  type: z.string(),
  title: z.string(),
  status: z.number().int(),
  detail: z.string(),
  code: z.string().describe('Stable RG_ERR_* code.'),
  field: z.string().optional().describe('The first bad field, as a dotted path.'),
  errors: z.array(z.object({ field: z.string(), message: z.string() })).optional(),
});

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
  });
  return rest;
}

function problem(description: string) {
  return {
    description,
    content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
  };
}

/** Builds the document; `version` is riskgate's package version. */
export function buildOpenApiDocument(version: string): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: {
      title: 'riskgate',
      version,
      description: 'Real-time login risk decisions: allow, challenge or deny, with reasons.',
    },
    components: {
      securitySchemes: {
        callerKey: { type: 'http', scheme: 'bearer', description: 'A key of RISKGATE_API_KEYS.' },
      },
      schemas: {
        DecideRequest: jsonSchema(decideRequestSchema, 'input'),
        DecideResponse: jsonSchema(decideResponseSchema, 'output'),
        Problem: jsonSchema(problemSchema, 'output'),
        FeedbackRequest: jsonSchema(feedbackRequestSchema, 'input'),
        FeedbackResponse: jsonSchema(feedbackResponseSchema, 'output'),
      },
    },
    security: [{ callerKey: [] }],
    paths: {
      '/decide': {
        post: {
          operationId: 'decide',
          summary: 'Decide on one login attempt',
          requestBody: {
            required: true,
            description: `JSON, at most ${MAX_DECIDE_BODY_BYTES} bytes.`,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/DecideRequest' } } },
          },
          responses: {
            '200': {
              description: 'The decision. Upstream failures never fail it: they mark it `degraded`.',
              headers: {
                'Server-Timing': {
                  description: 'total, each upstream call, and policy evaluation, in milliseconds.',
                  schema: { type: 'string' },
                },
              },
              content: { 'application/json': { schema: { $ref: '#/components/schemas/DecideResponse' } } },
            },
            '400': problem('Invalid JSON or a field breaking its rule; `field` names it.'),
            '401': problem('Missing or unknown caller key.'),
            '413': problem('Body over the size limit.'),
            '415': problem('Content type other than application/json.'),
          },
        },
      },
      '/feedback': {
        post: {
          operationId: 'feedback',
          summary: 'Label a decision fraud or legit (for replay --labels)',
          requestBody: {
            required: true,
            description: `JSON, at most ${MAX_FEEDBACK_BODY_BYTES} bytes.`,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/FeedbackRequest' } } },
          },
          responses: {
            '202': {
              description:
                'Recorded in the decision log as a `feedback` line, with the id of the key that sent it.',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/FeedbackResponse' } } },
            },
            '400': problem(
              'Invalid JSON, a decisionId that is not a UUID, or a label other than fraud or legit.',
            ),
            '401': problem(
              'Missing or unknown key (the caller key that asked for the decision, or an operator key).',
            ),
            '404': problem(
              'No decision with this id made with this caller key that this riskgate remembers (an operator key labels any).',
            ),
            '429': problem('This key sends feedback past its rate; `Retry-After` says when to try again.'),
            '503': problem(
              'RISKGATE_DECISION_LOG is off (or failing with RISKGATE_DECISION_LOG_ON_FAILURE=refuse).',
            ),
          },
        },
      },
    },
  };
}
