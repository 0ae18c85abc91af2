// core/v1 Events about the objects the controller reconciles (`kubectl describe` shows them). As client-go's event
// correlator does, a repeat of the same event (same object, type, reason and message) within ten minutes increments
// the existing Event's count instead of creating another, so a reconcile failing every few seconds does not flood
// etcd with Events. Messages must not carry secrets: they are stored in plain text and readable by anyone who can
// list Events in the namespace.
import { randomBytes } from 'node:crypto';
import type { Logger } from '../observability/logger.js';
import { isNotFound, kubeTime, Resources, type KubeClient, type KubeObject } from './kube.js';

export type EventType = 'Normal' | 'Warning';

export interface EventRecorderOptions {
  /** source.component and reportingController (default tokenvault-controller). */
  component?: string;
  /** reportingInstance: this process (default: none). */
  instance?: string;
  logger?: Logger;
  /** Repeats within this window are folded into one Event (default 10 min). */
  aggregateWindowMs?: number;
  /** Distinct events remembered for folding (default 4096, least recently used dropped). */
  cacheSize?: number;
}

interface Recorded {
  namespace: string;
  name: string;
  count: number;
  firstTimestamp: string;
  lastSeen: number;
}

const MAX_MESSAGE = 1024;

export class EventRecorder {
  private readonly recent = new Map<string, Recorded>();
  private readonly component: string;
  private readonly windowMs: number;
  private readonly cacheSize: number;

  constructor(
    private readonly client: KubeClient,
    private readonly options: EventRecorderOptions = {},
  ) {
    this.component = options.component ?? 'tokenvault-controller';
    this.windowMs = options.aggregateWindowMs ?? 10 * 60_000;
    this.cacheSize = options.cacheSize ?? 4096;
  }

  /**
   * Records an event about `object` (it needs apiVersion, kind and metadata.name; namespace and uid when it has them).
   * Never throws: a failure to write an Event is logged and otherwise ignored.
   */
  async record(object: KubeObject, type: EventType, reason: string, message: string): Promise<void> {
    const meta = object.metadata ?? {};
    const namespace = meta.namespace || 'default'; // events about cluster-scoped objects go to default, as kubectl looks there
    const text = message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 3)}...` : message;
    const correlation = JSON.stringify([
      object.apiVersion,
      object.kind,
      meta.namespace,
      meta.name,
      meta.uid,
      type,
      reason,
      text,
    ]);
    const now = new Date();
    try {
      const previous = this.recent.get(correlation);
      if (previous && now.getTime() - previous.lastSeen < this.windowMs) {
        try {
          await this.client.patch(Resources.events, previous.namespace, previous.name, {
            count: previous.count + 1,
            lastTimestamp: kubeTime(now),
          });
          previous.count++;
          previous.lastSeen = now.getTime();
          this.touch(correlation, previous);
          return;
        } catch (error) {
          if (!isNotFound(error)) throw error;
          // The Event expired (kube-apiserver keeps them an hour by default): create a new one.
        }
      }
      const name = `${meta.name}.${now.getTime().toString(16)}${randomBytes(2).toString('hex')}`;
      await this.client.create(Resources.events, namespace, {
        metadata: { name, namespace },
        involvedObject: {
          apiVersion: object.apiVersion,
          kind: object.kind,
          name: meta.name,
          namespace: meta.namespace,
          uid: meta.uid,
          resourceVersion: meta.resourceVersion,
        },
        type,
        reason,
        message: text,
        count: 1,
        firstTimestamp: kubeTime(now),
        lastTimestamp: kubeTime(now),
        eventTime: null,
        source: { component: this.component },
        reportingComponent: this.component,
        reportingInstance: this.options.instance ?? '',
        action: reason,
      });
      this.touch(correlation, { namespace, name, count: 1, firstTimestamp: kubeTime(now), lastSeen: now.getTime() });
    } catch (error) {
      this.options.logger?.warn(
        {
          object: `${object.kind}/${meta.namespace ? `${meta.namespace}/` : ''}${meta.name}`,
          reason,
          err: String(error),
        },
        'could not record an event',
      );
    }
  }

  private touch(key: string, value: Recorded): void {
    this.recent.delete(key);
    this.recent.set(key, value);
    while (this.recent.size > this.cacheSize) this.recent.delete(this.recent.keys().next().value as string);
  }
}
