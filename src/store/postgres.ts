// The Store on PostgreSQL (work in progress: being written in this change).
import { Errors } from '../errors/registry.js';
import type { StoreSpec } from './open.js';
import type { Store } from './store.js';

export type PostgresStoreOptions = Omit<Extract<StoreSpec, { kind: 'postgres' }>, 'kind'>;

const unavailable = async (): Promise<never> => {
  throw new Errors.StoreUnavailable();
};

export class PostgresStore implements Store {
  constructor(readonly options: PostgresStoreOptions) {}
  get = unavailable;
  getMany = unavailable;
  put = unavailable;
  create = unavailable;
  compareAndSwap = unavailable;
  delete = unavailable;
  compareAndDelete = unavailable;
  range = unavailable;
  countedRange = unavailable;
  count = unavailable;
  deletePrefix = unavailable;
  deletePrefixInPieces = unavailable;
  txn = unavailable;
  commit = unavailable;
  watch = unavailable;
  ping = unavailable;
  async close(): Promise<void> {}
}
