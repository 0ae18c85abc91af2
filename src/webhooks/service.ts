// Webhooks of a tenant: CRUD, and the publisher the token and reactor services call while they write a change.
//
// Next to the records, each tenant has one summary key (ids, statuses and events of its webhooks). Every webhook write
// rewrites it in the same transaction, guarded by its revision, which also makes the per-tenant limit exact under
// concurrent creates. A change that may cause events reads only the summary, from a per-process cache kept honest by a
// watch, so a tenant without webhooks pays no store round trip; when some webhook listens, the change's own
// transaction also writes one entry per listening webhook to the tenant's outbox, and the tenant's mark that it has
// deliveries waiting (./dispatcher.ts sends them).
//
// The outbox is bounded per tenant (TOKENVAULT_WEBHOOK_OUTBOX_PER_TENANT) for etcd's space, which all tenants share:
// with its receiver down, a tenant's entries stay for all their attempts (about 1.5 hours by default), and at its write
// rate one tenant would fill the quota (docs/security.md, "etcd space"). Past the bound, the tenant's new events are
// dropped, counted and logged, and the change is written all the same: webhooks are notifications, and a token create
// that failed because a receiver is down would turn the receiver's outage into the tenant's. The tenant's outbox is
// counted as TenantLimit counts records (a count-only range, at most once a second per tenant and process, this
// process's own entries added in between), so a full outbox costs no count per event.
import { LRUCache } from 'lru-cache';
import { randomUUID } from 'node:crypto';
import { actorId, type TenantPrincipal } from '../auth/principal.js';
import { SETTINGS } from '../config/config.js';
import { commitChange, type ChangeOptions } from '../domain/audited-commit.js';
import type { TenantLimitsSource } from '../domain/tenant-limits.js';
import { Errors } from '../errors/registry.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { decode, encode } from '../store/codec.js';
import { keys } from '../store/keys.js';
import { getRecord, listRecords } from '../store/records.js';
import type { Store, TxnOp } from '../store/store.js';
import { PrefixWatchedCache } from '../store/watched-cache.js';
import { isEventType, normalizeEventType, type EventData, type EventType, type WebhookEvent } from './events.js';
import type { WebhookBody } from './schema.js';
import { generateSigningSecret } from './signature.js';

/** Encrypts and decrypts with the tenant's data key (src/crypto/envelope.ts). */
export interface SecretCipher {
  encrypt(tenantId: string, aad: string, plaintext: string | Buffer): Promise<string>;
  decrypt(tenantId: string, aad: string, ciphertext: string): Promise<Buffer>;
}

export type WebhookStatus = 'enabled' | 'disabled';

export interface WebhookRecord {
  id: string;
  tenant_id: string;
  name: string;
  url: string;
  notify_email?: string;
  events: EventType[];
  status: WebhookStatus;
  /** The signing secret, encrypted with the tenant's data key; shown once, at creation. */
  sealed_secret: string;
  created_at: string;
  created_by: string;
  modified_at?: string;
  modified_by?: string;
}

export interface Webhook {
  id: string;
  tenant_id: string;
  status: WebhookStatus;
  name: string;
  url: string;
  notify_email?: string;
  events: EventType[];
  created_by: string;
  created_at: string;
  modified_by?: string;
  modified_at?: string;
}

interface Subscriptions {
  webhooks: Array<{ id: string; status: WebhookStatus; events: EventType[] }>;
}

/** One outbox entry: one event for one webhook. */
export interface Delivery {
  id: string;
  tenant_id: string;
  webhook_id: string;
  event: WebhookEvent;
  /** Attempts made so far. */
  attempts: number;
}

/** What the token and reactor services call: the outbox writes to add to the transaction of a change. */
export interface EventSink {
  ops(tenantId: string, type: EventType, data: EventData): Promise<TxnOp[]>;
}

export interface WebhookServiceOptions {
  /** Webhooks one tenant may have (TOKENVAULT_WEBHOOKS_PER_TENANT). */
  maxPerTenant: number;
  /** Checks a URL against the outbound destination policy; throws TV_DESTINATION_REFUSED. */
  checkDestination: (url: string) => Promise<void>;
  cacheSeconds?: number;
  /** Deliveries one tenant's outbox may hold before its new events are dropped (TOKENVAULT_WEBHOOK_OUTBOX_PER_TENANT); 0: no limit. */
  outboxPerTenant?: number;
  /** The tenants' own limits (Tenant spec.limits.webhookOutbox), which replace outboxPerTenant for them. */
  tenantLimits?: TenantLimitsSource;
  logger?: Logger;
  metrics?: Metrics;
}

const EMPTY: Subscriptions = { webhooks: [] };
/** How long a count of a tenant's outbox stands in for a new one (with this process's entries added). */
const OUTBOX_RECOUNT_MS = 1_000;

export class WebhookService implements EventSink {
  private readonly subscriptions: PrefixWatchedCache<Subscriptions>;
  /** Delivery targets (the record and its opened secret), watched per tenant: a change applies to the next attempt. */
  private readonly targets: PrefixWatchedCache<{ record: WebhookRecord; secret: string }>;
  /** Per tenant: its outbox's entries as last counted (for a second), plus the entries this process wrote since. */
  private readonly outboxes = new LRUCache<string, { count: number }>({ max: 10_000, ttl: OUTBOX_RECOUNT_MS });
  /** Per tenant: when its last drop was logged (one warning a minute; the metric counts each). */
  private readonly dropLogged = new LRUCache<string, true>({ max: 10_000, ttl: 60_000 });

  constructor(
    private readonly store: Store,
    private readonly cipher: SecretCipher,
    private readonly options: WebhookServiceOptions,
  ) {
    this.subscriptions = new PrefixWatchedCache(store, { max: 10_000, ttlSeconds: options.cacheSeconds ?? 300 });
    this.targets = new PrefixWatchedCache(store, { max: 10_000, ttlSeconds: options.cacheSeconds ?? 300 });
  }

  async stop(): Promise<void> {
    await Promise.all([this.subscriptions.stop(), this.targets.stop()]);
  }

  /** The new webhook, with its signing secret: the only time the secret is shown. */
  async create(
    principal: TenantPrincipal,
    body: WebhookBody,
    options: ChangeOptions = {},
  ): Promise<Webhook & { signing_secret: string }> {
    const tenantId = principal.tenantId;
    const events = eventTypes(body.events);
    assertMayFeed(principal, 'create a webhook');
    await this.options.checkDestination(body.url);
    const id = randomUUID();
    const secret = generateSigningSecret();
    const record: WebhookRecord = {
      id,
      tenant_id: tenantId,
      name: body.name,
      url: body.url,
      ...(body.notify_email ? { notify_email: body.notify_email } : {}),
      events,
      status: 'enabled',
      sealed_secret: await this.cipher.encrypt(tenantId, secretAad(tenantId, id), secret),
      created_at: new Date().toISOString(),
      created_by: actorId(principal),
    };
    await this.writeWithSummary(tenantId, id, options, (summary) => {
      if (summary.webhooks.length >= this.options.maxPerTenant) {
        throw new Errors.WebhookLimit(
          `The tenant has ${summary.webhooks.length} webhooks, as many as allowed (TOKENVAULT_WEBHOOKS_PER_TENANT = ${this.options.maxPerTenant}); delete one first.`,
        );
      }
      return {
        summary: { webhooks: [...summary.webhooks, { id, status: record.status, events }] },
        ops: [{ type: 'put', key: keys.webhook(tenantId, id), value: encode('webhook', record) }],
        compare: [{ key: keys.webhook(tenantId, id), modRevision: 0 }],
      };
    });
    return { ...toWebhook(record), signing_secret: secret };
  }

  async get(tenantId: string, id: string): Promise<Webhook> {
    return toWebhook((await this.load(tenantId, id)).value);
  }

  /** Every webhook of the tenant (at most TOKENVAULT_WEBHOOKS_PER_TENANT), oldest first. */
  async list(tenantId: string): Promise<{ pagination: { page_size: number }; data: Webhook[] }> {
    const records = await listRecords<WebhookRecord>(this.store, 'webhook', keys.webhooks(tenantId));
    records.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
    return { pagination: { page_size: records.length }, data: records.map(toWebhook) };
  }

  async update(
    principal: TenantPrincipal,
    id: string,
    body: WebhookBody,
    options: ChangeOptions = {},
  ): Promise<Webhook> {
    const tenantId = principal.tenantId;
    const events = eventTypes(body.events);
    const current = await this.load(tenantId, id);
    if (body.url !== current.value.url || events.some((event) => !current.value.events.includes(event))) {
      assertMayFeed(principal, "change a webhook's URL or add events to it");
    }
    if (body.url !== current.value.url) await this.options.checkDestination(body.url);
    const record: WebhookRecord = {
      ...current.value,
      name: body.name,
      url: body.url,
      notify_email: body.notify_email ?? undefined,
      events,
      status: body.status ?? current.value.status,
      modified_at: new Date().toISOString(),
      modified_by: actorId(principal),
    };
    await this.writeWithSummary(tenantId, id, options, (summary) => ({
      summary: {
        webhooks: summary.webhooks.map((w) => (w.id === id ? { id, status: record.status, events } : w)),
      },
      ops: [{ type: 'put', key: keys.webhook(tenantId, id), value: encode('webhook', record) }],
      compare: [{ key: keys.webhook(tenantId, id), modRevision: current.modRevision }],
    }));
    return toWebhook(record);
  }

  async delete(principal: TenantPrincipal, id: string, options: ChangeOptions = {}): Promise<void> {
    const tenantId = principal.tenantId;
    const current = await this.load(tenantId, id);
    await this.writeWithSummary(tenantId, id, options, (summary) => ({
      summary: { webhooks: summary.webhooks.filter((w) => w.id !== id) },
      ops: [{ type: 'delete', key: keys.webhook(tenantId, id) }],
      compare: [{ key: keys.webhook(tenantId, id), modRevision: current.modRevision }],
    }));
  }

  /** The webhook a delivery goes to, with its signing secret; undefined when it was deleted (or its tenant was). */
  async target(tenantId: string, id: string): Promise<{ record: WebhookRecord; secret: string } | undefined> {
    const key = keys.webhook(tenantId, id);
    return this.targets.get(keys.webhooks(tenantId), key, async () => {
      const found = await getRecord<WebhookRecord>(this.store, 'webhook', key);
      if (!found) return undefined;
      const secret = await this.cipher.decrypt(tenantId, secretAad(tenantId, id), found.value.sealed_secret);
      return { record: found.value, secret: secret.toString('utf8') };
    });
  }

  async ops(tenantId: string, type: EventType, data: EventData): Promise<TxnOp[]> {
    const summaryKey = keys.webhookSubscriptions(tenantId);
    const subscriptions =
      (await this.subscriptions.get(summaryKey, summaryKey, async () => {
        const found = await getRecord<Subscriptions>(this.store, 'webhook-subscriptions', summaryKey);
        return found?.value ?? EMPTY;
      })) ?? EMPTY;
    const listening = subscriptions.webhooks.filter((w) => w.status === 'enabled' && w.events.includes(type));
    if (listening.length === 0) return [];
    const bound = await this.outboxBound(tenantId);
    if (!(await this.outboxHasRoom(tenantId, bound.max, listening.length))) {
      this.dropped(tenantId, type, bound);
      return [];
    }
    // One event id for every webhook told of it: a receiver behind several webhooks can still deduplicate.
    const event: WebhookEvent = {
      id: randomUUID(),
      type,
      timestamp: new Date().toISOString(),
      tenant_id: tenantId,
      data,
    };
    const now = Date.now();
    return outboxPuts(
      tenantId,
      now,
      listening.map((webhook) => ({
        id: randomUUID(),
        tenant_id: tenantId,
        webhook_id: webhook.id,
        event,
        attempts: 0,
      })),
    );
  }

  /**
   * Whether the tenant's outbox holds fewer entries than allowed; if so, counts `entries` more in it. An event goes to
   * all its webhooks or none, so the outbox may pass the bound by up to its webhooks less one (and by the entries
   * other processes write within a second of a count).
   */
  private async outboxHasRoom(tenantId: string, max: number, entries: number): Promise<boolean> {
    if (max === 0) return true;
    let outbox = this.outboxes.get(tenantId);
    if (!outbox) {
      outbox = { count: await this.store.count(keys.webhookQueue(tenantId)) };
      this.outboxes.set(tenantId, outbox);
    }
    if (outbox.count >= max) return false;
    outbox.count += entries;
    return true;
  }

  /** The deliveries the tenant's outbox may hold (0: no limit), and where that number was set. */
  private async outboxBound(tenantId: string): Promise<{ max: number; source: string }> {
    const own = (await this.options.tenantLimits?.get(tenantId))?.limits?.webhook_outbox;
    if (own !== undefined) return { max: own, source: "the Tenant's spec.limits.webhookOutbox" };
    return { max: this.options.outboxPerTenant ?? 0, source: SETTINGS.webhookOutboxPerTenant.env };
  }

  private dropped(tenantId: string, type: EventType, bound: { max: number; source: string }): void {
    this.options.metrics?.webhookDropped.inc({ type, reason: 'outbox_full' });
    if (this.dropLogged.has(tenantId)) return;
    this.dropLogged.set(tenantId, true);
    this.options.logger?.warn(
      { tenant: tenantId, type, limit: bound.max },
      `webhook events dropped: the tenant's outbox is full (${bound.source}); its receiver is likely down`,
    );
  }

  private async load(tenantId: string, id: string) {
    const found = await getRecord<WebhookRecord>(this.store, 'webhook', keys.webhook(tenantId, id));
    if (!found) throw new Errors.NotFound('Webhook not found.');
    return found;
  }

  /**
   * Writes a change of the webhook `id` together with the summary it implies (and with the request's audit entry, when
   * offered), retrying when a concurrent write moved the summary.
   */
  private async writeWithSummary(
    tenantId: string,
    id: string,
    options: ChangeOptions,
    change: (summary: Subscriptions) => {
      summary: Subscriptions;
      ops: TxnOp[];
      compare: Array<{ key: string; modRevision: number }>;
    },
  ): Promise<void> {
    const summaryKey = keys.webhookSubscriptions(tenantId);
    for (let attempt = 0; attempt < 5; attempt++) {
      const entry = await this.store.get(summaryKey);
      const summary = entry ? decode<Subscriptions>('webhook-subscriptions', entry.value) : EMPTY;
      const next = change(summary);
      const written = await commitChange(
        this.store,
        id,
        {
          compare: [{ key: summaryKey, modRevision: entry?.modRevision ?? 0 }, ...next.compare],
          success: [
            ...next.ops,
            { type: 'put', key: summaryKey, value: encode('webhook-subscriptions', next.summary) },
          ],
        },
        options,
      );
      if (written) return;
      // The webhook itself changed (not only the summary): the caller's view is stale.
      const moved = await this.store.getMany(next.compare.map((c) => c.key));
      if (next.compare.some((c) => (moved.get(c.key)?.modRevision ?? 0) !== c.modRevision)) {
        throw new Errors.Conflict('The webhook was changed by another request; retry.');
      }
    }
    throw new Errors.Conflict('The webhooks were changed by concurrent requests; retry.');
  }
}

/**
 * Writes of deliveries to the tenant's outbox (./dispatcher.ts), and of the tenant's mark that deliveries wait, once
 * (a transaction names a key once): the put moves the mark's revision, so a dispatcher that found the outbox empty
 * before this write fails to remove the mark.
 */
export function outboxPuts(tenantId: string, dueMs: number, deliveries: Delivery[]): TxnOp[] {
  return [
    ...deliveries.map((delivery): TxnOp => ({
      type: 'put',
      key: keys.webhookDelivery(tenantId, dueMs, delivery.id),
      value: encode('webhook-delivery', delivery),
    })),
    { type: 'put', key: keys.webhookQueuedTenant(tenantId), value: '' },
  ];
}

/** Event names as given (`token:created` or `token.created`), checked against EVENT_TYPES, without repeats. */
function eventTypes(given: string[]): EventType[] {
  const errors: Record<string, string[]> = {};
  const result: EventType[] = [];
  given.forEach((name, index) => {
    const normalized = normalizeEventType(name);
    if (!isEventType(normalized))
      errors[`events[${index}]`] = ['is not a known event type (GET /webhooks/event-types)'];
    else if (!result.includes(normalized)) result.push(normalized);
  });
  if (Object.keys(errors).length > 0) throw new Errors.InvalidBody({ errors });
  return result;
}

function secretAad(tenantId: string, id: string): string {
  return `webhook:${tenantId}:${id}`;
}

function toWebhook(record: WebhookRecord): Webhook {
  return {
    id: record.id,
    tenant_id: record.tenant_id,
    status: record.status,
    name: record.name,
    url: record.url,
    ...(record.notify_email ? { notify_email: record.notify_email } : {}),
    events: record.events,
    created_by: record.created_by,
    created_at: record.created_at,
    ...(record.modified_by ? { modified_by: record.modified_by } : {}),
    ...(record.modified_at ? { modified_at: record.modified_at } : {}),
  };
}

/**
 * 403 for a key that expires: a webhook goes on sending the tenant's events (every token's metadata and containers
 * among them) to its URL after the key is gone, a lasting feed that the key could not read itself afterwards. As an
 * expiring key makes no application, reactor or proxy that outlives it (src/domain/applications/delegation.ts), it
 * makes no webhook and points none elsewhere.
 */
function assertMayFeed(principal: TenantPrincipal, what: string): void {
  if (principal.expiresAt === undefined) return;
  throw new Errors.Forbidden(
    `The key expires at ${new Date(principal.expiresAt).toISOString()}: it may not ${what}, which would go on receiving the tenant's events after the key is gone; use a key that does not expire.`,
  );
}
