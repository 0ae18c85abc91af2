// Tells listeners of the keys this process writes, as each write settles and before its caller goes on: a watched
// cache (watched-cache.ts) drops a key the process has just changed at once rather than when its watch event comes a
// few milliseconds later, so a process never serves what it has itself just changed or deleted, whichever code wrote
// it. Told also when a write failed or a compare refused it: a failed write may still have been applied, and
// dropping a key costs only one read.
import type { Store, Txn, WriteListener } from './store.js';

export function withWriteListeners(store: Store): Store {
  const listeners = new Set<WriteListener>();
  const tell = (key: string, prefix = false) => {
    for (const listener of listeners) listener(key, prefix);
  };
  const tellTxn = (txn: Txn) => {
    for (const op of txn.success) {
      if (op.type === 'deletePrefix') tell(op.prefix, true);
      else tell(op.key);
    }
  };
  const settled = async <R>(write: Promise<R>, told: () => void): Promise<R> => {
    try {
      return await write;
    } finally {
      told();
    }
  };
  return {
    get: store.get.bind(store),
    getMany: store.getMany.bind(store),
    range: store.range.bind(store),
    countedRange: store.countedRange.bind(store),
    count: store.count.bind(store),
    watch: store.watch.bind(store),
    ping: store.ping.bind(store),
    close: store.close.bind(store),
    put: (key, value, options) => settled(store.put(key, value, options), () => tell(key)),
    create: (key, value, options) => settled(store.create(key, value, options), () => tell(key)),
    compareAndSwap: (key, expected, value, options) =>
      settled(store.compareAndSwap(key, expected, value, options), () => tell(key)),
    delete: (key) => settled(store.delete(key), () => tell(key)),
    compareAndDelete: (key, expected) => settled(store.compareAndDelete(key, expected), () => tell(key)),
    deletePrefix: (prefix) => settled(store.deletePrefix(prefix), () => tell(prefix, true)),
    deletePrefixInPieces: (prefix, maxKeys) =>
      settled(store.deletePrefixInPieces(prefix, maxKeys), () => tell(prefix, true)),
    txn: (txn) => settled(store.txn(txn), () => tellTxn(txn)),
    commit: (txn) => settled(store.commit(txn), () => tellTxn(txn)),
    onWrite: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
