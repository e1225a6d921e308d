import type { Hono } from 'hono';
import { z } from 'zod';
import { changeReason, MAX_REASON_LENGTH } from '../audit/change-reason.ts';
import type { StoredDecision } from '../decision-store/decision-query.ts';
import { roleAllows } from '../operators/operator.ts';
import { SNOOZE_ENTITIES, type SnoozeEntity } from '../policy-input/rule-snooze.ts';
import type { SnoozeView } from '../snoozes/snooze-api.ts';
import { storableLine } from '../text/storable-text.ts';
import { CsrfField, Notice, Time } from './console-layout.tsx';
import type { ConsoleContext, ConsoleEnv, ConsoleKit } from './console-routes.tsx';
import { pageError } from './lists-page.tsx';

/**
 * Rule snoozes in the console: on a decision's page, a form per fired rule to snooze it for this
 * login's account, user, unit or IP; on a rule's page (`/console/rules/{id}`), its active snoozes
 * with a button to end each early. Each change goes through the same `SnoozeOperations` as
 * `/snoozes` (src/snoozes/snooze-routes.ts): checked, audited first, then made.
 */

const MAX_FORM_BYTES = 16 * 1024;

/** The lengths a snooze form offers, hours (the API bounds them by RISKGATE_MAX_SNOOZE_DAYS). */
const SNOOZE_HOURS = [
  [1, '1 hour'],
  [24, '24 hours'],
  [7 * 24, '7 days'],
  [30 * 24, '30 days'],
] as const;

const ENTITY_LABEL: Record<SnoozeEntity, string> = {
  accountId: 'account',
  userId: 'user',
  unitId: 'unit',
  ip: 'IP',
};

/** The entities of a decision's request a rule can be snoozed for, with their values. */
function entitiesOf(d: StoredDecision): [SnoozeEntity, string][] {
  const r = d.line.request as Record<string, unknown>;
  return SNOOZE_ENTITIES.flatMap((e): [SnoozeEntity, string][] =>
    typeof r[e] === 'string' && r[e] !== '' ? [[e, r[e] as string]] : [],
  );
}

/** A form per rule the decision counted: snooze it for this login's account (or user, unit, IP). */
export function SnoozeForms(props: { d: StoredDecision; csrf: string }) {
  const { d } = props;
  const rules = d.line.outcome.matchedRules.filter((r) => !r.id.startsWith('$'));
  const entities = entitiesOf(d);
  if (rules.length === 0 || entities.length === 0) return null;
  const action = `/console/decisions/${encodeURIComponent(d.decisionId)}/snooze`;
  return (
    <section class="card" aria-labelledby="h-snooze">
      <h2 id="h-snooze">Snooze a rule for this login</h2>
      <p class="muted">
        The rule stops counting for the account (or user, unit, IP) chosen, on every replica within 2 s, until
        the time chosen; it counts for everyone else. Audited.
      </p>
      {rules.map((r, i) => (
        <form method="post" action={action} class="filters" aria-label={`Snooze ${r.id}`}>
          <CsrfField token={props.csrf} />
          <input type="hidden" name="ruleId" value={r.id} />
          <div>
            <label for={`s-entity-${i}`}>
              Snooze <span class="mono">{r.id}</span> for
            </label>
            <select id={`s-entity-${i}`} name="entity">
              {entities.map(([e, v]) => (
                <option value={e}>
                  {ENTITY_LABEL[e]} {v.length > 60 ? `${v.slice(0, 60)}…` : v}
                </option>
              ))}
            </select>
          </div>
          <div>
            <label for={`s-hours-${i}`}>For</label>
            <select id={`s-hours-${i}`} name="hours">
              {SNOOZE_HOURS.map(([h, text]) => (
                <option value={String(h)} selected={h === 24}>
                  {text}
                </option>
              ))}
            </select>
          </div>
          <div>
            <label for={`s-reason-${i}`}>Reason</label>
            <input type="text" id={`s-reason-${i}`} name="reason" required maxlength={MAX_REASON_LENGTH} />
          </div>
          <div class="actions">
            <button type="submit">Snooze {r.id}</button>
          </div>
        </form>
      ))}
    </section>
  );
}

function EndForm(props: { s: SnoozeView; csrf: string }) {
  const id = `e-${props.s.id}`;
  return (
    <form method="post" action={`/console/snoozes/${encodeURIComponent(props.s.id)}/end`} class="inline-form">
      <CsrfField token={props.csrf} />
      <label for={id} class="visually-hidden">
        Reason to end snooze {props.s.id}
      </label>
      <input type="text" id={id} name="reason" required maxlength={MAX_REASON_LENGTH} placeholder="reason" />{' '}
      <button type="submit" class="danger" aria-label={`End snooze ${props.s.id} early`}>
        End early
      </button>
    </form>
  );
}

/** A rule's page: its active snoozes, each with its end-early button (for an analyst). */
export function RuleSnoozesView(props: {
  ruleId: string;
  description?: string | undefined;
  snoozes: readonly SnoozeView[];
  stale: boolean;
  csrf: string;
  canChange: boolean;
  notice?: string | undefined;
}) {
  const { ruleId } = props;
  return (
    <>
      <p>
        <a href="/console/rules">All rules</a>
      </p>
      <h1>
        Rule <span class="mono">{ruleId}</span>
      </h1>
      {props.description !== undefined && <p>{props.description}</p>}
      <p>
        <a href={`/console/decisions?range=7d&rule=${encodeURIComponent(ruleId)}`}>Its decisions (7 days)</a>
      </p>
      {props.notice !== undefined && <Notice kind="ok">{props.notice}</Notice>}
      {props.stale && (
        <Notice>
          This process could not confirm its snoozes recently: decisions count every rule as if nothing were
          snoozed until it can.
        </Notice>
      )}
      <section class="card" aria-labelledby="h-snoozes">
        <h2 id="h-snoozes">Active snoozes</h2>
        {props.snoozes.length === 0 ? (
          <p class="muted">No active snooze: the rule counts for every login.</p>
        ) : (
          <table id="snoozes">
            <thead>
              <tr>
                <th scope="col">For</th>
                <th scope="col">Until</th>
                <th scope="col">Author</th>
                <th scope="col">Reason</th>
                {props.canChange && <th scope="col">End</th>}
              </tr>
            </thead>
            <tbody>
              {props.snoozes.map((s) => (
                <tr>
                  <td class="mono">
                    {ENTITY_LABEL[s.entity]} <bdi>{s.value}</bdi>
                  </td>
                  <td>
                    <Time at={s.until} />
                  </td>
                  <td>{s.author}</td>
                  <td>
                    <bdi>{s.reason}</bdi>
                  </td>
                  {props.canChange && (
                    <td>
                      <EndForm s={s} csrf={props.csrf} />
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {!props.canChange && <p class="muted">Ending a snooze takes the analyst role.</p>}
      </section>
    </>
  );
}

const snoozeFormSchema = z.object({
  ruleId: storableLine().min(1).max(200),
  entity: z.enum(SNOOZE_ENTITIES),
  hours: z.coerce
    .number()
    .int()
    .min(1)
    .max(24 * 365),
  reason: changeReason(),
});
const endFormSchema = z.object({
  reason: changeReason(),
});
const rulePageQuery = z.object({
  ended: z.string().max(100).optional(),
  snoozed: z.string().max(300).optional(),
});

/** The snooze forms' routes and the rule page, when the snoozes run in this riskgate. */
export function mountSnoozes(ui: Hono<ConsoleEnv>, kit: ConsoleKit): void {
  const { deps } = kit;
  const snoozes = deps.snoozes;
  const absent = (c: ConsoleContext) =>
    kit.fail(c, 503, 'Snoozes', 'The rule snoozes are not running in this riskgate.');
  ui.get('/rules/:id', async (c) => {
    if (snoozes === undefined) return absent(c);
    const q = rulePageQuery.safeParse(c.req.query());
    if (!q.success) throw kit.edge.inputError(q.error, 'The query');
    const ruleId = c.req.param('id');
    const known = deps.ruleIds?.();
    if (known !== undefined && !known.includes(ruleId))
      return kit.fail(c, 404, 'No such rule', 'The active policy has no rule with this id.');
    const listed = await snoozes.list({ ruleId, limit: 1000 });
    const s = c.get('session');
    const notice =
      q.data.ended !== undefined ? 'Snooze ended: the rule counts again for its entity.' : q.data.snoozed;
    return kit.page(c, {
      title: `Rule ${ruleId}`,
      current: 'rules',
      body: (
        <RuleSnoozesView
          ruleId={ruleId}
          snoozes={listed.items}
          stale={listed.snapshot.stale}
          csrf={s.csrf}
          canChange={roleAllows(s.operator.role, 'analyst')}
          notice={notice}
        />
      ),
    });
  });
  ui.post(
    '/decisions/:id/snooze',
    kit.edge.limitBody(MAX_FORM_BYTES),
    kit.role('analyst', 'Snoozing a rule'),
    kit.form,
    async (c) => {
      if (snoozes === undefined) return absent(c);
      if (deps.decisions === undefined)
        return kit.fail(c, 404, 'No such decision', 'There is no decision store.');
      const id = z.uuid().safeParse(c.req.param('id'));
      const d = id.success ? await deps.decisions.get(id.data) : undefined;
      if (d === undefined)
        return kit.fail(c, 404, 'No such decision', 'The decision store has no decision with this id.');
      try {
        const form = snoozeFormSchema.safeParse(c.get('form'));
        if (!form.success) throw kit.edge.inputError(form.error, 'The snooze form');
        const { ruleId, entity, hours, reason } = form.data;
        // The value is the decision's own (not the form's): a snooze from this page is for this login.
        const value = entitiesOf(d).find(([e]) => e === entity)?.[1];
        if (value === undefined)
          return kit.fail(c, 400, 'Snooze refused', `This decision's request has no ${entity}.`);
        const until = new Date(snoozes.nowMs() + hours * 3_600_000).toISOString();
        const made = await snoozes.create(c, kit.edge, { ruleId, entity, value, until, reason });
        const notice = `Snoozed for ${ENTITY_LABEL[made.entity]} ${made.value} until ${made.until}.`;
        return c.redirect(
          `/console/rules/${encodeURIComponent(made.ruleId)}?${new URLSearchParams({ snoozed: notice })}`,
          303,
        );
      } catch (error) {
        const e = pageError(error);
        return kit.fail(c, e.status, 'Snooze refused', e.message);
      }
    },
  );
  ui.post(
    '/snoozes/:id/end',
    kit.edge.limitBody(MAX_FORM_BYTES),
    kit.role('analyst', 'Ending a snooze'),
    kit.form,
    async (c) => {
      if (snoozes === undefined) return absent(c);
      try {
        const form = endFormSchema.safeParse(c.get('form'));
        if (!form.success) throw kit.edge.inputError(form.error, 'The form');
        const ended = await snoozes.end(c, kit.edge, c.req.param('id') ?? '', form.data.reason);
        return c.redirect(`/console/rules/${encodeURIComponent(ended.ruleId)}?ended=${ended.id}`, 303);
      } catch (error) {
        const e = pageError(error);
        return kit.fail(c, e.status, 'Could not end the snooze', e.message);
      }
    },
  );
}
