// Sends what the outboxes hold (docs/api.md, "Webhooks", delivery). Runs in every API process; each delivery is sent by
// one of them at a time: a process claims it by writing a claim key (its id and an expiry) in a transaction that also
// checks the entry is still as the process read it, sends it, then in one transaction removes the entry (sent, or out
// of attempts) and the claim, or moves the entry to its next due time. A claim past its expiry (its process died
// mid-delivery) is taken over by whoever looks next; the entry is then sent again, as is one whose answer was lost.
// Delivery is therefore at least once: receivers deduplicate by the event id (BT-EVENT-ID, event.id). The expiry is in
// the claim rather than an etcd lease: a lease per claim would cost a round trip per delivery.
//
// Fairness between tenants (docs/security.md, "Webhook delivery"). Each tenant has its own outbox, in due order (its
// keys start with the due time), and a mark while it may hold entries (src/store/keys.ts). A look reads the marks (at
// most TENANTS_PER_LOOK, going on where the last look stopped when there are more), then the head of each marked
// tenant's outbox up to its first entry not yet due (at most HEAD entries), and claims round robin across tenants: one
// due entry of each in turn, while the tenant may start one (mayStart) and the process has fewer than concurrency
// under way. Another tenant's due entry is thus read and claimed by the next look however long the first tenant's
// backlog: with one outbox for everyone in due order, another tenant's event waited behind all of it (40 deliveries to
// a receiver that never answers held one up 9.7 s; past 500 due entries it was not even read).
// A per-tenant cap alone did not keep slots for the others: two tenants whose receivers hang (or answer just inside
// the timeout) held all 8 of a process's deliveries at tenantConcurrency 4, every time, and every other tenant's waited
// a whole timeout behind them (10.3 s in webhooks-hanging-receivers.test.ts, with a 10 s timeout; 0.1 s now). So only a tenant's lead delivery (its
// first under way here, while its last attempt here did not fail) may take any free slot; everything else, a tenant's
// further deliveries and those of a tenant whose receiver failed (one at a time until one succeeds), starts only while
// fewer than half the slots are in use. The other half is left to the lead deliveries of tenants in good standing:
// however many receivers fail, each other tenant gets one delivery at a time once its turn comes.
// The mark is what keeps a look bounded by tenants rather than by entries: every write of an outbox entry puts it in the
// same transaction, which moves its revision, and the dispatcher removes it only after reading that outbox empty and
// only if its revision has not moved since it listed it, so a concurrent write keeps it (and its entry is seen).
// The same revision lets a look skip the outboxes with nothing due. When an outbox's first entry is not due yet (its
// receiver failed and its entries wait out a backoff), the process remembers that due time with the mark's revision as
// the look listed it, and does not read that outbox again until the time comes or the mark's revision moves: any entry
// written since, by any process, moved it, and every entry written before is in the head that was read (the range is
// read after the mark is listed). An outbox with a due entry held elsewhere is still read every look: that claim may
// expire. So with 500 tenants waiting out a backoff and one with events due, a look costs 3 range reads (the marks,
// that tenant's outbox, the previous outbox; test/unit/webhook-dispatcher.test.ts), not one per tenant with entries.
//
// Processes of the previous version wrote one outbox for all tenants (keys.legacyWebhookOutbox), and keep writing it
// during a rolling upgrade; every look also reads its head, as one more source in the round robin, so those entries
// are delivered too (a retry moves one to its tenant's outbox). Once that outbox stays empty the read costs one
// empty range per look. Moving its entries at start would miss those written after.
//
// A watch on the marks (every entry put puts one) and on the previous outbox wakes the dispatcher when a change adds
// an entry, a finished delivery wakes it for the next, and a timer when the next entry falls due.
import { randomUUID } from 'node:crypto';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { decode } from '../store/codec.js';
import { keys } from '../store/keys.js';
import type { Entry, Store, Watcher } from '../store/store.js';
import type { Sender } from './delivery.js';
import { outboxPuts, type Delivery, type WebhookService } from './service.js';

export interface DispatcherOptions {
  /** Attempts per delivery, the first included; then it is dropped (TOKENVAULT_WEBHOOK_MAX_ATTEMPTS). */
  maxAttempts: number;
  /** Wait before the second attempt; doubled after each failure (TOKENVAULT_WEBHOOK_BACKOFF_MS). */
  backoffMs: number;
  /** Longest wait between two attempts (TOKENVAULT_WEBHOOK_BACKOFF_MAX_MS). */
  backoffMaxMs: number;
  /** Time one attempt may take (TOKENVAULT_WEBHOOK_TIMEOUT_MS); a claim outlives it by CLAIM_SLACK_MS. */
  timeoutMs: number;
  /** Deliveries this process sends at once (TOKENVAULT_WEBHOOK_CONCURRENCY). */
  concurrency: number;
  /** Deliveries of one tenant it sends at once (TOKENVAULT_WEBHOOK_TENANT_CONCURRENCY); only up to half of
   * concurrency, rounded up, is used (mayStart). */
  tenantConcurrency: number;
  /** Longest sleep between two looks at the outbox (picks up claims that expired with a dead process). */
  pollMs?: number;
}

/** Tenants whose outboxes one look reads; with more marked, the next look goes on after the last one read. */
const TENANTS_PER_LOOK = 1000;
/** Entries read from the head of one tenant's outbox per look: more than its share of a process's deliveries, so that
 * entries other processes hold leave some to claim. */
const HEAD = 32;
/** Tenants' outboxes read at once during a look. */
const READS_AT_ONCE = 16;
/** The in-flight count of entries read from the previous version's outbox, which holds every tenant's. */
const LEGACY = '(previous outbox)';
/** How long a claim outlives the attempt's timeout: room for the store writes around it, and for clock skew. */
const CLAIM_SLACK_MS = 30_000;

/** The wait after the `attempt`-th failed attempt: backoffMs · 2^(attempt-1), at most backoffMaxMs. */
export function backoff(attempt: number, options: Pick<DispatcherOptions, 'backoffMs' | 'backoffMaxMs'>): number {
  return Math.min(options.backoffMaxMs, options.backoffMs * 2 ** Math.min(30, attempt - 1));
}

interface Source {
  /** The tenant, or LEGACY. */
  tenant: string;
  prefix: string;
  /** The tenant's mark, as listed. */
  mark?: Entry;
}

export class WebhookDispatcher {
  private readonly replica = randomUUID();
  private readonly inFlight = new Map<string, Promise<void>>();
  /** Deliveries under way per tenant (LEGACY for those of the previous outbox). */
  private readonly tenantsInFlight = new Map<string, number>();
  private watchers: Watcher[] = [];
  private timer?: NodeJS.Timeout;
  /** The last look started: stop() waits for it. */
  private looking?: Promise<void>;
  private running = false;
  private again = false;
  private stopped = false;
  /** The last mark a look read when it stopped at TENANTS_PER_LOOK: where the next look goes on. */
  private cursor?: string;
  /** Which source a look offers a claim first: turns, so no tenant is always first when deliveries are scarce. */
  private turn = 0;
  /** Tenants whose last attempt here failed (an error, a timeout, an answer other than 2xx), until one succeeds or
   * their outbox is empty: mayStart gives them one delivery at a time, in the half of the slots not kept for others. */
  private readonly failing = new Set<string>();
  /** Tenants whose outbox held nothing due when read: its first entry's due time, and the mark's revision then. */
  private readonly waiting = new Map<string, { untilMs: number; markRevision: number }>();

  constructor(
    private readonly store: Store,
    private readonly webhooks: Pick<WebhookService, 'target'>,
    private readonly send: Sender,
    private readonly logger: Logger,
    private readonly options: DispatcherOptions,
    private readonly metrics?: Metrics,
  ) {}

  async start(): Promise<void> {
    for (const prefix of [keys.webhookQueued, keys.legacyWebhookOutbox]) {
      this.watchers.push(
        await this.store.watch(
          prefix,
          (event) => {
            if (event.type === 'put') this.kick();
          },
          () => this.kick(),
        ),
      );
    }
    this.kick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await Promise.all(this.watchers.map((watcher) => watcher.close().catch(() => undefined)));
    // The look under way stops before its next claim; a claim it is waiting for may still begin a delivery. Before it
    // was awaited, such a delivery went out after stop() had returned, on a store being closed.
    await this.looking;
    // Deliveries under way finish (each is bounded by timeoutMs) and settle their entries.
    await Promise.allSettled([...this.inFlight.values()]);
  }

  /** Looks at the outboxes now (or right after the look under way). */
  private kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.looking = this.look()
      .catch((error: unknown) => this.logger.warn({ err: error }, 'webhook outbox could not be read'))
      .finally(() => {
        this.running = false;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  private async look(): Promise<void> {
    const pollMs = this.options.pollMs ?? 1000;
    let nextDue = Date.now() + pollMs;
    // Forgets the waits that are over, including those of tenants no longer marked: the map holds only future times.
    for (const [tenant, wait] of this.waiting) if (wait.untilMs <= Date.now()) this.waiting.delete(tenant);
    const marks = await this.marks();
    const sources: Source[] = [
      ...marks.map((mark) => {
        const tenant = mark.key.slice(keys.webhookQueued.length);
        return { tenant, prefix: keys.webhookQueue(tenant), mark };
      }),
      { tenant: LEGACY, prefix: keys.legacyWebhookOutbox },
    ];
    // Forgets that a tenant failed once it has nothing left to send (when this look listed every mark), so the set
    // holds only tenants with entries.
    if (marks.length < TENANTS_PER_LOOK) {
      const marked = new Set(sources.map((source) => source.tenant));
      for (const tenant of this.failing) if (!marked.has(tenant)) this.failing.delete(tenant);
    }
    // Each source's due entries not under way here, read a few outboxes at a time. A tenant that may not start one now
    // is not read: its next look comes when a delivery finishes.
    const due: Array<Array<{ entry: Entry; deliveryId: string }>> = sources.map(() => []);
    for (let i = 0; i < sources.length && !this.stopped; i += READS_AT_ONCE) {
      await Promise.all(
        sources.slice(i, i + READS_AT_ONCE).map(async (source, j) => {
          if (!this.mayStart(source.tenant)) return;
          const wait = this.waiting.get(source.tenant);
          if (wait && wait.markRevision === source.mark?.modRevision && wait.untilMs > Date.now()) {
            nextDue = Math.min(nextDue, wait.untilMs);
            return;
          }
          this.waiting.delete(source.tenant);
          const head = await this.store.range(source.prefix, { limit: HEAD });
          if (head.length === 0 && source.mark) await this.unmark(source.mark);
          for (const [index, entry] of head.entries()) {
            const { dueMs, deliveryId } = parseKey(source.prefix, entry.key);
            if (dueMs > Date.now()) {
              nextDue = Math.min(nextDue, dueMs);
              if (index === 0 && source.mark) {
                this.waiting.set(source.tenant, { untilMs: dueMs, markRevision: source.mark.modRevision });
              }
              break;
            }
            if (!this.inFlight.has(deliveryId)) due[i + j].push({ entry, deliveryId });
          }
        }),
      );
    }
    // Round robin: one due entry of each source in turn. Every pass takes an entry or ends the loop, so it ends after
    // at most sources × HEAD claims.
    const first = this.turn++ % sources.length;
    const order = [...sources.keys()].map((k) => (first + k) % sources.length);
    let took = true;
    while (took && !this.stopped && this.inFlight.size < this.options.concurrency) {
      took = false;
      for (const k of order) {
        if (this.stopped || this.inFlight.size >= this.options.concurrency) break;
        const tenant = sources[k].tenant;
        const next = this.mayStart(tenant) ? due[k].shift() : undefined;
        if (!next) continue;
        took = true;
        if (await this.claim(next.entry, next.deliveryId)) this.begin(next.entry, next.deliveryId, tenant);
      }
    }
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.kick(), Math.max(10, nextDue - Date.now()));
    this.timer.unref();
  }

  /**
   * Whether a delivery of `tenant` may start now. Its lead delivery (none of its under way here, and its last attempt
   * here did not fail) takes any free slot. Any other (up to tenantConcurrency at once; one for a failing tenant) only
   * while fewer than half the slots are in use, so the other half is left to other tenants' lead deliveries: tenants
   * whose receivers hang hold at most half the slots once their attempts have failed, and before that, up to half as
   * many of them as there are slots still leave one free.
   */
  private mayStart(tenant: string): boolean {
    if (this.inFlight.size >= this.options.concurrency) return false;
    const underWay = this.tenantsInFlight.get(tenant) ?? 0;
    const failing = this.failing.has(tenant);
    if (underWay === 0 && !failing) return true;
    return (
      underWay < (failing ? 1 : this.options.tenantConcurrency) &&
      this.inFlight.size < Math.ceil(this.options.concurrency / 2)
    );
  }

  private begin(entry: Entry, deliveryId: string, tenant: string): void {
    this.tenantsInFlight.set(tenant, (this.tenantsInFlight.get(tenant) ?? 0) + 1);
    const work = this.deliver(entry, deliveryId)
      .catch((error: unknown) => this.logger.warn({ err: error, delivery: deliveryId }, 'webhook delivery failed'))
      .finally(() => {
        this.inFlight.delete(deliveryId);
        const left = (this.tenantsInFlight.get(tenant) ?? 1) - 1;
        if (left > 0) this.tenantsInFlight.set(tenant, left);
        else this.tenantsInFlight.delete(tenant);
        this.kick(); // the tenant's next entry, or another's
      });
    this.inFlight.set(deliveryId, work);
  }

  /** Marks of tenants with deliveries waiting: all of them, or TENANTS_PER_LOOK going on after the last look's. */
  private async marks(): Promise<Entry[]> {
    const after = this.cursor;
    const marks = await this.store.range(keys.webhookQueued, { limit: TENANTS_PER_LOOK, startAfter: after });
    if (after !== undefined && marks.length < TENANTS_PER_LOOK) {
      // Wrap around to the marks before the cursor (those after it were all read).
      const wrapped = await this.store.range(keys.webhookQueued, { limit: TENANTS_PER_LOOK - marks.length });
      marks.push(...wrapped.filter((mark) => mark.key <= after));
    }
    this.cursor = marks.length >= TENANTS_PER_LOOK ? marks[marks.length - 1].key : undefined;
    return marks;
  }

  /** Removes a tenant's mark after its outbox read empty, unless an entry was put since the mark was listed. */
  private async unmark(mark: Entry): Promise<void> {
    await this.store.txn({
      compare: [{ key: mark.key, modRevision: mark.modRevision }],
      success: [{ type: 'delete', key: mark.key }],
    });
  }

  /**
   * Claims a delivery only while its entry is still as it was read (another process may have sent it and removed its
   * claim since: a claim alone would then let it be sent twice), and no live claim holds it.
   */
  private async claim(entry: Entry, deliveryId: string): Promise<boolean> {
    const key = keys.webhookClaim(deliveryId);
    const value = JSON.stringify({
      replica: this.replica,
      until: Date.now() + this.options.timeoutMs + CLAIM_SLACK_MS,
    });
    const take = (claimRevision: number) =>
      this.store.txn({
        compare: [
          { key: entry.key, modRevision: entry.modRevision },
          { key, modRevision: claimRevision },
        ],
        success: [{ type: 'put', key, value }],
      });
    // Unclaimed (the usual case): one round trip.
    if (await take(0)) return true;
    const held = await this.store.get(key);
    if (!held || (JSON.parse(held.value) as { until: number }).until > Date.now()) return false;
    return take(held.modRevision);
  }

  /** Removes a claim if this process still holds it. */
  private async release(claim: string): Promise<void> {
    const held = await this.store.get(claim);
    if (held && (JSON.parse(held.value) as { replica: string }).replica === this.replica) {
      await this.store.compareAndDelete(claim, held.modRevision);
    }
  }

  private async deliver(entry: Entry, deliveryId: string): Promise<void> {
    const claim = keys.webhookClaim(deliveryId);
    const delivery = decode<Delivery>('webhook-delivery', entry.value);
    const target = await this.webhooks.target(delivery.tenant_id, delivery.webhook_id);
    const settle = async (next?: { dueMs: number; delivery: Delivery }) => {
      // When the entry moved on (another process took it over after this one's claim expired), nothing is written:
      // the claim is that process's now. When the entry is gone because its tenant was deleted, the claim is still
      // this process's, and nobody else would ever remove it.
      const settled = await this.store.txn({
        compare: [{ key: entry.key, modRevision: entry.modRevision }],
        success: [
          { type: 'delete', key: entry.key },
          ...(next ? outboxPuts(next.delivery.tenant_id, next.dueMs, [next.delivery]) : []),
          { type: 'delete', key: claim },
        ],
      });
      if (!settled) await this.release(claim);
    };
    // Its webhook (or tenant) is gone, or the webhook is disabled: nobody is waiting for it.
    if (!target || target.record.status !== 'enabled') {
      this.metrics?.webhookAttempts.inc({ type: delivery.event.type, outcome: 'abandoned' });
      await settle();
      return;
    }
    const attempt = delivery.attempts + 1;
    const body = JSON.stringify({ event: delivery.event, delivered_at: new Date().toISOString() });
    const result = await this.send({
      url: target.record.url,
      secret: target.secret,
      eventId: delivery.event.id,
      attempt,
      body,
    });
    const facts = {
      tenant: delivery.tenant_id,
      webhook: delivery.webhook_id,
      event: delivery.event.id,
      type: delivery.event.type,
      attempt,
    };
    if (result.ok) this.failing.delete(delivery.tenant_id);
    else this.failing.add(delivery.tenant_id);
    const outcome = result.ok ? 'delivered' : attempt >= this.options.maxAttempts ? 'dropped' : 'retry';
    this.metrics?.webhookAttempts.inc({ type: delivery.event.type, outcome });
    if (result.ok) {
      this.metrics?.webhookLag.observe(
        { type: delivery.event.type },
        (Date.now() - Date.parse(delivery.event.timestamp)) / 1000,
      );
      this.logger.debug(facts, 'webhook delivered');
      await settle();
    } else if (attempt >= this.options.maxAttempts) {
      this.logger.warn({ ...facts, reason: result.reason }, 'webhook delivery dropped after its last attempt');
      await settle();
    } else {
      const dueMs = Date.now() + backoff(attempt, this.options);
      this.logger.info({ ...facts, reason: result.reason, retryInMs: dueMs - Date.now() }, 'webhook delivery failed');
      await settle({ dueMs, delivery: { ...delivery, attempts: attempt } });
    }
  }
}

/** The due time and delivery id of an outbox entry's key (`<prefix><due>/<delivery id>`). */
function parseKey(prefix: string, key: string): { dueMs: number; deliveryId: string } {
  const [due, deliveryId] = key.slice(prefix.length).split('/');
  return { dueMs: Number(due), deliveryId };
}
