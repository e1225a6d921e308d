import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { allowedMethods } from './allowed-methods.ts';

describe('the Allow value of a request path', () => {
  const app = new Hono();
  app.use(async (_c, next) => next());
  app.get('/actions', (c) => c.text('list'));
  app.post('/actions/:id/retry', (c) => c.text('retry'));
  app.delete('/actions/:id', (c) => c.text('drop'));
  app.post('/decide', (c) => c.text('decide'));
  app.get('/a.b', (c) => c.text('dot'));
  const allow = allowedMethods(app);

  it('lists the methods of a literal path, HEAD beside GET', () => {
    expect(allow('/actions')).toBe('GET, HEAD');
    expect(allow('/decide')).toBe('POST');
  });

  it('matches a path with a parameter against its route template', () => {
    expect(allow('/actions/d1:lock_user:u1')).toBe('DELETE');
    expect(allow('/actions/d1:lock_user:u1/retry')).toBe('POST');
  });

  it('finds nothing for a path no route serves, nor reads a template segment as a pattern', () => {
    expect(allow('/actions/a/b/retry')).toBeUndefined();
    expect(allow('/nope')).toBeUndefined();
    expect(allow('/aXb')).toBeUndefined();
  });
});
