// Sends what the outbox holds (docs/api.md, "Webhooks", delivery). Runs in every API process; each delivery is sent by
// one of them at a time: a process claims it by writing a claim key (its id and an expiry) in a transaction that also
// checks the entry is still as the process read it, sends it, then in one transaction removes the entry (sent, or out
// of attempts) and the claim, or moves the entry to its next due time. A claim past its expiry (its process died
// mid-delivery) is taken over by whoever looks next; the entry is then sent again, as is one whose answer was lost.
// Delivery is therefore at least once: receivers deduplicate by the event id (BT-EVENT-ID, event.id). The expiry is in
// the claim rather than an etcd lease: a lease per claim would cost a round trip per delivery.
//
// Work is found by reading the outbox in due order (its keys start with the due time) up to the first entry not yet
// due; a watch on the outbox wakes the dispatcher when a change adds an entry, and a timer when the next one falls due.
import { randomUUID } from 'node:crypto';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { decode, encode } from '../store/codec.js';
import { keys } from '../store/keys.js';
import type { Entry, Store, Watcher } from '../store/store.js';
import type { Sender } from './delivery.js';
import type { Delivery, WebhookService } from './service.js';

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
  /** Longest sleep between two looks at the outbox (picks up claims that expired with a dead process). */
  pollMs?: number;
}

/** Outbox entries read per look; the rest wait for the next one. */
const SCAN_LIMIT = 500;
/** How long a claim outlives the attempt's timeout: room for the store writes around it, and for clock skew. */
const CLAIM_SLACK_MS = 30_000;
const PAGE = 100;

/** The wait after the `attempt`-th failed attempt: backoffMs · 2^(attempt-1), at most backoffMaxMs. */
export function backoff(attempt: number, options: Pick<DispatcherOptions, 'backoffMs' | 'backoffMaxMs'>): number {
  return Math.min(options.backoffMaxMs, options.backoffMs * 2 ** Math.min(30, attempt - 1));
}

export class WebhookDispatcher {
  private readonly replica = randomUUID();
  private readonly inFlight = new Map<string, Promise<void>>();
  private watcher?: Watcher;
  private timer?: NodeJS.Timeout;
  private running = false;
  private again = false;
  private stopped = false;

  constructor(
    private readonly store: Store,
    private readonly webhooks: WebhookService,
    private readonly send: Sender,
    private readonly logger: Logger,
    private readonly options: DispatcherOptions,
    private readonly metrics?: Metrics,
  ) {}

  async start(): Promise<void> {
    this.watcher = await this.store.watch(
      keys.webhookOutbox,
      (event) => {
        if (event.type === 'put') this.kick();
      },
      () => this.kick(),
    );
    this.kick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.watcher?.close().catch(() => undefined);
    // Deliveries under way finish (each is bounded by timeoutMs) and settle their entries.
    await Promise.allSettled([...this.inFlight.values()]);
  }

  /** Looks at the outbox now (or right after the look under way). */
  private kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.look()
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
    let after: string | undefined;
    let scanned = 0;
    scan: while (scanned < SCAN_LIMIT && !this.stopped) {
      const page = await this.store.range(keys.webhookOutbox, { limit: PAGE, startAfter: after });
      for (const entry of page) {
        scanned++;
        after = entry.key;
        const { dueMs, deliveryId } = parseKey(entry.key);
        if (dueMs > Date.now()) {
          nextDue = Math.min(nextDue, dueMs);
          break scan;
        }
        if (this.inFlight.has(deliveryId)) continue;
        if (this.inFlight.size >= this.options.concurrency) break scan; // a finished delivery looks again
        if (!(await this.claim(entry, deliveryId))) continue;
        const work = this.deliver(entry, deliveryId)
          .catch((error: unknown) => this.logger.warn({ err: error, delivery: deliveryId }, 'webhook delivery failed'))
          .finally(() => {
            this.inFlight.delete(deliveryId);
            this.kick();
          });
        this.inFlight.set(deliveryId, work);
      }
      if (page.length < PAGE) break;
    }
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.kick(), Math.max(10, nextDue - Date.now()));
    this.timer.unref();
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

  private async deliver(entry: Entry, deliveryId: string): Promise<void> {
    const claim = keys.webhookClaim(deliveryId);
    const delivery = decode<Delivery>('webhook-delivery', entry.value);
    const target = await this.webhooks.target(delivery.tenant_id, delivery.webhook_id);
    const settle = async (next?: { dueMs: number; delivery: Delivery }) => {
      // When the entry moved on (another process took it over after this one's claim expired), nothing is written:
      // the claim is that process's now.
      await this.store.txn({
        compare: [{ key: entry.key, modRevision: entry.modRevision }],
        success: [
          { type: 'delete', key: entry.key },
          ...(next
            ? [
                {
                  type: 'put' as const,
                  key: keys.webhookDelivery(next.dueMs, deliveryId),
                  value: encode('webhook-delivery', next.delivery),
                },
              ]
            : []),
          { type: 'delete', key: claim },
        ],
      });
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

function parseKey(key: string): { dueMs: number; deliveryId: string } {
  const [due, deliveryId] = key.slice(keys.webhookOutbox.length).split('/');
  return { dueMs: Number(due), deliveryId };
}
