import { ASK_USER_ANSWER_ROUTE, ASK_USER_GET_ROUTE } from '../ask-user/ask-user-routes.ts';
import { AUDIT_ROUTE } from '../audit/audit-routes.ts';
import { ADMIN_CALLBACK_ROUTE } from '../callbacks/callback-routes.ts';
import { DECIDE_ROUTE } from '../decide/decide-route.ts';
import { DECISION_ROUTE, DECISIONS_ROUTE } from '../decision-store/decision-routes.ts';
import { RULE_REPORT_ROUTE } from '../decision-store/rule-report-routes.ts';
import type { AnyRouteDeclaration } from '../edge/route-declaration.ts';
import { FEEDBACK_ROUTE } from '../feedback/feedback-routes.ts';
import { HEALTH_ROUTE, READY_ROUTE } from '../lifecycle/health-routes.ts';
import {
  ADD_LIST_ENTRY_ROUTE,
  IMPORT_LIST_ROUTE,
  LIST_ROUTE_GET,
  LISTS_ROUTE,
  REMOVE_LIST_ENTRY_ROUTE,
} from '../lists/list-routes.ts';
import { LOCKOUT_ROUTE, LOCKOUTS_ROUTE, UNLOCK_ROUTE } from '../lockouts/lockout-routes.ts';
import { METRICS_ROUTE } from '../observability/metrics-component.ts';
import { buildOpenApiDocument } from '../openapi/openapi-document.ts';
import { OPENAPI_ROUTE } from '../openapi/openapi-route.ts';
import { ACTIONS_ROUTE, DROP_ACTION_ROUTE, RETRY_ACTION_ROUTE } from '../outbox/actions-routes.ts';
import { OUTCOME_ROUTE } from '../outcomes/outcome-routes.ts';
import { POLICIES_ROUTE, POLICY_RELOAD_ROUTE, POLICY_STATS_ROUTE } from '../policy/policy-routes.ts';
import { POLICY_VERSION_ROUTES } from '../policy-versions/policy-version-routes.ts';
import { CREATE_SNOOZE_ROUTE, END_SNOOZE_ROUTE, SNOOZES_ROUTE } from '../snoozes/snooze-routes.ts';

/**
 * Every route riskgate serves, as its own module declares it, in the order the document lists
 * them: what `GET /openapi.json` and `npm run openapi` assemble the document from, whatever this
 * process mounts (the callbacks only with a key, the operator routes on the ops port). A list of
 * references, not of facts: test/openapi-contract.test.ts fails when a route riskgate mounts is
 * missing here, or one here is not mounted.
 */
export const API_ROUTES: readonly AnyRouteDeclaration[] = [
  DECIDE_ROUTE,
  FEEDBACK_ROUTE,
  OUTCOME_ROUTE,
  ASK_USER_GET_ROUTE,
  ASK_USER_ANSWER_ROUTE,
  HEALTH_ROUTE,
  READY_ROUTE,
  METRICS_ROUTE,
  POLICIES_ROUTE,
  POLICY_RELOAD_ROUTE,
  AUDIT_ROUTE,
  POLICY_STATS_ROUTE,
  RULE_REPORT_ROUTE,
  OPENAPI_ROUTE,
  ACTIONS_ROUTE,
  RETRY_ACTION_ROUTE,
  DROP_ACTION_ROUTE,
  DECISIONS_ROUTE,
  DECISION_ROUTE,
  LISTS_ROUTE,
  LIST_ROUTE_GET,
  ADD_LIST_ENTRY_ROUTE,
  REMOVE_LIST_ENTRY_ROUTE,
  IMPORT_LIST_ROUTE,
  SNOOZES_ROUTE,
  CREATE_SNOOZE_ROUTE,
  END_SNOOZE_ROUTE,
  ...POLICY_VERSION_ROUTES,
  LOCKOUTS_ROUTE,
  LOCKOUT_ROUTE,
  UNLOCK_ROUTE,
  ADMIN_CALLBACK_ROUTE,
];

/** The API document of riskgate `version`: every route's declaration, assembled. */
export const apiDocument = (version: string) => buildOpenApiDocument(version, API_ROUTES);
