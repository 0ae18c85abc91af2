// Client-side encryption keys (Basis Theory's /keys): X25519 key pairs a tenant creates so that a browser or app can
// encrypt token data to the vault (a compact JWE, ECDH-ES + A256GCM, `kid` = the key's id) before it reaches the
// tenant's own servers, which pass it on as `encrypted` in POST /tokens or /token-intents. The public key is shown once,
// at creation, in Basis Theory's form: the 32 raw key bytes, base64, between PEM armour lines (also as a JWK). The
// private key is sealed with the tenant's data key (src/crypto/envelope.ts), bound to the tenant and key id, and never
// leaves this module: not in a response, not in a log line.
//
// A key expires (expires_at: at most TOKENVAULT_CLIENT_KEY_MAX_TTL_SECONDS away; default
// TOKENVAULT_CLIENT_KEY_DEFAULT_TTL_SECONDS). An expired key decrypts nothing (400 TV_CLIENT_KEY_EXPIRED) and stays
// listed for EXPIRED_RETENTION_SECONDS, on an etcd lease, so a late caller hears "expired" rather than "unknown"; then
// it is gone. The keys a tenant keeps, expired ones included, are capped (TOKENVAULT_CLIENT_KEYS_PER_TENANT): a create
// that would pass the cap removes the longest-expired keys in its own transaction, and with none expired it is
// refused, so the records every create and list reads stay bounded by the cap (counting unexpired keys alone let 100
// keys expiring at once be kept under a cap of 20, issue 35). A key lives at least TOKENVAULT_CLIENT_KEY_MIN_TTL_SECONDS.
// Each create rewrites one guard key in the same transaction, compared by revision, so concurrent creates cannot both
// take the last place.
import { createPrivateKey, generateKeyPairSync, randomUUID, type KeyObject } from 'node:crypto';
import { compactDecrypt, decodeProtectedHeader, errors as joseErrors } from 'jose';
import { actorId, type TenantPrincipal } from '../../auth/principal.js';
import { Errors } from '../../errors/registry.js';
import { encode } from '../../store/codec.js';
import { keys } from '../../store/keys.js';
import { getRecord, listRecords, secondsUntil } from '../../store/records.js';
import type { Store } from '../../store/store.js';
import { scanBytes } from '../../validation/json-depth.js';

/** Expired keys stay (answering "expired") this long, then their lease ends. */
export const EXPIRED_RETENTION_SECONDS = 7 * 24 * 3600;

/** What clients may use: ECDH-ES (direct or key-wrapped) with the X25519 key; AES-GCM content encryption. */
const KEY_MANAGEMENT_ALGORITHMS = ['ECDH-ES', 'ECDH-ES+A128KW', 'ECDH-ES+A256KW'];
const CONTENT_ENCRYPTION_ALGORITHMS = ['A256GCM', 'A128GCM'];

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const CREATE_ATTEMPTS = 5;

/** Encrypts and decrypts with the tenant's data key (src/crypto/envelope.ts). */
export interface KeyCipher {
  encrypt(tenantId: string, aad: string, plaintext: string | Buffer): Promise<string>;
  decrypt(tenantId: string, aad: string, ciphertext: string): Promise<Buffer>;
}

export interface ClientKeyOptions {
  /**
   * Keys one tenant keeps, expired ones included (TOKENVAULT_CLIENT_KEYS_PER_TENANT): unexpired ones up to it, and the
   * expired ones while there is room.
   */
  perTenant: number;
  /** Lifetime of a key created without expires_at (TOKENVAULT_CLIENT_KEY_DEFAULT_TTL_SECONDS). */
  defaultTtlSeconds: number;
  /** Shortest lifetime a key may be given (TOKENVAULT_CLIENT_KEY_MIN_TTL_SECONDS). */
  minTtlSeconds: number;
  /** Longest lifetime a key may be given (TOKENVAULT_CLIENT_KEY_MAX_TTL_SECONDS). */
  maxTtlSeconds: number;
  /** Deepest JSON nesting of decrypted data, as of a request body (TOKENVAULT_JSON_MAX_DEPTH). */
  jsonMaxDepth: number;
}

interface ClientKeyRecord {
  id: string;
  tenant_id: string;
  created_by: string;
  created_at: string;
  expires_at: string;
  /** The X25519 public key, 32 bytes, base64url (a JWK's `x`). */
  public_x: string;
  /** The private key (its JWK `d`), sealed with the tenant's data key. */
  sealed_private: string;
}

/** GET /keys and /keys/{id}: what a key is, never a key. `key_id` is the node SDK's name of `id`. */
export interface ClientKeyMetadata {
  id: string;
  key_id: string;
  created_by: string;
  created_at: string;
  expires_at: string;
}

/** POST /keys: the metadata and the public key (shown only here). */
export interface CreatedClientKey extends ClientKeyMetadata {
  public_key_pem: string;
  public_key_jwk: { kty: 'OKP'; crv: 'X25519'; x: string; kid: string; use: 'enc'; alg: 'ECDH-ES' };
}

export class ClientKeyService {
  constructor(
    private readonly store: Store,
    private readonly cipher: KeyCipher,
    private readonly options: ClientKeyOptions,
  ) {}

  async create(principal: TenantPrincipal, body: { expires_at?: string }): Promise<CreatedClientKey> {
    const tenantId = principal.tenantId;
    const now = Date.now();
    const expiresAt = this.expiry(body.expires_at, now);
    const id = randomUUID();
    const { publicKey, privateKey } = generateKeyPairSync('x25519');
    const x = publicKey.export({ format: 'jwk' }).x!;
    const d = privateKey.export({ format: 'jwk' }).d!;
    const record: ClientKeyRecord = {
      id,
      tenant_id: tenantId,
      created_by: actorId(principal),
      created_at: new Date(now).toISOString(),
      expires_at: expiresAt,
      public_x: x,
      sealed_private: await this.cipher.encrypt(tenantId, aad(tenantId, id), d),
    };
    const ttlSeconds = secondsUntil(expiresAt, now) + EXPIRED_RETENTION_SECONDS;
    for (let attempt = 0; attempt < CREATE_ATTEMPTS; attempt++) {
      const guard = await this.store.get(keys.clientKeysGuard(tenantId));
      const kept = await this.records(tenantId);
      const at = Date.now();
      const expired = kept
        .filter((k) => Date.parse(k.expires_at) <= at)
        .sort((a, b) => a.expires_at.localeCompare(b.expires_at));
      // Room for one more within the cap, made by removing the longest-expired keys; refused exactly when the
      // unexpired keys alone fill the cap. More than one goes only where the cap was lowered or the records predate it.
      const excess = kept.length + 1 - this.options.perTenant;
      if (excess > expired.length) {
        throw new Errors.ClientKeyLimit(
          `The tenant has ${kept.length - expired.length} unexpired client encryption keys, as many as allowed (TOKENVAULT_CLIENT_KEYS_PER_TENANT = ${this.options.perTenant}); delete one first.`,
        );
      }
      const pruned = excess > 0 ? expired.slice(0, excess) : [];
      const written = await this.store.txn({
        compare: [
          { key: keys.clientKeysGuard(tenantId), modRevision: guard?.modRevision ?? 0 },
          { key: keys.clientKey(tenantId, id), modRevision: 0 },
        ],
        success: [
          { type: 'put', key: keys.clientKeysGuard(tenantId), value: record.created_at },
          { type: 'put', key: keys.clientKey(tenantId, id), value: encode('client-key', record), ttlSeconds },
          ...pruned.map((k) => ({ type: 'delete' as const, key: keys.clientKey(tenantId, k.id) })),
        ],
      });
      if (written) {
        const metadata = toMetadata(record);
        return {
          ...metadata,
          public_key_pem: `-----BEGIN PUBLIC KEY-----\n${Buffer.from(x, 'base64url').toString('base64')}\n-----END PUBLIC KEY-----`,
          public_key_jwk: { kty: 'OKP', crv: 'X25519', x, kid: id, use: 'enc', alg: 'ECDH-ES' },
        };
      }
    }
    throw new Errors.Conflict('Client encryption keys of the tenant changed concurrently; retry.');
  }

  async list(tenantId: string): Promise<ClientKeyMetadata[]> {
    const records = await this.records(tenantId);
    return records.sort((a, b) => a.created_at.localeCompare(b.created_at)).map(toMetadata);
  }

  async get(tenantId: string, id: string): Promise<ClientKeyMetadata> {
    const found = await getRecord<ClientKeyRecord>(this.store, 'client-key', keys.clientKey(tenantId, id));
    if (!found) throw new Errors.NotFound('Client encryption key not found.');
    return toMetadata(found.value);
  }

  async delete(tenantId: string, id: string): Promise<void> {
    if (!(await this.store.delete(keys.clientKey(tenantId, id))))
      throw new Errors.NotFound('Client encryption key not found.');
  }

  /**
   * A create body (POST /tokens, /token-intents) with its `encrypted` JWE replaced by the `data` it decrypts to; a body
   * without `encrypted` as it is. The result is then validated exactly as a body that sent `data`.
   */
  async withData(tenantId: string, body: unknown): Promise<unknown> {
    if (!ClientKeyService.isEncrypted(body)) return body;
    const { encrypted, ...rest } = body as Record<string, unknown>;
    if ('data' in rest)
      throw new Errors.InvalidBody({
        errors: { data: ['give either data or encrypted (a JWE of the data), not both'] },
      });
    if ('token_intent_id' in rest)
      throw new Errors.InvalidBody({ errors: { encrypted: ['the data comes from the token intent; omit encrypted'] } });
    return { ...rest, data: await this.decrypt(tenantId, 'encrypted', encrypted) };
  }

  /** Whether a create body carries `encrypted`: its data is then judged as data the caller may not have seen. */
  static isEncrypted(body: unknown): boolean {
    return body !== null && typeof body === 'object' && !Array.isArray(body) && 'encrypted' in body;
  }

  /**
   * The data a compact JWE carries, decrypted with the tenant's key its `kid` names, parsed as JSON. Every way it can
   * fail is a 400 naming the field: malformed, an algorithm other than ECDH-ES/AES-GCM, an unknown (or deleted, or
   * another tenant's) kid, an expired key, altered ciphertext, a payload that is not JSON or nests too deep.
   */
  async decrypt(tenantId: string, field: string, jwe: unknown): Promise<unknown> {
    const invalid = (message: string) => new Errors.InvalidEncrypted({ errors: { [field]: [message] } });
    if (typeof jwe !== 'string' || jwe.split('.').length !== 5)
      throw invalid('must be a compact JWE (five base64url parts)');
    let header: ReturnType<typeof decodeProtectedHeader>;
    try {
      header = decodeProtectedHeader(jwe);
    } catch {
      throw invalid('has a malformed protected header');
    }
    // A compressed JWE could inflate far beyond the body limit that bounds the JWE itself.
    if (header.zip !== undefined) throw invalid('must not be compressed (`zip`)');
    const { kid } = header;
    if (typeof kid !== 'string' || !UUID.test(kid))
      throw invalid("must name a client encryption key's id as `kid` in its protected header");
    const found = await getRecord<ClientKeyRecord>(this.store, 'client-key', keys.clientKey(tenantId, kid));
    if (!found) throw invalid(`names the key ${kid}, which this tenant does not have (deleted, or never created)`);
    const record = found.value;
    if (Date.parse(record.expires_at) <= Date.now()) {
      throw new Errors.ClientKeyExpired({
        detail: `The client encryption key ${kid} expired at ${record.expires_at}; create a new key and encrypt again.`,
        errors: { [field]: [`names the key ${kid}, which expired at ${record.expires_at}`] },
      });
    }
    const key = await this.privateKey(record);
    let plaintext: Uint8Array;
    try {
      ({ plaintext } = await compactDecrypt(jwe, key, {
        keyManagementAlgorithms: KEY_MANAGEMENT_ALGORITHMS,
        contentEncryptionAlgorithms: CONTENT_ENCRYPTION_ALGORITHMS,
        maxDecompressedLength: 0,
      }));
    } catch (error) {
      if (error instanceof joseErrors.JOSEAlgNotAllowed || error instanceof joseErrors.JOSENotSupported)
        throw invalid(
          `must use ECDH-ES (${KEY_MANAGEMENT_ALGORITHMS.join(', ')}) with ${CONTENT_ENCRYPTION_ALGORITHMS.join(' or ')}`,
        );
      throw invalid('could not be decrypted with the key it names (altered, or encrypted to another key)');
    }
    const text = Buffer.from(plaintext).toString('utf8');
    // Checked exactly as the same body in the clear (http/middleware/json-body.ts), in one pass as there: its depth, and
    // a number JSON.parse would alter is refused, not stored altered. The answer names the problem, never the number.
    const problem = scanBytes(plaintext, this.options.jsonMaxDepth, Infinity, true);
    if (problem === 'too-deep')
      throw invalid(
        `decrypts to JSON nested deeper than allowed (TOKENVAULT_JSON_MAX_DEPTH = ${this.options.jsonMaxDepth})`,
      );
    if (problem === 'inexact-number')
      throw invalid(
        'decrypts to JSON with a number that cannot be held exactly (an integer beyond 2^53 - 1, a value beyond a double, or one so small a double holds it as 0): send it as a string',
      );
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw invalid("must decrypt to JSON (the token's data)");
    }
  }

  private async privateKey(record: ClientKeyRecord): Promise<KeyObject> {
    const d = (
      await this.cipher.decrypt(record.tenant_id, aad(record.tenant_id, record.id), record.sealed_private)
    ).toString('utf8');
    return createPrivateKey({ key: { kty: 'OKP', crv: 'X25519', x: record.public_x, d }, format: 'jwk' });
  }

  private async records(tenantId: string): Promise<ClientKeyRecord[]> {
    return listRecords<ClientKeyRecord>(this.store, 'client-key', keys.clientKeys(tenantId));
  }

  private expiry(given: string | undefined, now: number): string {
    if (given === undefined) return new Date(now + this.options.defaultTtlSeconds * 1000).toISOString();
    const at = Date.parse(given);
    const problem = (message: string) => new Errors.InvalidBody({ errors: { expires_at: [message] } });
    if (Number.isNaN(at)) throw problem('must be a date-time (ISO 8601)');
    if (at <= now) throw problem('must be in the future');
    // A key that expires at once would only churn the records the cap keeps (each create removes an expired one).
    if (at < now + this.options.minTtlSeconds * 1000)
      throw problem(
        `must be at least ${this.options.minTtlSeconds} seconds away (TOKENVAULT_CLIENT_KEY_MIN_TTL_SECONDS)`,
      );
    if (at > now + this.options.maxTtlSeconds * 1000)
      throw problem(
        `must be at most ${this.options.maxTtlSeconds} seconds away (TOKENVAULT_CLIENT_KEY_MAX_TTL_SECONDS)`,
      );
    return new Date(at).toISOString();
  }
}

function aad(tenantId: string, id: string): string {
  return `client-key:${tenantId}:${id}`;
}

function toMetadata(record: ClientKeyRecord): ClientKeyMetadata {
  return {
    id: record.id,
    key_id: record.id,
    created_by: record.created_by,
    created_at: record.created_at,
    expires_at: record.expires_at,
  };
}
