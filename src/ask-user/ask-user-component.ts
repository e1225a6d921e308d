import type { ActionDispatcher } from '../actions/action-dispatcher.ts';
import type { RiskgateConfig } from '../config/riskgate-config.ts';
import type { RiskgateDatabase } from '../database/database.ts';
import type { DecisionLog } from '../decision-log/decision-log.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import { FeedbackRateLimit } from '../feedback/feedback-rate-limit.ts';
import {
  type Component,
  type LifecycleLog,
  type MetricsRegistry,
  stopWaitMs,
} from '../lifecycle/component.ts';
import type { LockoutSink } from '../lockouts/lockout-record.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import { AskUserAnswers } from './ask-user-answers.ts';
import { type AskUserLinks, askUserLinks } from './ask-user-links.ts';
import { AskUserPruning, type AskUserPruningOptions } from './ask-user-pruning.ts';
import { askUserRoutes } from './ask-user-routes.ts';
import { AskUserStore } from './ask-user-store.ts';
import { tokenCodec } from './ask-user-token.ts';

/** Longest a stop waits for a pruning round's statement, ms. */
const PRUNE_STOP_CAP_MS = 2000;

/**
 * "Was this you?" as a component (docs/ask-user.md): the links decisions put in their events
 * (undefined without RISKGATE_ASK_USER_SECRET: no link is made) and the public page that answers
 * them; the expired links pruned now and then (src/ask-user/ask-user-pruning.ts). Starts after the
 * outbox and the lock-outs, whose path a "no" takes.
 */
export function askUserComponent(o: {
  config: Pick<RiskgateConfig, 'askUser'>;
  database: RiskgateDatabase;
  actions: Pick<ActionDispatcher, 'submit'>;
  lockouts: Pick<LockoutSink, 'companion'>;
  decisionLog: DecisionLog;
  log: LifecycleLog;
  clock?: Clock | undefined;
  /** The expired links' pruning (tests: its keep, period and bounds). Defaults as documented there. */
  pruning?: Omit<AskUserPruningOptions, 'store' | 'clock' | 'log'> | undefined;
}): Component<AskUserLinks | undefined, MetricsRegistry> {
  return {
    name: 'ask-user',
    start() {
      const { secret, baseUrl, ttlMs, ratePerSecond } = o.config.askUser;
      if (secret !== undefined && baseUrl === undefined) {
        throw new RiskgateError(
          ErrorCode.INVALID_CONFIG,
          'RISKGATE_ASK_USER_BASE_URL is required with RISKGATE_ASK_USER_SECRET (the links point to it)',
        );
      }
      const clock = o.clock ?? systemClock;
      const store = new AskUserStore(o.database);
      const codec = secret === undefined ? undefined : tokenCodec(secret);
      const answers = new AskUserAnswers({
        store,
        codec,
        actions: () => o.actions,
        lockouts: o.lockouts,
        decisionLog: o.decisionLog,
        clock,
        log: o.log,
      });
      const made = { links: 0, failures: 0 };
      const links =
        codec === undefined || baseUrl === undefined
          ? undefined
          : countedLinks(askUserLinks({ store, codec, baseUrl, ttlMs, clock }), made);
      const rateLimit = new FeedbackRateLimit({ ratePerSecond, burst: ratePerSecond * 5 });
      // Runs with links or without (rows a deployment made before it dropped its secret expire too).
      const pruning = new AskUserPruning({ store, clock, log: o.log, ...o.pruning });
      pruning.start();
      return {
        handle: links,
        routes: [askUserRoutes({ answers, rateLimit, clock })],
        stop: (deadlineAtMs, reason) =>
          pruning.stop(reason === 'fatal' ? 0 : stopWaitMs(deadlineAtMs, PRUNE_STOP_CAP_MS)),
        observe(registry) {
          const counter = (name: string, help: string, read: () => number) =>
            registry.observeCounter(`riskgate_ask_user_${name}`, help, read);
          counter('links', '"Was this you?" links made (each in a decision event)', () => made.links);
          counter(
            'links_pruned',
            'Links deleted past their expiry and its keep (7 days): their page then reads invalid, not expired',
            () => pruning.counts.pruned,
          );
          counter(
            'prune_failures',
            'Rounds of the expired links pruning that failed (the control database did not answer; the next round tries again)',
            () => pruning.counts.failures,
          );
          counter(
            'link_failures',
            'Links not made: the control database did not take the row (the event went without one)',
            () => made.failures,
          );
          counter('answers_yes', '"Was this you?" answered yes (a legit label)', () => answers.counts.yes);
          counter(
            'answers_no',
            '"Was this you?" answered no (a fraud label, and the policy\'s lock-out)',
            () => answers.counts.no,
          );
          counter(
            'refused',
            'Requests of the public page refused (invalid, used, expired, unavailable)',
            () => answers.counts.refused,
          );
          counter(
            'action_failures',
            '"No" answers whose lock-out the outbox did not take (logged; the label was kept)',
            () => answers.counts.actionFailures,
          );
        },
      };
    },
  };
}

function countedLinks(links: AskUserLinks, made: { links: number; failures: number }): AskUserLinks {
  return {
    async ask(question) {
      try {
        const link = await links.ask(question);
        made.links++;
        return link;
      } catch (error) {
        made.failures++;
        throw error;
      }
    },
  };
}
