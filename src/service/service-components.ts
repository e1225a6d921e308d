import type { ActionOutcome } from '../actions/action-dispatcher.ts';
import type { ActionSpec } from '../actions/admin-actions.ts';
import type { AdminClient } from '../admin/admin-client.ts';
import { admissionComponent } from '../admission/admission-component.ts';
import { askUserComponent } from '../ask-user/ask-user-component.ts';
import { auditComponent } from '../audit/audit-routes.ts';
import { callbackRoutes } from '../callbacks/callback-routes.ts';
import { consoleComponent } from '../console/console-pages.tsx';
import type { RiskgateDatabase } from '../database/database.ts';
import { databaseComponent } from '../database/database-component.ts';
import { MarkerPoll } from '../database/marker-poll.ts';
import type { StateDatabases } from '../database/state-databases.ts';
import { actionOutcomeWriter } from '../decide/action-outcomes.ts';
import type { DecisionLog } from '../decision-log/decision-log.ts';
import { DISCARD_DECISION_LOG } from '../decision-log/decision-log.ts';
import { decisionLogComponent } from '../decision-log/decision-log-component.ts';
import {
  type DecisionStore,
  decisionStoreComponent,
  teeDecisionLog,
} from '../decision-store/decision-store-component.ts';
import type { DecisionTables } from '../decision-store/decision-tables.ts';
import { recentOutcomesReader } from '../decision-store/recent-outcomes.ts';
import type { RuleReportReader } from '../decision-store/rule-report.ts';
import {
  cachedRuleReport,
  createRuleReport,
  type RuleReportOptions,
} from '../decision-store/rule-report-query.ts';
import { ruleReportRoutes } from '../decision-store/rule-report-routes.ts';
import type { EventSink } from '../events/riskgate-event.ts';
import { laterEventSink } from '../events/riskgate-event.ts';
import { featureComponent } from '../features/feature-component.ts';
import type { DecisionMemory } from '../feedback/decision-memory.ts';
import { FeedbackRateLimit } from '../feedback/feedback-rate-limit.ts';
import { feedbackComponent } from '../feedback/feedback-routes.ts';
import { recordLabel } from '../feedback/record-label.ts';
import type { ServiceLog } from '../http/create-app.ts';
import { probesComponent } from '../lifecycle/health-routes.ts';
import type { Lifecycle } from '../lifecycle/lifecycle.ts';
import { listComponent } from '../lists/list-component.ts';
import type { ListOperations } from '../lists/list-routes.ts';
import { lockoutsComponent } from '../lockouts/lockout-component.ts';
import type { LockoutOperations } from '../lockouts/lockout-routes.ts';
import type { RiskgateMetrics } from '../observability/metrics.ts';
import { tracingComponent } from '../observability/metrics-component.ts';
import { openApiRoute } from '../openapi/openapi-route.ts';
import type { AuditTrail } from '../operators/audit-trail.ts';
import type { Outbox } from '../outbox/outbox.ts';
import { outboxComponent } from '../outbox/outbox-component.ts';
import { outcomeRoutes } from '../outcomes/outcome-routes.ts';
import { historyMaxLagMs } from '../policy/inputs/feature-rows.ts';
import type { InputTable } from '../policy/inputs/input-row.ts';
import { policyComponent } from '../policy/policy-component.ts';
import type { DeclaredList } from '../policy/policy-types.ts';
import { computeEvidence } from '../policy-evidence/policy-evidence.ts';
import {
  PolicyEvidenceRunner,
  PolicyEvidenceStore,
  policyEvidenceComponent,
} from '../policy-versions/policy-version-evidence-store.ts';
import {
  type PolicyVersionOperations,
  policyVersionOperations,
} from '../policy-versions/policy-version-operations.ts';
import { policyVersionRoutes } from '../policy-versions/policy-version-routes.ts';
import { PolicyVersionStore } from '../policy-versions/policy-version-store.ts';
import { PolicyVersionSync } from '../policy-versions/policy-version-sync.ts';
import { reviewComponent } from '../review-queue/review-component.ts';
import type { ReviewOperations } from '../review-queue/review-operations.ts';
import { snoozeComponent } from '../snoozes/snooze-component.ts';
import type { SnoozeOperations } from '../snoozes/snooze-routes.ts';
import { webhookDeliveryComponent, webhooksComponent } from '../webhooks/webhooks-component.ts';
import { apiDocument } from './api-routes.ts';
import { CONTROL_MIGRATIONS, DECISION_MIGRATIONS } from './database-migrations.ts';
import { readsInput } from './input-readiness.ts';
import { logFollowerComponent } from './log-follower.ts';
import type { StartRiskgateOptions } from './riskgate-options.ts';
import { vendorClientsComponent } from './vendor-clients.ts';

/** Policy versions read to name the rule history's revisions (the newest; a page of the list). */
const RULE_HISTORY_VERSIONS = 100;

/** The runtime lists and the rule snoozes: both read by decisions from memory, polled the same way. */
async function startListsAndSnoozes(
  l: Lifecycle<RiskgateMetrics>,
  ctx: { options: StartRiskgateOptions; log: ServiceLog },
  o: {
    database: RiskgateDatabase;
    markers: MarkerPoll;
    policies: { store: { current(): { lists?: readonly DeclaredList[]; ruleIds?: readonly string[] } } };
    events: EventSink<ActionSpec>;
  },
) {
  const { options, log } = ctx;
  const { config } = options;
  const { database, markers, policies, events } = o;
  const lists = await l.start(
    listComponent({
      database,
      declared: () => policies.store.current().lists ?? [],
      events,
      log,
      sync: { ...options.lists, poll: markers },
      clock: options.clock,
    }),
  );
  // After the policies (a snooze names one of their rules) and beside the lists, polled the same way.
  const snoozes = await l.start(
    snoozeComponent({
      database,
      ruleIds: () => policies.store.current().ruleIds ?? [],
      maxDays: config.maxSnoozeDays,
      log,
      sync: { ...options.lists, poll: markers },
      clock: options.clock,
    }),
  );
  return { lists, snoozes };
}

/** `riskgate_policy_version_info`: which version this replica serves, and whether it refused one. */
function observePolicyVersion(
  m: RiskgateMetrics,
  policies: { versions: PolicyVersionSync | undefined; store: { current(): { revision: string } } },
): void {
  m.observePolicyVersion(() => {
    const s = policies.versions?.status();
    return {
      source: s?.active === undefined ? 'file' : 'database',
      versionId: s?.active?.versionId ?? 'none',
      revision: policies.store.current().revision,
      generation: s?.generation ?? 0,
      stagedVersionId: s?.staged?.versionId ?? 'none',
      stage: s?.staged?.stage ?? 'none',
      percent: s?.staged?.percent ?? 0,
      refused: s?.lastError !== undefined,
    };
  });
}

/**
 * The components behind the HTTP surfaces, in start order (after the metrics): each one's
 * handle. The probes and the routes with no lifecycle of their own come last.
 */
export async function startServices(
  l: Lifecycle<RiskgateMetrics>,
  ctx: {
    options: StartRiskgateOptions;
    log: ServiceLog;
    opsKeys: readonly string[];
    drainTimeoutMs: number;
    metrics: RiskgateMetrics;
  },
) {
  const { options, log, metrics: m } = ctx;
  const { config, upstream } = options;
  const version = options.version ?? '0.0.0';
  await l.start(tracingComponent(options.tracing));
  const loggedOnly = await l.start(decisionLogComponent({ config, given: options.decisionLog, log }));
  // Two kinds of state (docs/architecture.md): the control handle to the system of record (audit
  // trail, lists, lock-outs, outbox), the decisions handle to the decision store and its readers.
  const state = await l.start(
    databaseComponent({
      target: config.database,
      controlMigrations: CONTROL_MIGRATIONS,
      decisionMigrations: DECISION_MIGRATIONS,
      given: options.database,
      log,
    }),
  );
  const database = state.control;
  // One timer reads the control database's change markers (lists, snoozes, policy versions).
  const markers = new MarkerPoll(database, { clock: options.clock });
  const audit = await l.start(auditComponent({ database, given: options.audit, clock: options.clock }));
  const decisions = await l.start(
    decisionStoreComponent({ config, state, log, tuning: options.decisionStore }),
  );
  // The `outcomes` input reads the login backend's outcomes from the store (none without one).
  const outcomes = decisions.enabled ? recentOutcomesReader(state.decisions.db.withTables()) : undefined;
  // Every record of the decision log also reaches the store (batched off the request path).
  const decisionLog = teeDecisionLog(loggedOnly, decisions);
  const tracer = options.tracing?.calls;
  const vendor = await l.start(vendorClientsComponent({ ...options, metrics: m, log, tracer }));
  const admission = await l.start(admissionComponent(config, options.clock));
  // The policy versions of the control database: served by every replica, moved by the API.
  const versionStore = new PolicyVersionStore(database, { clock: options.clock });
  const versionOperations = await versionOperationsOf(l, ctx, { versionStore, database, state, decisions });
  const policies = await l.start(policiesOf(ctx, { versionStore, audit, markers }));
  m.observeBuildInfo(version, () => policies.store.current()?.revision);
  observePolicyVersion(m, policies);
  // No lifecycle of its own: queries of the database, over the live policies' revisions.
  const ruleReport = ruleReportOf(state.decisions, policies, versionStore);
  const features = await l.start(
    featureComponent({
      config,
      given: options.featureStore,
      historyConfigured: upstream.logsUrl !== undefined && upstream.logApiKey !== undefined,
      policyReadsHistory: () => policies.store.current().requirements.history,
      log,
    }),
  );
  // List changes and lock-outs are told through the webhooks, started after the outbox below.
  const events = laterEventSink<ActionSpec>();
  const { lists, snoozes } = await startListsAndSnoozes(l, ctx, { database, markers, policies, events });
  const logs = await l.start(
    logsOf(ctx, {
      admin: vendor.admin,
      onCall: vendor.recordCall,
      features: features.store,
      // The bound decisions read the history with (its row), so ready means they read it fresh.
      maxLagMs: () => historyMaxLagMs(policies.store.current(), policies.shadow?.current()),
    }),
  );
  // With the log off, labels are refused (feedback, an answer: they check for the discarding log).
  const labelLog = loggedOnly === DISCARD_DECISION_LOG ? loggedOnly : decisionLog;
  const actionDeps = { vendor, database, decisionLog, events, labelLog };
  const { lockouts, outbox, askUser } = await startActionPath(l, ctx, actionDeps);
  const recent = await l.start(
    feedbackComponent({
      ...config.feedback,
      given: options.recentDecisions,
      operatorKeys: ctx.opsKeys,
      decisionLog: labelLog,
    }),
  );
  const settleOwnWrite = ownWriteSettler(decisions, ruleReport);
  const shown = { decisions, ruleReport, audit, outbox, recent, loggedOnly, decisionLog, settleOwnWrite };
  const review = await l.start(reviewOf(ctx, { ...shown, database, lockouts }));
  const operations = { lists: lists.operations, lockouts: lockouts.operations, snoozes: snoozes.operations };
  l.checkInputs({ reads: readsInput(() => policies.store.current()), graceMs: config.readyGraceMs });
  const ruleIds = () => policies.store.current().ruleIds ?? [];
  const pages = { ...operations, review: review.operations, policyVersions: versionOperations, ruleIds };
  await l.start(consoleOf(l, ctx, { ...shown, ...pages }));
  const callbackKey = upstream.callbackSignatureKey;
  await l.start(
    probesComponent({
      health: () => l.health(),
      readiness: () => l.readiness(),
      extra: [
        openApiRoute(() => apiDocument(version)),
        ruleReportRoutes(ruleReport),
        outcomesOf(ctx, shown),
        policyVersionRoutes({ store: versionStore, ...options }, versionOperations),
        ...(callbackKey === undefined ? [] : [callbackRoutes({ signatureKey: callbackKey, log })]),
      ],
    }),
  );
  return {
    decisionLog,
    state,
    decisions,
    audit,
    vendor,
    admission,
    policies,
    ruleReport,
    features,
    lists: lists.sync,
    snoozes: snoozes.sync,
    logs,
    lockouts,
    outbox,
    events,
    askUser,
    recent,
    outcomes,
    review,
  };
}

/** The Log API follower, feeding the history the active (and shadow) policy reads. */
function logsOf(
  ctx: Parameters<typeof startServices>[1],
  o: Pick<Parameters<typeof logFollowerComponent>[0], 'admin' | 'onCall' | 'features' | 'maxLagMs'>,
) {
  const { options, log, metrics } = ctx;
  return logFollowerComponent({
    enabled: options.followLogs !== false,
    upstream: options.upstream,
    stateDir: options.config.stateDir,
    metrics,
    log,
    tracer: options.tracing?.calls,
    clock: options.clock,
    ...o,
    ...options.logs,
  });
}

/**
 * The review queue (src/review-queue/): its dispositions labelled as the console's label form
 * labels (the decision log's `feedback` line), its cases' decisions read from the decision store.
 */
function reviewOf(
  ctx: { options: StartRiskgateOptions; log: ServiceLog },
  s: {
    database: RiskgateDatabase;
    decisions: DecisionStore;
    recent: DecisionMemory;
    loggedOnly: DecisionLog;
    decisionLog: DecisionLog;
    lockouts: { operations: LockoutOperations };
    settleOwnWrite: () => Promise<void>;
  },
) {
  const { config } = ctx.options;
  // With the log off, a disposition's label is refused as by POST /feedback.
  const labels = s.loggedOnly === DISCARD_DECISION_LOG ? s.loggedOnly : s.decisionLog;
  return reviewComponent({
    database: s.database,
    slaHours: config.reviewSlaHours,
    sampleShare: config.reviewSampleShare,
    label: ({ c, ...label }) => {
      const principal = c.get('principal');
      return recordLabel(
        { decisions: s.recent, decisionLog: labels },
        { ...label, keyId: principal.keyId, as: 'operator', operatorName: principal.operator?.name },
      );
    },
    decision: async (id) => {
      if (!s.decisions.enabled) return undefined;
      const d = await s.decisions.get(id);
      return d === undefined ? undefined : { verdict: d.verdict, userId: d.userId, accountId: d.accountId };
    },
    lockouts: s.lockouts.operations,
    settle: s.settleOwnWrite,
    log: ctx.log,
    clock: ctx.options.clock,
  });
}

/** A write of an operator (a label) or of a login backend (an outcome), read back at once. */
function ownWriteSettler(decisions: DecisionStore, ruleReport: { invalidate(): void }) {
  return async () => {
    await decisions.flush(OWN_WRITE_SETTLE_MS);
    ruleReport.invalidate();
  };
}

/** `POST /decisions/{id}/outcome`: authorised and kept as feedback is, read back at once. */
function outcomesOf(
  ctx: { options: StartRiskgateOptions; opsKeys: readonly string[] },
  s: {
    decisions: DecisionStore;
    recent: DecisionMemory;
    loggedOnly: DecisionLog;
    decisionLog: DecisionLog;
    settleOwnWrite: () => Promise<void>;
  },
) {
  return outcomeRoutes({
    decisions: s.recent,
    // With the log off, outcomes are refused as feedback is (it checks for the discarding log).
    decisionLog: s.loggedOnly === DISCARD_DECISION_LOG ? s.loggedOnly : s.decisionLog,
    operatorKeys: ctx.opsKeys,
    rateLimit: new FeedbackRateLimit(ctx.options.config.feedback),
    stored: async (id) => (await s.decisions.get(id)) !== undefined,
    settle: s.settleOwnWrite,
  });
}

/**
 * The action path, in start order: the lock-out records (before the outbox, whose outcomes and
 * unlock gate they serve, so they stop after it), the webhook receivers' connections, the outbox,
 * the event sink (signed webhooks) that the lock-outs and decisions emit into, and "was this
 * you?" (src/ask-user/), whose "no" takes the lock-outs' path.
 */
async function startActionPath(
  l: Lifecycle<RiskgateMetrics>,
  ctx: { options: StartRiskgateOptions; log: ServiceLog; drainTimeoutMs: number; metrics: RiskgateMetrics },
  deps: {
    vendor: { admin: AdminClient };
    database: RiskgateDatabase;
    decisionLog: DecisionLog;
    /** The sink the lock-outs (and lists) emit into; the webhooks attached to it once started. */
    events: ReturnType<typeof laterEventSink<ActionSpec>>;
    /** Where a "was this you?" answer is kept (the decision log, or the discarding one when off). */
    labelLog: DecisionLog;
  },
) {
  const { options, log, metrics: m } = ctx;
  const { config } = options;
  const { vendor, database, decisionLog } = deps;
  let started: Outbox | undefined;
  const lockouts = await l.start(
    lockoutsComponent({
      database,
      events: deps.events,
      actions: () => started!,
      log,
      clock: options.clock,
    }),
  );
  const writeOutcome = actionOutcomeWriter({ decisionLog, metrics: m, log });
  const onOutcome = (outcome: ActionOutcome, recorded: boolean) => {
    writeOutcome(outcome);
    lockouts.recorder.outcome(outcome, recorded);
  };
  const webhookDelivery = await l.start(webhookDeliveryComponent(config, options.clock));
  const outbox = await l.start(
    outboxComponent({
      config,
      database,
      given: options.outboxStore,
      admin: vendor.admin,
      webhooks: webhookDelivery,
      onOutcome,
      flushOutcomes: () => decisionLog.flush(),
      log,
      tuning: {
        beforeAttempt: lockouts.gate,
        delivery: lockouts.recorder.delivery,
        ...options.actionQueue,
        ...options.outbox,
      },
      drainTimeoutMs: ctx.drainTimeoutMs,
      clock: options.clock,
    }),
  );
  started = outbox;
  const webhooks = await l.start(webhooksComponent({ config, delivery: webhookDelivery, actions: outbox }));
  deps.events.attach(options.events ?? webhooks);
  // "Was this you?": after the outbox and the lock-outs, whose path a "no" takes.
  const askUser = await l.start(
    askUserComponent({
      config,
      database,
      actions: outbox,
      lockouts: lockouts.recorder,
      decisionLog: deps.labelLog,
      log,
      clock: options.clock,
    }),
  );
  return { lockouts, outbox, askUser };
}

/**
 * The policy versions' operations (the API's and the console's), with a proposal's evidence
 * computed (src/policy-evidence/): the draft's check, the suites the policies directory ships for
 * it, a backtest over the decision store when there is one.
 */
async function versionOperationsOf(
  l: Lifecycle<RiskgateMetrics>,
  ctx: { options: StartRiskgateOptions; log: ServiceLog },
  o: {
    versionStore: PolicyVersionStore;
    database: RiskgateDatabase;
    state: StateDatabases;
    decisions: { enabled: boolean };
  },
): Promise<PolicyVersionOperations> {
  const { options } = ctx;
  const { backtest } = options.config;
  // The backtest's threads open the store by themselves: the decisions file, or a client of their own.
  const source = () => ({
    db: o.state.decisions.db.withTables<DecisionTables>(),
    file: o.state.decisionsFile,
    postgres: o.state.decisions.postgres,
  });
  const evidence = await l.start(
    policyEvidenceComponent(
      new PolicyEvidenceRunner({
        store: new PolicyEvidenceStore(o.database, { clock: options.clock }),
        compute: (yaml, window, signal) =>
          computeEvidence(yaml, window, {
            compile: options.inputs === undefined ? undefined : { inputs: options.inputs },
            policyPath: options.config.policyPath,
            decisions: o.decisions.enabled ? source : undefined,
            maxDecisions: backtest.maxDecisions,
            timeLimitMs: backtest.timeLimitSeconds * 1000,
            signal,
            clock: options.clock,
          }),
        log: ctx.log,
      }),
    ),
  );
  return policyVersionOperations({
    store: o.versionStore,
    inputs: options.inputs,
    evidence,
    defaultWindowHours: backtest.windowHours,
    clock: options.clock,
  });
}

/**
 * The active and shadow policies, compiled against the input table (`options.inputs`), with the
 * control database's policy versions over them. A scheduled activation this replica makes is
 * audited in the name of who scheduled it.
 */
function policiesOf(
  ctx: { options: StartRiskgateOptions; log: ServiceLog; metrics: RiskgateMetrics },
  control: { versionStore: PolicyVersionStore; audit: AuditTrail; markers: MarkerPoll },
) {
  const { options, log, metrics } = ctx;
  const versions = (compile: { inputs: InputTable } | undefined) =>
    new PolicyVersionSync({
      store: control.versionStore,
      compile,
      pollMs: options.config.policyVersionPollMs,
      clock: options.clock,
      poll: control.markers,
      log,
      onRefused: () => metrics.recordPolicyReload('error'),
      onServed: () => metrics.recordPolicyReload('ok'),
      onScheduledActivation: async (version, by) => {
        const entry = await control.audit.record({
          actor: by,
          role: 'admin',
          keyId: 'schedule',
          action: 'policy.activate',
          target: version.id,
          from: 'riskgate',
          detail: { scheduled: true, revision: version.revision },
        });
        await control.audit.settle(entry.id, { status: 'done' });
      },
    });
  return policyComponent({
    versions,
    path: options.config.policyPath,
    shadowPath: options.config.shadowPolicyPath,
    debounceMs: options.policyDebounceMs ?? 200,
    log,
    onReload: (result) => metrics.recordPolicyReload(result),
    inputs: options.inputs,
  });
}

/**
 * Longest an operator's label (or a login backend's outcome) waits for the store before its page
 * (its answer) is shown, ms: past it the page shows what the store has (the store is behind, which
 * the Health page says).
 */
const OWN_WRITE_SETTLE_MS = 5000;

/** The console (`/console`) over what the services built. */
function consoleOf(
  l: Lifecycle<RiskgateMetrics>,
  ctx: { options: StartRiskgateOptions; opsKeys: readonly string[]; metrics: RiskgateMetrics },
  s: {
    decisions: DecisionStore;
    ruleReport: RuleReportReader & { invalidate?(): void };
    audit: AuditTrail;
    outbox: Outbox;
    recent: DecisionMemory;
    loggedOnly: DecisionLog;
    decisionLog: DecisionLog;
    lists: ListOperations;
    lockouts: LockoutOperations;
    snoozes: SnoozeOperations;
    review: ReviewOperations;
    policyVersions: PolicyVersionOperations;
    ruleIds: () => readonly string[];
    settleOwnWrite: () => Promise<void>;
  },
) {
  const { options } = ctx;
  const { outbox } = s;
  // With the log off, a label is refused as by POST /feedback (it checks for the discarding log).
  const labels = s.loggedOnly === DISCARD_DECISION_LOG ? s.loggedOnly : s.decisionLog;
  return consoleComponent({
    decisions: s.decisions.enabled ? s.decisions : undefined,
    rules: options.console?.rules ?? (s.decisions.enabled ? s.ruleReport : undefined),
    audit: s.audit,
    lists: s.lists,
    lockouts: s.lockouts,
    snoozes: s.snoozes,
    review: s.review,
    policyVersions: s.policyVersions,
    outbox: { store: outbox.store, onDropped: (e) => outbox.reportFinal(e), onRetried: () => outbox.nudge() },
    health: {
      health: () => l.health(),
      readiness: () => l.readiness(),
      metrics: options.gatherMetrics ?? (() => ctx.metrics.collect()),
    },
    labelDecision: ({ operator, ...label }) =>
      recordLabel(
        { decisions: s.recent, decisionLog: labels },
        { ...label, keyId: operator.keyId, as: 'operator', operatorName: operator.name },
      ),
    session: { ...options.config.console, operatorKeys: ctx.opsKeys },
    inputs: options.inputs === undefined ? undefined : () => options.inputs!,
    ruleIds: s.ruleIds,
    settleOwnWrite: s.settleOwnWrite,
  });
}

/**
 * The rule report, kept per active revision: the newest policy versions name the revisions of its
 * history (who made each, why).
 */
function ruleReportOf(
  database: RuleReportOptions['database'],
  policies: RuleReportOptions['policies'],
  versionStore: PolicyVersionStore,
) {
  return cachedRuleReport(
    createRuleReport({ database, policies, versions: () => versionStore.list(RULE_HISTORY_VERSIONS) }),
    { revision: () => policies.store.current().revision },
  );
}
