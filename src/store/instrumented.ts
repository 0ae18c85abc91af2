// Decorates a Store with latency metrics per operation and outcome, so the store's share of request time shows up.
import type { Metrics } from '../observability/metrics.js';
import type { Store } from './store.js';

const TIMED = [
  'get',
  'getMany',
  'put',
  'create',
  'compareAndSwap',
  'delete',
  'compareAndDelete',
  'range',
  'countedRange',
  'count',
  'deletePrefix',
  'deletePrefixInPieces',
  'txn',
  'commit',
  'ping',
] as const;

export function instrumentStore(store: Store, metrics: Metrics): Store {
  const timed: Partial<Store> = {};
  for (const operation of TIMED) {
    const original = (store[operation] as (...args: unknown[]) => Promise<unknown>).bind(store);
    (timed as Record<string, unknown>)[operation] = async (...args: unknown[]) => {
      const end = metrics.storeDuration.startTimer({ operation });
      try {
        const result = await original(...args);
        end({ outcome: 'ok' });
        return result;
      } catch (error) {
        end({ outcome: 'error' });
        throw error;
      }
    };
  }
  return {
    ...(timed as Pick<Store, (typeof TIMED)[number]>),
    watch: store.watch.bind(store),
    close: store.close.bind(store),
  };
}
