// A change written in the same etcd transaction as the audit entry of the request that makes it, when the caller can
// offer that (the HTTP routes' audit trail, `auditWith`), and otherwise alone. Together they are one round trip and
// one transaction instead of two, and the change and its entry commit together or not at all: for token creates, and
// for the controller's reactor writes, where thousands of Reactors applied at once would otherwise pay each round trip
// alone (one request at a time per controller worker).
import type { ChangeWrites } from '../audit/chain.js';
import type { Store } from '../store/store.js';

export type { ChangeWrites };

/**
 * Commits the change's compares and writes together with the request's audit entry about `entityId`: true once both
 * are stored, false when neither was written (then the change is written alone, and its entry recorded after).
 */
export type CommitWithEntry = (entityId: string, writes: ChangeWrites) => Promise<boolean>;

/** How a change may be written: with the request's audit entry, when the caller offers it. */
export interface ChangeOptions {
  commitWithEntry?: CommitWithEntry;
}

/**
 * Writes the change with the request's entry, or (when that is not offered, or that transaction failed) alone: true
 * once it is written, false when its own compares fail, as `Store.txn`.
 */
export async function commitChange(
  store: Store,
  entityId: string,
  txn: ChangeWrites,
  options: ChangeOptions = {},
): Promise<boolean> {
  if (options.commitWithEntry && (await options.commitWithEntry(entityId, txn))) return true;
  return store.txn(txn);
}
