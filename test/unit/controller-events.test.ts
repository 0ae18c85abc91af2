// The controller's EventRecorder (src/controller/events.ts) on a fake client: reconciles do not wait for Events (emit
// returns at once), a bounded number are written at a time, a full backlog drops (counted, one warning), repeats
// waiting in the backlog are folded into one Event, and a repeat of an Event being written counts it up afterwards.
import { describe, expect, test } from '@jest/globals';
import { EventRecorder } from '../../src/controller/events.js';
import type { KubeClient, KubeObject } from '../../src/controller/kube.js';

interface Call {
  verb: 'create' | 'patch';
  name: string;
  body: Record<string, unknown>;
  finish(): void;
}

/** A client whose create and patch calls the test finishes by hand. */
function fakeClient() {
  const calls: Call[] = [];
  let active = 0;
  let maxActive = 0;
  const call = (verb: Call['verb'], name: string, body: Record<string, unknown>) =>
    new Promise<KubeObject>((resolve) => {
      active++;
      maxActive = Math.max(maxActive, active);
      calls.push({
        verb,
        name,
        body,
        finish: () => {
          active--;
          resolve({});
        },
      });
    });
  const client = {
    create: (_resource: unknown, _namespace: string, body: { metadata: { name: string } }) =>
      call('create', body.metadata.name, body),
    patch: (_resource: unknown, _namespace: string, name: string, body: Record<string, unknown>) =>
      call('patch', name, body),
  } as unknown as KubeClient;
  return { client, calls, maxActive: () => maxActive };
}

const object = (name: string): KubeObject => ({
  apiVersion: 'tokenvault.dev/v1alpha1',
  kind: 'Reactor',
  metadata: { name, namespace: 'ns', uid: `uid-${name}` },
});

const settle = () => new Promise((resolve) => setImmediate(resolve));

async function finishAll(calls: Call[], recorder: EventRecorder): Promise<void> {
  for (let done = 0; recorder.backlog > 0;) {
    await settle();
    for (; done < calls.length; done++) calls[done].finish();
  }
}

describe('EventRecorder', () => {
  test('emit returns at once; a bounded number of writes run at a time; flush waits for the rest', async () => {
    const { client, calls, maxActive } = fakeClient();
    const recorder = new EventRecorder(client, { concurrency: 2 });
    for (let i = 0; i < 10; i++) recorder.emit(object(`r${i}`), 'Normal', 'Created', `Created reactor r${i}.`);
    await settle();
    expect(calls).toHaveLength(2);
    expect(recorder.backlog).toBe(10);
    let flushed = false;
    void recorder.flush().then(() => (flushed = true));
    await finishAll(calls, recorder);
    await settle();
    expect(flushed).toBe(true);
    expect(maxActive()).toBe(2);
    expect(calls.map((c) => c.verb)).toEqual(Array(10).fill('create'));
    expect(calls.map((c) => (c.body.involvedObject as { name: string }).name)).toEqual(
      Array.from({ length: 10 }, (_, i) => `r${i}`),
    );
  });

  test('a full backlog drops events: counted, and one warning', async () => {
    const { client, calls } = fakeClient();
    const warnings: unknown[] = [];
    let dropped = 0;
    const logger = { warn: (fields: unknown) => warnings.push(fields) } as never;
    const recorder = new EventRecorder(client, {
      concurrency: 1,
      maxPending: 3,
      logger,
      onDropped: (count) => (dropped += count),
    });
    for (let i = 0; i < 10; i++) recorder.emit(object(`r${i}`), 'Normal', 'Created', 'Created.');
    // One being written, three waiting, six dropped.
    expect(dropped).toBe(6);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ dropped_total: 1 });
    await finishAll(calls, recorder);
    expect(calls).toHaveLength(4);
  });

  test('with the backlog full, a Warning takes the place of the oldest waiting Normal event', async () => {
    const { client, calls } = fakeClient();
    let dropped = 0;
    const recorder = new EventRecorder(client, { concurrency: 1, maxPending: 2, onDropped: (n) => (dropped += n) });
    recorder.emit(object('a'), 'Normal', 'Created', 'a'); // written at once
    recorder.emit(object('b'), 'Normal', 'Created', 'b');
    recorder.emit(object('c'), 'Normal', 'Created', 'c');
    recorder.emit(object('d'), 'Warning', 'VaultRefused', 'd'); // b goes
    recorder.emit(object('e'), 'Normal', 'Created', 'e'); // dropped
    expect(dropped).toBe(2);
    await finishAll(calls, recorder);
    expect(calls.map((c) => (c.body.involvedObject as { name: string }).name)).toEqual(['a', 'c', 'd']);
  });

  test('repeats waiting in the backlog fold into one Event; a repeat of one being written counts it up after', async () => {
    const { client, calls } = fakeClient();
    const recorder = new EventRecorder(client, { concurrency: 1 });
    recorder.emit(object('a'), 'Normal', 'Created', 'first'); // written at once
    recorder.emit(object('b'), 'Warning', 'VaultRefused', 'no'); // waits
    recorder.emit(object('b'), 'Warning', 'VaultRefused', 'no'); // folded into the waiting one
    recorder.emit(object('b'), 'Warning', 'VaultRefused', 'no');
    await settle();
    expect(calls).toHaveLength(1);
    calls[0].finish();
    await settle();
    expect(calls).toHaveLength(2);
    expect(calls[1]).toMatchObject({ verb: 'create', body: { reason: 'VaultRefused', count: 3 } });
    // While b's Event is being created, b happens again: that waits for the create, then counts the Event up.
    recorder.emit(object('b'), 'Warning', 'VaultRefused', 'no');
    await settle();
    expect(calls).toHaveLength(2);
    calls[1].finish();
    await settle();
    await settle();
    expect(calls).toHaveLength(3);
    expect(calls[2]).toMatchObject({ verb: 'patch', name: calls[1].name, body: { count: 4 } });
    calls[2].finish();
    await recorder.flush();
  });

  test('writes are rate-limited: a burst, then qps', async () => {
    const { client, calls } = fakeClient();
    const recorder = new EventRecorder(client, { concurrency: 10, qps: 20, burst: 2 });
    for (let i = 0; i < 4; i++) recorder.emit(object(`r${i}`), 'Normal', 'Created', 'x');
    await settle();
    expect(calls).toHaveLength(2);
    for (const call of calls) call.finish();
    await new Promise((resolve) => setTimeout(resolve, 40)); // a token every 50 ms
    expect(calls.length).toBeLessThanOrEqual(3);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(calls).toHaveLength(4);
    for (const call of calls) call.finish();
    await recorder.flush();
  });

  test('record resolves once its event is written', async () => {
    const { client, calls } = fakeClient();
    const recorder = new EventRecorder(client);
    let written = false;
    const recording = recorder.record(object('a'), 'Normal', 'Created', 'x').then(() => (written = true));
    await settle();
    expect(written).toBe(false);
    calls[0].finish();
    await recording;
    expect(written).toBe(true);
  });
});
