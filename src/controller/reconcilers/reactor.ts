// Reactor: a formula (ReactorFormula in this namespace, or ClusterReactorFormula) or inline code, configured for the
// tenant its tenantRef names, optionally with an Application whose key the code gets as `bt`. Configuration values
// come inline or from Secrets (read live, converted to the entry's type or the formula's declared type); the Tenant,
// the formula, the Application and those Secrets are references, so a change to any of them requeues the Reactor and
// the vault gets the new values. The vault id is the object's uid (a retried create finds it: 409, no duplicate).
import type { ObjectKey, Reconciler } from '../manager.js';
import type { VaultClient } from '../vault-client.js';
import {
  fetchOrCreate,
  ensureFinalizer,
  Kinds,
  managedBy,
  Ready,
  readyIdOf,
  deleteFromTenant,
  reportingFailures,
  tenantIdOf,
  writeStatus,
  type VaultObject,
} from './common.js';
import { differs, tenantResourceReferences, resolveConfiguration, type ConfigurationSpec } from './configuration.js';
import { declaredTypes, type FormulaObject } from './formula.js';

export type ReactorSpec = {
  tenantRef: { name: string };
  displayName?: string;
  formulaRef?: { kind?: 'ReactorFormula' | 'ClusterReactorFormula'; name: string };
  code?: string;
  configuration?: ConfigurationSpec;
  applicationRef?: { name: string };
};

export type ReactorObject = VaultObject<ReactorSpec>;

const FIELDS = ['name', 'configuration', 'application', 'code'] as const;

export function reactorReconciler(vault: VaultClient): Reconciler<ReactorObject> {
  return {
    kind: 'Reactor',
    resource: Kinds.Reactor,
    watchSecrets: true,
    async reconcile(key, ctx) {
      const object = ctx.object;
      if (!object) return;
      const namespace = key.namespace!;
      const spec = object.spec;
      const id = object.metadata!.uid!;
      const formulaKind = spec.formulaRef ? (spec.formulaRef.kind ?? 'ReactorFormula') : undefined;
      const formulaNamespace = formulaKind === 'ReactorFormula' ? namespace : undefined;
      const formula: ObjectKey[] =
        spec.formulaRef && formulaKind
          ? [{ kind: formulaKind, namespace: formulaNamespace, name: spec.formulaRef.name }]
          : [];
      ctx.references.set(tenantResourceReferences(namespace, spec, ...formula));

      return reportingFailures(ctx, object, async () => {
        if (object.metadata?.deletionTimestamp)
          return deleteFromTenant(ctx, object, vault, spec.tenantRef, `/reactors/${id}`);
        await ensureFinalizer(ctx, object);
        const tenantId = tenantIdOf(ctx, namespace, spec.tenantRef);
        let formulaId: string | undefined;
        let types = new Map<string, 'string' | 'number' | 'boolean'>();
        if (spec.formulaRef && formulaKind) {
          formulaId = readyIdOf(ctx, formulaKind, formulaNamespace, spec.formulaRef.name);
          types = declaredTypes(ctx.get<FormulaObject>(formulaKind, formulaNamespace, spec.formulaRef.name));
        }
        const applicationId = spec.applicationRef
          ? readyIdOf(ctx, 'Application', namespace, spec.applicationRef.name)
          : undefined;
        const configuration = await resolveConfiguration(ctx, namespace, spec.configuration, (name) => types.get(name));

        const desired: Record<string, unknown> = {
          name: spec.displayName ?? object.metadata!.name!,
          configuration,
          application: applicationId ? { id: applicationId } : undefined,
          code: formulaId ? undefined : spec.code,
        };
        const request = { tenantId, managedBy: managedBy(object) };
        const body = { ...desired, id, ...(formulaId ? { formula: { id: formulaId } } : {}) };
        const current = await fetchOrCreate(
          ctx,
          vault,
          { collection: '/reactors', id, noun: 'reactor' },
          request,
          body,
        );
        if (differs(desired, current, FIELDS)) {
          await vault.call('PUT', `/reactors/${id}`, {
            ...request,
            body: { ...desired, application: desired.application ?? null },
          });
          await ctx.event('Normal', 'Updated', `Updated reactor ${id}.`);
        }
        await writeStatus(ctx, object, Ready(), id);
      });
    },
  };
}
