// The event type cache of job creation is shared by every tenant of a web process
// (src/core/webhook-jobs.ts). It used to drop its oldest entry whoever held it, so a tenant
// cycling through a thousand event types, one job each, pushed every other tenant's event types
// out, and each of their next jobs paid a lookup and a schema compile on the web's main thread.
import test from 'ava';
import { TenantCache } from '../src/core/tenant-cache.ts';

test('a tenant cycling through more entries than the cache holds evicts its own, never a smaller tenant\'s', (t) => {
  const cache = new TenantCache<number>(10);
  for (let i = 0; i < 4; i += 1) cache.set('quiet', `q${i}`, i);
  for (let i = 0; i < 1000; i += 1) cache.set('churn', `c${i}`, i);
  t.is(cache.size, 10);
  t.deepEqual([0, 1, 2, 3].map((i) => cache.get('quiet', `q${i}`)), [0, 1, 2, 3], 'the quiet tenant kept every entry');
  t.deepEqual([994, 995, 996, 997, 998, 999].map((i) => cache.get('churn', `c${i}`)), [994, 995, 996, 997, 998, 999],
    'the churning tenant kept its newest six');
  t.is(cache.get('churn', 'c993'), undefined);
});

test('when full, the oldest entry of the tenant holding the most goes; an entry set again is its tenant\'s newest', (t) => {
  const cache = new TenantCache<string>(5);
  cache.set('a', 'x', 'a-x');
  cache.set('a', 'y', 'a-y');
  cache.set('a', 'z', 'a-z');
  cache.set('b', 'x', 'b-x');
  cache.set('b', 'y', 'b-y');
  cache.set('a', 'x', 'a-x2'); // set again: a's newest now, and no eviction (same size)
  t.is(cache.size, 5);
  cache.set('c', 'x', 'c-x'); // full: a holds the most (3); its oldest is now y
  t.deepEqual(['x', 'y', 'z'].map((k) => cache.get('a', k)), ['a-x2', undefined, 'a-z']);
  t.deepEqual(['x', 'y'].map((k) => cache.get('b', k)), ['b-x', 'b-y']);
  t.is(cache.get('c', 'x'), 'c-x');
  cache.set('b', 'z', 'b-z'); // full: a and b hold 2 each; the first of them in the cache's order (a) gives its oldest (z)
  t.deepEqual([cache.get('a', 'z'), cache.get('a', 'x'), cache.get('b', 'z')], [undefined, 'a-x2', 'b-z']);
  cache.delete('b', 'x');
  cache.delete('b', 'nothing');
  t.is(cache.size, 4);
  t.is(cache.get('b', 'x'), undefined);
});
