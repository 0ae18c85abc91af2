// metav1.Condition helpers (k8s.io/apimachinery/pkg/api/meta: SetStatusCondition, FindStatusCondition...). A
// condition's lastTransitionTime changes only when its status changes; reason, message and observedGeneration are
// updated in place. Functions return new arrays and never modify their input, so a reconciler can compare the
// result with what the object had and skip a status write that would change nothing.
import { kubeTime } from './kube.js';

export type ConditionStatus = 'True' | 'False' | 'Unknown';

export interface Condition {
  type: string;
  status: ConditionStatus;
  /** CamelCase, machine-readable (^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$, up to 1024 characters). */
  reason: string;
  /** Human-readable; up to 32768 characters. */
  message: string;
  /** RFC 3339, to the second. */
  lastTransitionTime: string;
  observedGeneration?: number;
}

export interface ConditionUpdate {
  type: string;
  status: ConditionStatus;
  reason: string;
  message?: string;
  observedGeneration?: number;
}

const REASON = /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;
const MAX_MESSAGE = 32_768;

export function findCondition(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((condition) => condition.type === type);
}

export function isConditionTrue(conditions: readonly Condition[] | undefined, type: string): boolean {
  return findCondition(conditions, type)?.status === 'True';
}

/**
 * The conditions with `update` applied: added when its type is absent; otherwise reason, message and
 * observedGeneration replaced, and lastTransitionTime set to `now` only when the status differs.
 */
export function setCondition(
  conditions: readonly Condition[] | undefined,
  update: ConditionUpdate,
  now: Date = new Date(),
): Condition[] {
  if (!REASON.test(update.reason) || update.reason.length > 1024) {
    throw new Error(`condition reason ${JSON.stringify(update.reason)} is not CamelCase`);
  }
  const message = (update.message ?? '').slice(0, MAX_MESSAGE);
  const list = [...(conditions ?? [])];
  const index = list.findIndex((condition) => condition.type === update.type);
  const previous = index >= 0 ? list[index] : undefined;
  const next: Condition = {
    type: update.type,
    status: update.status,
    reason: update.reason,
    message,
    lastTransitionTime:
      previous && previous.status === update.status && previous.lastTransitionTime
        ? previous.lastTransitionTime
        : kubeTime(now),
  };
  const generation = update.observedGeneration ?? previous?.observedGeneration;
  if (generation !== undefined) next.observedGeneration = generation;
  if (index >= 0) list[index] = next;
  else list.push(next);
  return list;
}

export function removeCondition(conditions: readonly Condition[] | undefined, type: string): Condition[] {
  return (conditions ?? []).filter((condition) => condition.type !== type);
}

/** Whether two condition lists say the same (order ignored): a status write can be skipped when they do. */
export function conditionsEqual(a: readonly Condition[] | undefined, b: readonly Condition[] | undefined): boolean {
  const left = a ?? [];
  const right = b ?? [];
  if (left.length !== right.length) return false;
  return left.every((condition) => {
    const other = findCondition(right, condition.type);
    return (
      other !== undefined &&
      other.status === condition.status &&
      other.reason === condition.reason &&
      other.message === condition.message &&
      other.lastTransitionTime === condition.lastTransitionTime &&
      other.observedGeneration === condition.observedGeneration
    );
  });
}

/** Ready=True with a reason. */
export function ready(reason: string, message = '', observedGeneration?: number): ConditionUpdate {
  return { type: 'Ready', status: 'True', reason, message, observedGeneration };
}

/** Ready=False with a reason. */
export function notReady(reason: string, message = '', observedGeneration?: number): ConditionUpdate {
  return { type: 'Ready', status: 'False', reason, message, observedGeneration };
}
