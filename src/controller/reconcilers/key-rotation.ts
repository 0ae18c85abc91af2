// Zero-downtime rotation of an Application's key. The vault lets an application hold several live keys
// (POST/DELETE /applications/{id}/keys), so a rotation never leaves the Secret holding a dead key:
//   1. create a new key, 2. write it into the Secret (pods that re-read the Secret move to it), 3. keep the previous
//   key working for spec.keyRotation.gracePeriod (pods still holding it keep working), 4. delete every other key.
// A rotation is asked for by a new value of the annotation tokenvault.dev/rotate-key, or is due every
// spec.keyRotation.every after the current key was made. Its state lives in status.key, so a controller restart (or
// another replica taking the lease) carries it on; a key left by a crash between steps 1 and 2 is deleted at step 4
// with the rest (nobody holds it: only the operator may change a managed application's keys).
import { ready, type ConditionUpdate } from '../conditions.js';
import type { ReconcileContext } from '../manager.js';
import type { VaultClient } from '../vault-client.js';
import { writeKeySecret, type VaultObject } from './common.js';

export const ROTATE_ANNOTATION = 'tokenvault.dev/rotate-key';
export const DEFAULT_GRACE_PERIOD = '10m';
export const KEY_CONDITION = 'KeyRotated';

export interface KeyRotationSpec {
  every?: string;
  gracePeriod?: string;
}

/** status.key: the key the Secret holds, and a rotation in its grace period. */
export interface KeyStatus {
  id?: string;
  rotatedAt?: string;
  /** The last tokenvault.dev/rotate-key value acted on. */
  rotateRequest?: string;
  previousId?: string;
  /** When the previous key is deleted. */
  previousRetiresAt?: string;
}

interface VaultKey {
  id: string;
  key?: string;
  created_at: string;
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds of a Go-style duration ("720h", "1h30m", "90s"), as the CRD's pattern and CEL duration() accept. */
export function parseDuration(text: string): number {
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text) throw new Error(`not a duration: ${text}`);
  return parts.reduce((sum, [, amount, unit]) => sum + Number(amount) * UNITS[unit], 0);
}

type Rotatable = VaultObject<{ keyRotation?: KeyRotationSpec; keySecretRef: { name: string; key?: string } }> & {
  status?: VaultObject['status'] & { key?: KeyStatus };
};

export interface RotationOutcome {
  condition: ConditionUpdate;
  requeueAfterMs?: number;
}

/**
 * Carries the object's key rotation one step on: retires the previous key once its grace period is over, starts a
 * rotation that is asked for or due, and records the key the Secret holds. `current` is the key id the Secret holds
 * when the caller has just written it (a new application or a regenerated key), which resets the rotation state.
 */
export async function reconcileKeyRotation(
  vault: VaultClient,
  ctx: ReconcileContext<Rotatable>,
  object: Rotatable,
  tenantId: string,
  applicationId: string,
  current?: string,
): Promise<RotationOutcome> {
  const path = `/applications/${applicationId}/keys`;
  const now = Date.now();
  const requested = object.metadata?.annotations?.[ROTATE_ANNOTATION] || undefined;
  const graceMs = parseDuration(object.spec.keyRotation?.gracePeriod ?? DEFAULT_GRACE_PERIOD);
  let state: KeyStatus = { ...(object.status?.key ?? {}) };

  if (current !== undefined) {
    // The Secret was just (re)written with the only key: nothing else to retire. An annotation already present
    // counts as handled, so a fresh object does not rotate the key it has just been given.
    state = { id: current, rotatedAt: new Date(now).toISOString(), rotateRequest: requested };
  } else if (state.id === undefined) {
    // Objects made before rotation existed: the application's newest key is the one the Secret holds.
    const listed = (await vault.call<VaultKey[]>('GET', path, { tenantId })) ?? [];
    const newest = listed.at(-1);
    state = { id: newest?.id, rotatedAt: newest?.created_at, rotateRequest: requested };
  }

  if (state.previousId !== undefined) {
    const retiresAt = Date.parse(state.previousRetiresAt ?? '');
    if (now < retiresAt) {
      await saveKeyStatus(ctx, object, state);
      return {
        condition: keyCondition(
          'GracePeriod',
          `Key ${state.id} is current; key ${state.previousId} works until ${state.previousRetiresAt}.`,
        ),
        requeueAfterMs: retiresAt - now,
      };
    }
    // Every key but the Secret's goes: the previous one, and any left by a rotation that crashed before its Secret write.
    const listed = (await vault.call<VaultKey[]>('GET', path, { tenantId })) ?? [];
    for (const stale of listed.filter((k) => k.id !== state.id)) {
      await vault.call('DELETE', `${path}/${stale.id}`, { tenantId, allowMissing: true });
    }
    await ctx.event('Normal', 'KeyRetired', `Deleted the previous key ${state.previousId} after the grace period.`);
    state = { ...state, previousId: undefined, previousRetiresAt: undefined };
  }

  const everyMs = object.spec.keyRotation?.every ? parseDuration(object.spec.keyRotation.every) : undefined;
  const dueAt = everyMs !== undefined && state.rotatedAt ? Date.parse(state.rotatedAt) + everyMs : undefined;
  const asked = requested !== undefined && requested !== state.rotateRequest;
  if (state.id !== undefined && (asked || (dueAt !== undefined && now >= dueAt))) {
    const created = (await vault.call<VaultKey>('POST', path, { tenantId }))!;
    await writeKeySecret(ctx, object, object.spec.keySecretRef, created.key!);
    const retiresAt = new Date(now + graceMs).toISOString();
    state = {
      id: created.id,
      rotatedAt: new Date(now).toISOString(),
      rotateRequest: requested,
      previousId: state.id,
      previousRetiresAt: retiresAt,
    };
    await saveKeyStatus(ctx, object, state);
    await ctx.event(
      'Normal',
      'KeyRotated',
      `Wrote new key ${created.id} to Secret ${object.spec.keySecretRef.name} (${asked ? 'annotation' : 'schedule'}); the previous key works until ${retiresAt}.`,
    );
    return {
      condition: keyCondition(
        'GracePeriod',
        `Key ${state.id} is current; key ${state.previousId} works until ${retiresAt}.`,
      ),
      requeueAfterMs: graceMs,
    };
  }

  await saveKeyStatus(ctx, object, state);
  const next = dueAt !== undefined ? Math.max(1000, dueAt - now) : undefined;
  return {
    condition: keyCondition(
      'Current',
      state.id === undefined
        ? 'The application has no key.'
        : `Key ${state.id} is the only key${next !== undefined ? `; the next rotation is at ${new Date(dueAt!).toISOString()}` : ''}.`,
    ),
    // A long schedule is met by the periodic resync as well; the requeue makes it on time.
    requeueAfterMs: next === undefined ? undefined : Math.min(next, 2 ** 31 - 1),
  };
}

function keyCondition(reason: string, message: string): ConditionUpdate {
  return { ...ready(reason, message), type: KEY_CONDITION };
}

/** Writes status.key when it changed (a merge patch: absent members are removed with null). */
async function saveKeyStatus(ctx: ReconcileContext<Rotatable>, object: Rotatable, state: KeyStatus): Promise<void> {
  const previous = object.status?.key ?? {};
  const fields: Array<keyof KeyStatus> = ['id', 'rotatedAt', 'rotateRequest', 'previousId', 'previousRetiresAt'];
  if (fields.every((f) => previous[f] === state[f])) return;
  const key = Object.fromEntries(fields.map((f) => [f, state[f] ?? null]));
  const updated = await ctx.patchStatus({ key });
  object.status = { ...(object.status ?? {}), key: updated.status?.key ?? state };
}
