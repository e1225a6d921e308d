import type { Hono } from 'hono';
import { z } from 'zod';
import type { StoredDecision } from '../decision-store/decision-query.ts';
import { RULE_REPORT_MAX_AGE_MS } from '../decision-store/rule-report-query.ts';
import { ruleReportQuerySchema } from '../decision-store/rule-report-routes.ts';
import type { Component } from '../lifecycle/component.ts';
import { roleAllows } from '../operators/operator.ts';
import { changeAction } from '../outbox/actions-routes.ts';
import { type OutboxEntryView, outboxEntryView } from '../outbox/outbox-view.ts';
import { toProblem } from '../problem/problem-details.ts';
import { storableLine } from '../text/storable-text.ts';
import type { ConsoleDeps } from './console-deps.ts';
import { Notice } from './console-layout.tsx';
import { summarizeMetrics } from './console-metrics.ts';
import {
  type ConsoleContext,
  type ConsoleEnv,
  type ConsoleKit,
  consoleRoutesWith,
  labelFormSchema,
} from './console-routes.tsx';
import { DecisionView } from './decision-page.tsx';
import { EXPORT_FORMATS, EXPORT_MAX_ROWS, type ExportFormat, exportStream } from './decisions-export.ts';
import { chartFrame, DecisionsView, decisionFilterOf, decisionsQuerySchema } from './decisions-page.tsx';
import { mountLists } from './lists-page.tsx';
import { mountLockouts } from './lockouts-page.tsx';
import { ACTION_TABS, ActionsView, AuditView, HealthView } from './other-pages.tsx';
import { mountPolicies } from './policies-page.tsx';
import { RulesView } from './rules-page.tsx';
import { mountSnoozes } from './snoozes-page.tsx';

/** The signed-in pages of the console and the changes they make (src/console/console-routes.tsx guards them). */

const MAX_FORM_BYTES = 16 * 1024;

function missing(
  kit: ConsoleKit,
  c: ConsoleContext,
  title: string,
  current: 'decisions' | 'rules' | 'audit',
  what: string,
) {
  return kit.page(c, {
    title,
    current,
    body: (
      <>
        <h1>{title}</h1>
        <Notice>{what}</Notice>
      </>
    ),
  });
}

const NO_STORE =
  'The decision store is not running in this riskgate, so there are no decisions to show. The decision log (RISKGATE_DECISION_LOG) keeps every decision meanwhile.';

/** The outbox entries of a decision: the ones the store knows of, and the lock-out's by its id. */
async function outboxOf(kit: ConsoleKit, d: StoredDecision): Promise<OutboxEntryView[]> {
  const ids = new Set(d.actions.map((a) => a.actionId));
  for (const a of d.line.actions) {
    if (d.userId !== undefined) ids.add(`${d.decisionId}:${a.type}:${d.userId}`);
  }
  const found = await Promise.all([...ids].map((id) => kit.deps.outbox.store.get(id).catch(() => undefined)));
  return found.filter((e) => e !== undefined).map(outboxEntryView);
}

function mountDecisions(ui: Hono<ConsoleEnv>, kit: ConsoleKit): void {
  const { deps } = kit;
  ui.get('/decisions', async (c) => {
    const q = decisionsQuerySchema.safeParse(c.req.query());
    if (!q.success) throw kit.edge.inputError(q.error, 'The filters');
    if (deps.decisions === undefined) return missing(kit, c, 'Decisions', 'decisions', NO_STORE);
    const nowMs = Date.now();
    const filter = decisionFilterOf(q.data, nowMs);
    const { cursor: _c, limit: _l, ...range } = filter;
    const toMs = Math.min(range.toMs ?? nowMs, nowMs);
    const frame = chartFrame(range.fromMs, toMs);
    const [page, counts, slices] = await Promise.all([
      deps.decisions.list(filter),
      deps.decisions.countByVerdict(range),
      deps.decisions.countOverTime({ ...range, fromMs: frame.fromMs, toMs }, frame.bucketMs),
    ]);
    return kit.page(c, {
      title: 'Decisions',
      current: 'decisions',
      body: (
        <DecisionsView
          q={q.data}
          page={page}
          counts={counts}
          chart={{ slices, fromMs: frame.fromMs, toMs, bucketMs: frame.bucketMs }}
          ruleIds={deps.ruleIds?.()}
        />
      ),
    });
  });
  for (const format of Object.keys(EXPORT_FORMATS) as ExportFormat[]) {
    ui.get(`/decisions.${format}`, async (c) => {
      const q = decisionsQuerySchema.safeParse(c.req.query());
      if (!q.success) throw kit.edge.inputError(q.error, 'The filters');
      if (deps.decisions === undefined) return missing(kit, c, 'Decisions', 'decisions', NO_STORE);
      const nowMs = Date.now();
      const { cursor: _c, limit: _l, ...filter } = decisionFilterOf(q.data, nowMs);
      // Ends now: the rows counted are the rows streamed, whatever arrives meanwhile.
      const range = { ...filter, toMs: Math.min(filter.toMs ?? nowMs, nowMs) };
      const { total } = await deps.decisions.countByVerdict(range);
      if (total > EXPORT_MAX_ROWS)
        return kit.fail(
          c,
          400,
          'Too many decisions to export',
          `This filter matches ${total} decisions; an export holds at most ${EXPORT_MAX_ROWS}. Narrow the time range or add a filter.`,
        );
      const stamp = new Date(nowMs).toISOString().replace(/[:.]/g, '-');
      return new Response(exportStream(deps.decisions, range, format), {
        headers: {
          'content-type': EXPORT_FORMATS[format],
          'content-disposition': `attachment; filename="riskgate-decisions-${stamp}.${format}"`,
          'x-riskgate-rows': String(total),
          'cache-control': 'no-store',
        },
      });
    });
  }
  ui.get('/decisions.json', async (c) => {
    const q = decisionsQuerySchema.safeParse(c.req.query());
    if (!q.success) return c.json({ error: 'Invalid filters.' }, 400);
    const page = (await deps.decisions?.list(decisionFilterOf(q.data, Date.now()))) ?? { decisions: [] };
    return c.json({ decisions: page.decisions });
  });
  /** One decision's page, with a notice (`Labelled fraud.`) or a form's error (a 400). */
  const decisionPage = async (c: ConsoleContext, o: { notice?: string; error?: string } = {}) => {
    if (deps.decisions === undefined) return missing(kit, c, 'Decision', 'decisions', NO_STORE);
    const id = z.uuid().safeParse(c.req.param('id'));
    const d = id.success ? await deps.decisions.get(id.data) : undefined;
    if (d === undefined)
      return kit.fail(c, 404, 'No such decision', 'The decision store has no decision with this id.');
    const s = c.get('session');
    return kit.page(c, {
      title: `Decision ${d.decisionId.slice(0, 8)}`,
      current: 'decisions',
      status: o.error === undefined ? 200 : 400,
      body: (
        <DecisionView
          d={d}
          inputs={deps.inputs?.()}
          outbox={await outboxOf(kit, d)}
          csrf={s.csrf}
          canLabel={roleAllows(s.operator.role, 'analyst')}
          canSnooze={deps.snoozes !== undefined && roleAllows(s.operator.role, 'analyst')}
          notice={o.notice}
          error={o.error}
        />
      ),
    });
  };
  ui.get('/decisions/:id', async (c) => {
    const labelled = c.req.query('labelled');
    return decisionPage(c, {
      ...((labelled === 'fraud' || labelled === 'legit') && { notice: `Labelled ${labelled}.` }),
    });
  });
  ui.post(
    '/decisions/:id/label',
    kit.edge.limitBody(MAX_FORM_BYTES),
    kit.role('analyst', 'Labelling a decision'),
    kit.form,
    async (c) => {
      const id = z.uuid().safeParse(c.req.param('id'));
      if (!id.success) return kit.fail(c, 404, 'No such decision', 'A decision id is a UUID.');
      const form = labelFormSchema.safeParse(c.get('form'));
      // The form's error on the decision's page, as the API's 400 says it.
      if (!form.success)
        return decisionPage(c, {
          error: toProblem(kit.edge.inputError(form.error, 'The label form')).detail,
        });
      const { label, note } = form.data;
      // Audited before it is made (RG_ERR_AUDIT_UNAVAILABLE, the 503 page, when it cannot be).
      await kit.edge.recordChange(c, {
        action: 'decision.label',
        target: id.data,
        detail: { label, ...(note !== undefined && { note }) },
      });
      await deps.labelDecision({ decisionId: id.data, label, note, operator: c.get('session').operator });
      // The page it leads to shows the label, and the Rules page counts it: never "not labelled yet".
      await deps.settleOwnWrite?.();
      return c.redirect(`/console/decisions/${id.data}?labelled=${label}`, 303);
    },
  );
}

const actionsQuery = z.object({
  status: z.enum(ACTION_TABS).optional(),
  done: z.enum(['retry', 'drop']).optional(),
});
const actionForm = z.object({ id: storableLine().min(1).max(600) });

function mountActions(ui: Hono<ConsoleEnv>, kit: ConsoleKit): void {
  const { deps } = kit;
  ui.get('/actions', async (c) => {
    const q = actionsQuery.safeParse(c.req.query());
    if (!q.success) throw kit.edge.inputError(q.error, 'The query');
    const { store } = deps.outbox;
    const [entries, stats] = await Promise.all([
      store.list({ status: q.data.status, limit: 200 }),
      store.stats(Date.now()),
    ]);
    const s = c.get('session');
    const done = {
      retry: 'Retried: the action goes out again now.',
      drop: 'Dropped: the action will not be delivered.',
    };
    return kit.page(c, {
      title: 'Actions',
      current: 'actions',
      body: (
        <ActionsView
          status={q.data.status}
          entries={entries.map(outboxEntryView)}
          stats={stats}
          csrf={s.csrf}
          canChange={roleAllows(s.operator.role, 'admin')}
          notice={q.data.done === undefined ? undefined : done[q.data.done]}
        />
      ),
    });
  });
  for (const change of ['retry', 'drop'] as const) {
    ui.post(
      `/actions/${change}`,
      kit.edge.limitBody(MAX_FORM_BYTES),
      kit.role('admin', change === 'retry' ? 'Retrying an action' : 'Dropping an action'),
      kit.form,
      async (c) => {
        const form = actionForm.safeParse(c.get('form'));
        if (!form.success) throw kit.edge.inputError(form.error, 'The form');
        const action = change === 'retry' ? 'action.retry' : 'action.drop';
        // Audited before it is made (RG_ERR_AUDIT_UNAVAILABLE, the 503 page, when it cannot be).
        await changeAction(deps.outbox, change, form.data.id, (entry) =>
          kit.edge.recordChange(c, {
            action,
            target: entry.spec.id,
            detail: { type: entry.spec.type, status: entry.status },
          }),
        );
        return c.redirect(`/console/actions?done=${change}`, 303);
      },
    );
  }
}

/** The Audit page's query: its filters go to the database (what it cannot hold is refused). */
const auditPageQuery = z.object({ actor: storableLine().optional(), cursor: storableLine().optional() });

function mountViews(ui: Hono<ConsoleEnv>, kit: ConsoleKit): void {
  const { deps } = kit;
  ui.get('/rules', async (c) => {
    if (deps.rules === undefined)
      return missing(kit, c, 'Rules', 'rules', 'The rule report is not running in this riskgate.');
    const q = ruleReportQuerySchema.safeParse(c.req.query());
    if (!q.success) throw kit.edge.inputError(q.error, 'The query');
    const report = await deps.rules.report(undefined, q.data);
    return kit.page(c, {
      title: 'Rules',
      current: 'rules',
      body: <RulesView report={report} nowMs={Date.now()} maxAgeMs={RULE_REPORT_MAX_AGE_MS} />,
    });
  });
  ui.get('/health', async (c) => {
    const [collected, outbox] = await Promise.all([
      deps.health.metrics?.().catch(() => undefined),
      // Unreadable (the control database is down) is said so on the page, not a 500.
      deps.outbox.store.stats(Date.now()).catch(() => undefined),
    ]);
    return kit.page(c, {
      title: 'Health',
      current: 'health',
      body: (
        <HealthView
          readiness={deps.health.readiness()}
          health={deps.health.health()}
          store={deps.decisions?.status()}
          outbox={outbox}
          metrics={collected === undefined ? undefined : summarizeMetrics(collected)}
        />
      ),
    });
  });
  ui.get('/audit', async (c) => {
    if (deps.audit === undefined)
      return missing(kit, c, 'Audit trail', 'audit', 'The audit trail is not running in this riskgate.');
    const q = auditPageQuery.safeParse(c.req.query());
    if (!q.success) throw kit.edge.inputError(q.error, 'The query');
    const actor = q.data.actor?.trim().slice(0, 64) || undefined;
    const cursor = q.data.cursor?.slice(0, 200) || undefined;
    const { entries, nextCursor } = await deps.audit.list({ actor, cursor, limit: 100 });
    return kit.page(c, {
      title: 'Audit trail',
      current: 'audit',
      body: <AuditView entries={entries} nextCursor={nextCursor} actor={actor} />,
    });
  });
}

/**
 * The console (`/console` on the operator surface) as a component: nothing to start or stop, its
 * routes only. See README "Console".
 */
export function consoleComponent(deps: ConsoleDeps): Component<void> {
  return {
    name: 'console',
    start: () => ({
      handle: undefined,
      routes: [
        consoleRoutesWith(deps, (ui, kit) => {
          mountDecisions(ui, kit);
          mountActions(ui, kit);
          mountLists(ui, kit);
          mountLockouts(ui, kit);
          mountSnoozes(ui, kit);
          mountPolicies(ui, kit);
          mountViews(ui, kit);
        }),
      ],
    }),
  };
}
