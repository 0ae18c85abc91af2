// The PostgreSQL store's watches: one change feed per store object, read from tokenvault_changes in revision order
// and fanned out to the watches by prefix. Writes take one lock and commit one at a time in revision order
// (postgres-schema.ts), so every revision up to the newest committed one is visible, and reading "after the last
// revision seen" never skips a change that commits later with a smaller revision: the trap of change feeds over an
// auto-increment log (ids are handed out in one order and committed in another) cannot happen here.
//
// LISTEN/NOTIFY only wakes the feed (every write notifies with its revision); what changed is always read from the
// table. A wake-up lost while the listening connection is down is what onReset('lost') says: the feed then starts
// again from the current revision and says 'back'. The feed also reads every pollMs, so a wake-up that never came
// (a listening connection dead without notice) delays events by at most that long.

import pg from 'pg';
import { Errors } from '../errors/registry.js';
import { deliver } from './common.js';
import type { WatchEvent, Watcher, WatchPhase } from './store.js';

/** A row as pg answers it. */
export type Row = Record<string, unknown>;

/** A position's seq when its whole revision was read (the largest int, seq's type). */
const WHOLE = 2 ** 31 - 1;

/** At most this many changes are read at a time. */
const PAGE = 2_000;

interface FeedWatch {
  prefix: string;
  handler: (event: WatchEvent) => void;
  onReset?: (phase: WatchPhase) => void;
  /** Changes at or before this revision happened before the watch began. */
  from: number;
}

export interface ChangeFeedOptions {
  /** Opens the connection that LISTENs (not from the pool: it stays checked out for as long as the feed runs). */
  connect: () => Promise<pg.Client>;
  /** Runs a query on the pool. */
  query: (text: string, values: unknown[]) => Promise<pg.QueryResult<Row>>;
  /** How often the feed reads without a wake-up. */
  pollMs: number;
  /** Turns a failure into what a caller sees (StoreUnavailable, mostly). */
  mapError: (error: unknown) => unknown;
}

export class ChangeFeed {
  private readonly watches = new Set<FeedWatch>();
  private listener?: pg.Client;
  /** The last change delivered: its revision and sequence number within the revision. */
  private position = { revision: 0, seq: -1 };
  private running?: Promise<void>;
  private broken = false;
  private reading?: Promise<void>;
  private readAgain = false;
  private timer?: NodeJS.Timeout;
  private reconnect?: NodeJS.Timeout;
  private backoffMs = 100;
  private closed = false;

  constructor(private readonly options: ChangeFeedOptions) {}

  /** Watches `prefix` from the current revision on; rejects (StoreUnavailable) when the store does not answer. */
  async watch(
    prefix: string,
    handler: (event: WatchEvent) => void,
    onReset?: (phase: WatchPhase) => void,
  ): Promise<Watcher> {
    if (this.closed) throw new Errors.StoreUnavailable();
    await this.start();
    const from = await this.currentRevision();
    const watch: FeedWatch = { prefix, handler, onReset, from };
    this.watches.add(watch);
    return {
      close: async () => {
        this.watches.delete(watch);
        if (this.watches.size === 0) await this.stop();
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.watches.clear();
    await this.stop();
  }

  // --- internals ---------------------------------------------------------------------------------------------------

  private start(): Promise<void> {
    this.running ??= this.connect().catch((error) => {
      this.running = undefined;
      throw this.options.mapError(error);
    });
    return this.running;
  }

  /** LISTEN first, then read the revision: a change committed in between is then both read and announced. */
  private async connect(): Promise<void> {
    const listener = await this.options.connect();
    try {
      listener.on('error', () => this.lost(listener));
      listener.on('end', () => this.lost(listener));
      listener.on('notification', () => void this.read());
      await listener.query('LISTEN tokenvault_changes');
      const revision = await this.currentRevision();
      this.position = { revision, seq: WHOLE };
    } catch (error) {
      await listener.end().catch(() => undefined);
      throw error;
    }
    this.listener = listener;
    this.broken = false;
    this.backoffMs = 100;
    clearInterval(this.timer);
    this.timer = setInterval(() => void this.read(), this.options.pollMs).unref();
  }

  private async stop(): Promise<void> {
    clearInterval(this.timer);
    clearTimeout(this.reconnect);
    this.timer = undefined;
    this.reconnect = undefined;
    const listener = this.listener;
    this.listener = undefined;
    this.running = undefined;
    this.broken = false;
    await this.reading?.catch(() => undefined);
    if (listener) {
      listener.removeAllListeners('end');
      listener.removeAllListeners('notification');
      await listener.end().catch(() => undefined);
    }
  }

  private async currentRevision(): Promise<number> {
    const { rows } = await this.options.query('SELECT revision FROM tokenvault_revision', []);
    return Number(rows[0].revision);
  }

  /** One read at a time; a wake-up during a read makes it read once more after. */
  private read(): Promise<void> {
    if (this.reading) {
      this.readAgain = true;
      return this.reading;
    }
    this.reading = (async () => {
      try {
        do {
          this.readAgain = false;
          await this.readChanges();
        } while (this.readAgain && !this.broken && this.listener);
      } catch {
        this.lost(this.listener);
      } finally {
        this.reading = undefined;
      }
    })();
    return this.reading;
  }

  private async readChanges(): Promise<void> {
    for (;;) {
      if (!this.listener || this.broken) return;
      const { revision, seq } = this.position;
      const { rows } = await this.options.query(
        'SELECT revision, seq, key, value FROM tokenvault_changes WHERE (revision, seq) > ($1, $2) ' +
          'ORDER BY revision, seq LIMIT $3',
        [revision, seq, PAGE],
      );
      if (rows.length === 0) return;
      const first = Number(rows[0].revision);
      // Every revision has at least one change; a missing one was pruned before this feed read it (it fell behind
      // by more than the retention), so its changes are lost to every watch.
      if (first > revision + 1) return this.skipAhead();
      for (const row of rows) {
        const event: WatchEvent =
          row.value === null
            ? { type: 'delete', key: row.key as string, modRevision: Number(row.revision) }
            : { type: 'put', key: row.key as string, value: row.value as string, modRevision: Number(row.revision) };
        for (const watch of this.watches) {
          if (event.modRevision > watch.from && event.key.startsWith(watch.prefix)) deliver(watch.handler, event);
        }
        this.position = { revision: event.modRevision, seq: Number(row.seq) };
      }
      // The last revision read may have more changes on the next page; a whole revision read ends at MAX seq.
      if (rows.length < PAGE) {
        this.position = { revision: this.position.revision, seq: WHOLE };
        return;
      }
    }
  }

  /** Changes were pruned before they were read: every watch is told, and the feed goes on from now. */
  private async skipAhead(): Promise<void> {
    const revision = await this.currentRevision();
    this.position = { revision, seq: WHOLE };
    for (const watch of this.watches) {
      watch.from = Math.max(watch.from, revision);
      watch.onReset?.('lost');
      watch.onReset?.('back');
    }
  }

  /** The listening connection or a read failed: the watches are told, and the feed connects again after a pause. */
  private lost(listener: pg.Client | undefined): void {
    if (this.closed || this.broken || listener !== this.listener || !this.running) return;
    this.broken = true;
    clearInterval(this.timer);
    this.listener = undefined;
    listener?.removeAllListeners('notification');
    void listener?.end().catch(() => undefined);
    for (const watch of this.watches) watch.onReset?.('lost');
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, 5_000);
    this.reconnect = setTimeout(() => {
      if (this.closed || this.watches.size === 0) return;
      this.connect().then(
        () => {
          for (const watch of this.watches) {
            watch.from = Math.max(watch.from, this.position.revision);
            watch.onReset?.('back');
          }
        },
        () => this.scheduleReconnect(),
      );
    }, delay);
    this.reconnect.unref();
  }
}
