// "The store is full" for every Store implementation: an answer that lasts until the operator makes room (507
// TV_STORE_FULL), not an outage that passes (503 TV_STORE_UNAVAILABLE, "retry later"). etcd past its quota and
// PostgreSQL out of disk both still answer reads; they refuse what would add data.
import { Errors } from '../errors/registry.js';

/**
 * etcd's refusal past --quota-backend-bytes (ErrGRPCNoSpace, gRPC RESOURCE_EXHAUSTED), and every write after it while
 * its NOSPACE alarm is armed, even once compaction made room. etcd3 has no class of its own for it: it arrives as
 * GRPCResourceExhastedError, whose code etcd also uses for "too many requests", so the message tells them apart.
 */
export function isEtcdNoSpace(error: unknown): boolean {
  return error instanceof Error && error.message.includes('etcdserver: mvcc: database space exceeded');
}

/**
 * PostgreSQL's SQLSTATE 53100 disk_full (pg's DatabaseError carries it as `code`). Not the rest of class 53
 * (insufficient resources): 53200 out_of_memory and 53300 too_many_connections pass, and 53400
 * configuration_limit_exceeded is a setting, not a full disk.
 */
export function isPostgresDiskFull(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '53100';
}

const ETCD_DETAIL =
  "The store is full: etcd has reached its quota (--quota-backend-bytes, the chart's etcd.quotaBackendBytes) and refuses new data. The operator raises the quota, or compacts and defragments etcd, then disarms its NOSPACE alarm (etcdctl alarm disarm). Retrying does not help before then.";

const POSTGRES_DETAIL =
  'The store is full: PostgreSQL is out of disk space (SQLSTATE 53100 disk_full) and refuses new data. The operator frees or grows the disk of its data directory. Retrying does not help before then.';

/** StoreFull (its cause kept) when the error is a full store's refusal; otherwise the error as it was. */
export function storeFullOr(error: unknown): unknown {
  if (error instanceof Errors.StoreFull) return error;
  if (isEtcdNoSpace(error)) return new Errors.StoreFull({ detail: ETCD_DETAIL, cause: error });
  if (isPostgresDiskFull(error)) return new Errors.StoreFull({ detail: POSTGRES_DETAIL, cause: error });
  return error;
}
