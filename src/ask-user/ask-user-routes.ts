import type { Context, MiddlewareHandler } from 'hono';
import { z } from 'zod';
import { declareRoute } from '../edge/route-declaration.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import type { FeedbackRateLimit } from '../feedback/feedback-rate-limit.ts';
import type { RouteMount } from '../lifecycle/component.ts';
import type { Clock } from '../timing/clock.ts';
import type { AskUserAnswers } from './ask-user-answers.ts';
import { ASK_USER_PATH } from './ask-user-links.ts';
import {
  answeredPage,
  PAGE_HEADERS,
  questionPage,
  type RefusedReason,
  refusedPage,
} from './ask-user-page.ts';
import { MAX_TOKEN_CHARS } from './ask-user-token.ts';

/**
 * `GET` and `POST /ask-user/{token}` on the caller surface, without a key: the token is the
 * credential (docs/ask-user.md). GET shows the question and changes nothing (mail scanners
 * prefetch links); POST answers it. Every answer is an HTML page, a refusal too (a person reads
 * it); a token bucket per process bounds the unauthenticated traffic (429 with Retry-After).
 */

/** Largest answer form read, bytes (`answer=yes`). */
export const MAX_ANSWER_BODY_BYTES = 256;

const HTML_PAGE = { type: 'string', description: 'An HTML page (no script; strict CSP).' };

const params = z.object({
  token: z
    .string()
    .max(MAX_TOKEN_CHARS)
    .describe('The opaque token of the link (`<id>.<mac>`, base64url): names nothing, single use.'),
});

const refusals = (what: string) => ({
  404: {
    description: `Not a valid link (changed, truncated, unknown): ${what}`,
    contentType: 'text/html',
    schema: HTML_PAGE,
  },
  409: { description: `Already answered: ${what}`, contentType: 'text/html', schema: HTML_PAGE },
  410: { description: `Expired: ${what}`, contentType: 'text/html', schema: HTML_PAGE },
  429: {
    description: `Too many requests to this page in this process (RISKGATE_ASK_USER_RATE): ${what}`,
    contentType: 'text/html',
    schema: HTML_PAGE,
    headers: { 'retry-after': { schema: { type: 'integer' }, description: 'Seconds.' } },
  },
  503: {
    description: `The control database did not answer (or the decision log is off): ${what}`,
    contentType: 'text/html',
    schema: HTML_PAGE,
  },
});

export const ASK_USER_GET_ROUTE = declareRoute({
  method: 'get',
  path: `${ASK_USER_PATH}/{token}`,
  surface: 'caller',
  security: [],
  operationId: 'askUserQuestion',
  summary: '"Was this you?": the question (changes nothing)',
  description:
    'The page a "was this you?" link opens: a yes/no form. Never consumes the token (mail scanners prefetch links). No key: the token is the credential.',
  params,
  responses: {
    200: { description: 'The question, with its form.', contentType: 'text/html', schema: HTML_PAGE },
    ...refusals('a page saying so.'),
  },
});

export const ASK_USER_ANSWER_ROUTE = declareRoute({
  method: 'post',
  path: `${ASK_USER_PATH}/{token}`,
  surface: 'caller',
  security: [],
  operationId: 'askUserAnswer',
  summary: '"Was this you?": the answer',
  description:
    'The form of the question posted back: recorded once (a label of the decision: `no` fraud, `yes` legit); a `no` queues the lock-outs the policy named (`askUser.onNo`). Never an unlock.',
  params,
  body: {
    jsonSchema: { type: 'object' },
    alsoAccepts: {
      'application/x-www-form-urlencoded': {
        type: 'object',
        required: ['answer'],
        properties: { answer: { type: 'string', enum: ['yes', 'no'] } },
      },
    },
    maxBytes: MAX_ANSWER_BODY_BYTES,
    description: `The form (\`answer=yes\` or \`answer=no\`), at most ${MAX_ANSWER_BODY_BYTES} bytes.`,
  },
  responses: {
    200: { description: 'Answered: what it did.', contentType: 'text/html', schema: HTML_PAGE },
    400: {
      description: 'The answer is neither yes nor no: a page saying so, nothing changed.',
      contentType: 'text/html',
      schema: HTML_PAGE,
    },
    ...refusals('a page saying so, nothing changed.'),
  },
  problems: {
    [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_ANSWER_BODY_BYTES} bytes (refused before it is read; nothing changed).`,
  },
});

const answerSchema = z.enum(['yes', 'no']);

export function askUserRoutes(o: {
  answers: AskUserAnswers;
  rateLimit: FeedbackRateLimit;
  clock: Clock;
}): RouteMount {
  const show = (c: Context, status: number, body: string, extra: Record<string, string> = {}) =>
    c.body(body, status as 200, { ...PAGE_HEADERS, ...extra });
  const refuse = (c: Context, reason: RefusedReason) => {
    const r = refusedPage(reason);
    return show(c, r.status, r.body);
  };
  // One bucket for the whole page: bounded memory whatever the addresses, and a flood of guesses
  // costs at most the rate in HMACs (a guess never reaches the database without a valid mac).
  const limited: MiddlewareHandler = async (c, next) => {
    const waitMs = o.rateLimit.take(ASK_USER_PATH, o.clock.monotonicMs());
    if (waitMs === undefined) return next();
    const r = refusedPage('busy');
    return show(c, r.status, r.body, { 'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))) });
  };
  const tokenOf = (c: Context) => c.req.param('token') ?? '';
  return {
    surface: 'caller',
    routes: [ASK_USER_GET_ROUTE, ASK_USER_ANSWER_ROUTE],
    mount(app) {
      ASK_USER_GET_ROUTE.mount(app, limited, async (c) => {
        const peeked = await o.answers.peek(tokenOf(c));
        return peeked.ok ? show(c, 200, questionPage(peeked.link.createdMs)) : refuse(c, peeked.reason);
      });
      ASK_USER_ANSWER_ROUTE.mount(app, limited, async (c) => {
        const answer = answerSchema.safeParse(await formAnswer(c));
        if (!answer.success) return refuse(c, 'bad_answer');
        const answered = await o.answers.answer(tokenOf(c), answer.data);
        return answered.ok
          ? show(c, 200, answeredPage(answered.answer, answered.actionQueued))
          : refuse(c, answered.reason);
      });
    },
  };
}

/** The `answer` of a posted form (urlencoded or multipart), or of a JSON body; undefined when unreadable. */
async function formAnswer(c: Context): Promise<unknown> {
  try {
    const type = c.req.header('content-type') ?? '';
    if (type.startsWith('application/json')) return ((await c.req.json()) as { answer?: unknown })?.answer;
    return (await c.req.parseBody()).answer;
  } catch {
    return undefined;
  }
}
