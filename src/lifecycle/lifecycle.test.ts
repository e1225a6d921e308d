import { describe, expect, it } from 'vitest';
import type { Component, StartedComponent } from './component.ts';
import { holdsBack, type InputWarmth, stopWaitMs } from './component.ts';
import { Lifecycle, startOrTearDown } from './lifecycle.ts';

/** A component that notes its start and stop in `events`. */
function noting(
  name: string,
  events: string[],
  extra: Partial<StartedComponent<string, string[]>> = {},
): Component<string, string[]> {
  return {
    name,
    start: () => {
      events.push(`start ${name}`);
      return {
        handle: name,
        stop: (deadlineAtMs, reason) => {
          events.push(
            `stop ${name}${deadlineAtMs === 1234 ? ' by 1234' : ''}${reason === 'fatal' ? ' (fatal)' : ''}`,
          );
        },
        ...extra,
      };
    },
  };
}

const lines: Record<string, unknown>[] = [];
const lifecycle = (beforeStart?: (name: string) => void) =>
  new Lifecycle<string[]>({ registry: () => [], log: (line) => lines.push(line), beforeStart });

describe('a lifecycle', () => {
  it('starts components in order and stops them in reverse, each with the deadline', async () => {
    const events: string[] = [];
    const l = lifecycle();
    expect(await l.start(noting('a', events))).toBe('a');
    await l.start(noting('b', events));
    await l.start(noting('c', events));
    await l.stop(1234);
    expect(events).toEqual([
      'start a',
      'start b',
      'start c',
      'stop c by 1234',
      'stop b by 1234',
      'stop a by 1234',
    ]);
  });

  it("hands a fatal stop's reason to every component, in reverse order; a later stop is that one", async () => {
    const events: string[] = [];
    const l = lifecycle();
    await l.start(noting('a', events));
    await l.start(noting('b', events));
    expect(l.stopping).toBe(false);
    await l.stop(1234, 'fatal');
    await l.stop(1234);
    expect(l.stopping).toBe(true);
    expect(events).toEqual(['start a', 'start b', 'stop b by 1234 (fatal)', 'stop a by 1234 (fatal)']);
  });

  it('on a failed start stops what started, never what did not, and rethrows the start error', async () => {
    for (const failing of ['a', 'b', 'c']) {
      const events: string[] = [];
      const l = lifecycle((name) => {
        if (name === failing) throw new Error(`${name} failed`);
      });
      const started = startOrTearDown(l, 1000, async (s) => {
        for (const name of ['a', 'b', 'c']) await s.start(noting(name, events));
      });
      await expect(started).rejects.toThrow(`${failing} failed`);
      const before = ['a', 'b', 'c'].slice(0, ['a', 'b', 'c'].indexOf(failing));
      expect(events).toEqual([
        ...before.map((n) => `start ${n}`),
        ...before.toReversed().map((n) => `stop ${n}`),
      ]);
    }
  });

  it('stops the rest when one stop throws, then throws that error; a second stop is the first', async () => {
    const events: string[] = [];
    const l = lifecycle();
    await l.start(noting('a', events));
    await l.start({
      name: 'broken',
      start: () => ({
        handle: undefined,
        stop: () => {
          throw new Error('cannot close');
        },
      }),
    });
    await l.start(noting('c', events));
    const stopped = l.stop(Date.now());
    expect(l.stop(Date.now())).toBe(stopped);
    await expect(stopped).rejects.toThrow('cannot close');
    expect(events).toEqual(['start a', 'start c', 'stop c', 'stop a']);
    expect(lines.at(-1)).toMatchObject({ msg: 'component did not stop cleanly', component: 'broken' });
    await expect(l.start(noting('late', events))).rejects.toThrow('shutting down');
  });

  it('merges health, readiness checks and routes of the started components, in start order', async () => {
    const l = lifecycle();
    const mount = () => {};
    await l.start(
      noting('a', [], {
        health: () => ({ a: 1 }),
        ready: () => ({ policy: true }),
        routes: [{ surface: 'every', routes: [], mount }],
      }),
    );
    expect(l.readiness()).toEqual({ ready: true, checks: { policy: true } });
    await l.start(noting('b', [], { health: () => ({ b: 2 }), ready: () => ({ draining: false }) }));
    expect(l.health()).toEqual({ a: 1, b: 2 });
    expect(l.readiness()).toEqual({ ready: false, checks: { policy: true, draining: false } });
    expect(l.routes().map((r) => r.surface)).toEqual(['every']);
    expect(l.names()).toEqual(['a', 'b']);
  });

  it("counts an input's warmth only while the active policy reads it, and reports each one read", async () => {
    const l = lifecycle();
    let history: InputWarmth = { state: 'behind', everWarm: false, reason: 'not read yet' };
    await l.start(noting('policy', [], { ready: () => ({ policy: true }) }));
    await l.start(noting('logs', [], { ready: () => ({ history }) }));
    await l.start(noting('lists', [], { ready: () => ({ lists: { state: 'behind', everWarm: false } }) }));
    const reads = new Set(['history']);
    const inputs = { reads: (input: string) => reads.has(input), graceMs: 10_000 };
    // Without the policy's inputs (or before it is known) only the plain checks count.
    expect(l.readiness()).toEqual({ ready: true, checks: { policy: true } });
    expect(l.readiness(inputs)).toEqual({
      ready: false,
      checks: { policy: true, history: false },
      inputs: { history: { state: 'behind', reason: 'not read yet' } },
    });
    history = { state: 'warm', everWarm: true };
    expect(l.readiness(inputs)).toEqual({
      ready: true,
      checks: { policy: true, history: true },
      inputs: { history: { state: 'warm' } },
    });
    reads.add('lists');
    expect(l.readiness(inputs).checks).toEqual({ policy: true, history: true, lists: false });
    // Once told which inputs to check, every reader of readiness gets the same answer.
    l.checkInputs(inputs);
    expect(l.readiness()).toEqual(l.readiness(inputs));
  });

  it('gives each started component the registry to observe', async () => {
    const registry: string[] = [];
    const l = new Lifecycle<string[]>({ registry: () => registry, log: () => {} });
    await l.start(noting('a', [], { observe: (r) => r.push('gauge of a') }));
    expect(registry).toEqual(['gauge of a']);
  });
});

describe('a stopping component’s wait', () => {
  it('is its own bound, cut to what is left before the deadline, never negative', () => {
    expect(stopWaitMs(10_000, 500, 1000)).toBe(500);
    expect(stopWaitMs(1200, 500, 1000)).toBe(200);
    expect(stopWaitMs(900, 500, 1000)).toBe(0);
  });
});

describe("an input's warmth", () => {
  const now = 1_000_000;
  const grace = 10_000;
  it('holds the process back at once while it has never been warm since the start', () => {
    expect(holdsBack({ state: 'behind', everWarm: false }, now, grace)).toBe(true);
    expect(holdsBack({ state: 'behind', everWarm: false, sinceMs: now }, now, grace)).toBe(true);
  });

  it('holds it back once warm only after it has been behind for longer than the grace', () => {
    expect(holdsBack({ state: 'behind', everWarm: true, sinceMs: now - grace }, now, grace)).toBe(false);
    expect(holdsBack({ state: 'behind', everWarm: true, sinceMs: now - grace - 1 }, now, grace)).toBe(true);
    // Behind since a moment not known (a token refresh under way): never long enough to hold.
    expect(holdsBack({ state: 'behind', everWarm: true }, now, grace)).toBe(false);
  });

  it('never holds it back while its source fails for every replica, nor while warm', () => {
    expect(holdsBack({ state: 'unavailable', everWarm: false, sinceMs: 0 }, now, grace)).toBe(false);
    expect(holdsBack({ state: 'unavailable', everWarm: true, sinceMs: 0 }, now, grace)).toBe(false);
    expect(holdsBack({ state: 'warm', everWarm: true }, now, grace)).toBe(false);
  });
});
