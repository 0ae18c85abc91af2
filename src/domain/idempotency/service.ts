// BT-IDEMPOTENCY-KEY: a POST retried with the same key and body gets the first answer again, for 24 hours, instead
// of creating a second resource. The first request claims the key with a create-if-absent marker, so concurrent
// duplicates cannot both run; the stored answer is encrypted (it may hold a new key or token data).
//
// What is kept is bounded for etcd's space (docs/security.md, "etcd space"): without bounds one tenant filled the 2 GiB
// quota in 3.6-5 minutes of small answers (1.4-2.0 KB of etcd each) at its 5,000 requests/s, or with 1,800 reactor
// updates of 1.2 MB answers. A
// request with a new key is refused before it runs once the tenant has `keysPerTenant` answers kept, so nothing is
// made without its answer kept; an answer over `answerMaxBytes` is sent but kept only as a marker, and replays of it
// are refused (409 TV_IDEMPOTENCY_ANSWER_NOT_KEPT): a retry never runs the request a second time.
//
// Replays are scoped to who may see the answer. Keys are claimed per application, and every key of an application
// (and every browser holding a public key) is the same application: an answer that carries a credential minted for
// its caller (a session key, an application key, a webhook's signing secret: `credential` routes) is replayed only to
// the exact credential that made the request (the same application key, session or operator). A public key is shared
// by every browser, so its credential answers are never kept: a reuse of the idempotency key is refused 409
// TV_IDEMPOTENCY_ANSWER_NOT_KEPT, and is not run again either.
import { createHash } from 'node:crypto';
import type { TenantPrincipal } from '../../auth/principal.js';
import { actorId, rightsOf } from '../../auth/principal.js';
import { SETTINGS } from '../../config/config.js';
import { Errors } from '../../errors/registry.js';
import { keys } from '../../store/keys.js';
import type { Store } from '../../store/store.js';
import type { DataCipher } from '../tokens/records.js';
import { encode, decode } from '../../store/codec.js';
import { TenantLimit, type TenantLimitsSource } from '../tenant-limits.js';

/** How long a finished request's answer is replayed. */
const TTL_SECONDS = 24 * 3600;
/**
 * How long a claim whose request never finished (its process was killed, or etcd failed under it and the claim could
 * not be deleted) holds the key: retries get 409 "still in progress" until then, and then run. Well above the longest
 * a write route can take (etcd deadlines and a reactor's compile check, bounded by their timeouts), so a live request
 * never loses its claim.
 */
export const PENDING_SECONDS = 300;

export interface Answer {
  status: number;
  body: unknown;
}

interface StoredAnswer {
  request: string;
  /**
   * rightsOf the caller that made the request. Absent in answers stored by earlier versions: those replay as they did
   * (for the 24 hours they live), so that a retry across an upgrade gets its answer rather than a 409 it cannot act on.
   */
  rights?: string;
  /**
   * For a credential answer: a hash of the exact credential that made the request (credentialHolder), the only one
   * it is replayed to. Credential answers stored by earlier versions have none and are not replayed.
   */
  holder?: string;
  /**
   * 'unkept': done, but its answer (`bytes` long) was over the size limit; earlier versions replay it as pending.
   * 'withheld': done, but its answer carries a credential and its caller is not one credential (a public key).
   */
  state: 'pending' | 'done' | 'unkept' | 'withheld';
  sealed?: string;
  bytes?: number;
}

export interface IdempotencyLimits {
  /** Largest answer (JSON bytes) kept for replays; 0: any. */
  answerMaxBytes: number;
  /** Keys one tenant may have kept (answers, unkept markers and claims); 0: no limit. */
  keysPerTenant: number;
  /** The tenants' own limits, which replace keysPerTenant for them. */
  tenantLimits?: TenantLimitsSource;
}

export class IdempotencyService {
  private readonly limit: TenantLimit;

  constructor(
    private readonly store: Store,
    private readonly cipher: DataCipher,
    private readonly pendingSeconds = PENDING_SECONDS,
    private readonly limits: IdempotencyLimits = { answerMaxBytes: 0, keysPerTenant: 0 },
  ) {
    this.limit = new TenantLimit(
      store,
      'idempotencyKeys',
      limits.keysPerTenant,
      (tenantId) => keys.idempotency(tenantId, ''),
      limits.tenantLimits,
    );
  }

  /** Runs `handle` once per (caller, idempotency key); repeats replay its answer. Without a key it just runs. */
  async run(
    principal: TenantPrincipal,
    idempotencyKey: string | undefined,
    request: { route: string; body: unknown; credential?: boolean },
    handle: () => Promise<Answer>,
  ): Promise<Answer> {
    if (idempotencyKey === undefined) return handle();
    if (idempotencyKey.length === 0 || idempotencyKey.length > 255) {
      throw new Errors.InvalidHeader({ errors: { 'BT-IDEMPOTENCY-KEY': ['must be 1 to 255 characters'] } });
    }
    const tenantId = principal.tenantId;
    const hash = sha256(`${actorId(principal)}\n${request.route}\n${idempotencyKey}`);
    const key = keys.idempotency(tenantId, hash);
    const requestHash = sha256(JSON.stringify(request.body ?? null));
    const rights = rightsOf(principal);
    const credential = request.credential === true;
    const holder = credential ? credentialHolder(principal) : undefined;
    const scope: Scope = { rights, idempotencyKey, credential, holder };

    try {
      await this.limit.assertRoomFor(tenantId);
    } catch (error) {
      // Only new keys are refused: a retry of a request whose answer is kept still gets it.
      if (await this.store.get(key)) return this.replay(tenantId, key, requestHash, scope);
      throw error;
    }
    const claimed = await this.store.create(
      key,
      encode('idempotency', { request: requestHash, rights, state: 'pending' } satisfies StoredAnswer),
      { ttlSeconds: this.pendingSeconds },
    );
    if (!claimed) return this.replay(tenantId, key, requestHash, scope);

    let answer: Answer;
    try {
      answer = await handle();
    } catch (error) {
      // A failed request leaves nothing to replay: the caller may retry it with the same key. The answer is the
      // request's own error whatever the delete does; a claim that could not be deleted expires after pendingSeconds.
      // When the store is what failed, the delete is not waited for: it would cost the caller a second etcd deadline.
      const released = this.store.delete(key).catch(() => false);
      if (!(error instanceof Errors.StoreUnavailable)) await released;
      throw error;
    }
    const json = JSON.stringify(answer);
    const bytes = Buffer.byteLength(json);
    const stored: StoredAnswer =
      scope.credential && holder === undefined
        ? { request: requestHash, rights, state: 'withheld' }
        : this.limits.answerMaxBytes > 0 && bytes > this.limits.answerMaxBytes
          ? { request: requestHash, rights, state: 'unkept', bytes }
          : {
              request: requestHash,
              rights,
              ...(holder !== undefined ? { holder } : {}),
              state: 'done',
              sealed: await this.cipher.encrypt(tenantId, `idempotency:${tenantId}:${hash}`, json),
            };
    await this.store.put(key, encode('idempotency', stored), { ttlSeconds: TTL_SECONDS });
    return answer;
  }

  private async replay(tenantId: string, key: string, requestHash: string, scope: Scope): Promise<Answer> {
    const entry = await this.store.get(key);
    if (!entry) throw new Errors.Conflict('A request with this BT-IDEMPOTENCY-KEY just failed or expired; retry.');
    const stored = decode<StoredAnswer>('idempotency', entry.value);
    if (stored.request !== requestHash) throw new Errors.IdempotencyConflict();
    if (stored.rights !== undefined && stored.rights !== scope.rights) {
      throw new Errors.IdempotencyConflict(
        "The key's rights changed since this BT-IDEMPOTENCY-KEY was first used, so its answer is not replayed; send the request with a new BT-IDEMPOTENCY-KEY.",
      );
    }
    if (stored.state === 'unkept') {
      throw new Errors.IdempotencyAnswerNotKept(
        `The request with this BT-IDEMPOTENCY-KEY succeeded, but its answer (${stored.bytes} bytes) was larger than ${SETTINGS.idempotencyAnswerMaxBytes.env} = ${this.limits.answerMaxBytes} and was not kept; it is not run again: read what it made or changed instead.`,
      );
    }
    if (
      stored.state === 'withheld' ||
      (scope.credential && stored.state === 'done' && stored.holder !== scope.holder)
    ) {
      // Not "a different request": the caller may be another browser with the same public key, which must learn
      // neither the credential nor anything else of the first request.
      throw new Errors.IdempotencyAnswerNotKept(
        `BT-IDEMPOTENCY-KEY ${JSON.stringify(scope.idempotencyKey)} was already used for this request, and its answer carries a credential, which is replayed only to the exact key that made the request (never to a public key, which every browser shares); it is not run again: send the request with a new BT-IDEMPOTENCY-KEY.`,
      );
    }
    if (stored.state === 'pending' || !stored.sealed) {
      throw new Errors.Conflict('A request with this BT-IDEMPOTENCY-KEY is still in progress; retry shortly.');
    }
    const hash = key.slice(key.lastIndexOf('/') + 1);
    const plaintext = await this.cipher.decrypt(tenantId, `idempotency:${tenantId}:${hash}`, stored.sealed);
    return JSON.parse(plaintext.toString('utf8')) as Answer;
  }
}

interface Scope {
  rights: string;
  idempotencyKey: string;
  credential: boolean;
  holder?: string;
}

/**
 * The one credential a credential answer may be replayed to: a session, an application key of a private or
 * management application, or the operator. A public key is held by every browser of the application, so none.
 */
function credentialHolder(principal: TenantPrincipal): string | undefined {
  if (principal.operator) return sha256('operator');
  if (principal.sessionId !== undefined) return sha256(`session\n${principal.sessionId}`);
  if (principal.applicationType === 'public' || principal.keyId === undefined) return undefined;
  return sha256(`key\n${principal.keyId}`);
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
