// Work started in the same turn of the event loop, collected and sent as one: under concurrent load, the requests that
// arrived together share one exchange with etcd or a worker, whose fixed cost is most of what each would have paid.
// Used by the etcd store (reads, writes) and the runtime client (invocations).

export class TurnBatches<B> {
  private open?: { batch: B; flushed: boolean };

  constructor(
    private readonly create: () => B,
    /** Sends a batch; called once per batch, when its turn ends or when it is full. */
    private readonly flush: (batch: B) => void,
  ) {}

  /** This turn's batch if `fits` accepts it; otherwise that one is flushed now and a new one is started. */
  current(fits: (batch: B) => boolean): B {
    const open = this.open;
    if (open && fits(open.batch)) return open.batch;
    if (open) this.close(open);
    const fresh = { batch: this.create(), flushed: false };
    this.open = fresh;
    // setImmediate, not a microtask: it runs after this turn's I/O callbacks, so the work of every request that
    // arrived together shares the batch (a microtask would flush after each request's own callback).
    setImmediate(() => this.close(fresh));
    return fresh.batch;
  }

  private close(open: { batch: B; flushed: boolean }): void {
    if (this.open === open) this.open = undefined;
    if (open.flushed) return;
    open.flushed = true;
    this.flush(open.batch);
  }
}
