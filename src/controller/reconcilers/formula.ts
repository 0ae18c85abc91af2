// ReactorFormula (a tenant's private formula: /reactor-formulas, the operator acting in the tenant) and
// ClusterReactorFormula (an official formula: /admin/reactor-formulas, the operator alone). The vault id is the
// object's uid, so a create retried after a crash finds the formula (409) instead of making a second one. A formula
// still used by reactors cannot be deleted: the API's 409 names them; the object keeps its finalizer, shows Ready=False
// (InUse) and is retried, and a deleted Reactor that used it requeues it at once.
import { notReady } from '../conditions.js';
import type { ObjectKey, ReconcileContext, Reconciler } from '../manager.js';
import { VaultRefused, type VaultClient } from '../vault-client.js';
import {
  ensureFinalizer,
  FINALIZER,
  Kinds,
  managedBy,
  NotReadyYet,
  Ready,
  removeFinalizer,
  reportingFailures,
  tenantIdOf,
  writeStatus,
  type VaultObject,
} from './common.js';
import { differs } from './configuration.js';

interface Element {
  name: string;
  description?: string;
  type: 'string' | 'number' | 'boolean';
  optional?: boolean;
}

export type FormulaSpec = {
  tenantRef?: { name: string };
  displayName?: string;
  description?: string;
  status?: 'verified' | 'coming_soon';
  icon?: string;
  code: string;
  configuration?: Element[];
  requestParameters?: Element[];
};

export type FormulaObject = VaultObject<FormulaSpec>;

const FIELDS = ['name', 'description', 'status', 'icon', 'code', 'configuration', 'request_parameters'] as const;

/** How the vault holds one scope's formulas. */
interface Scope {
  kind: 'ReactorFormula' | 'ClusterReactorFormula';
  type: 'private' | 'official';
  /** Collection path. */
  path: string;
  tenantId(ctx: ReconcileContext<FormulaObject>, object: FormulaObject, deleting: boolean): string | undefined;
  get(vault: VaultClient, id: string, tenantId: string | undefined): Promise<Record<string, unknown> | undefined>;
}

export function formulaBody(object: FormulaObject, type: 'private' | 'official'): Record<string, unknown> {
  const spec = object.spec;
  return {
    name: spec.displayName ?? object.metadata!.name!,
    description: spec.description,
    type,
    status: spec.status ?? 'verified',
    icon: spec.icon,
    code: spec.code,
    configuration: (spec.configuration ?? []).map(({ name, description, type: t }) => ({ name, description, type: t })),
    request_parameters: (spec.requestParameters ?? []).map(({ name, description, type: t, optional }) => ({
      name,
      description,
      type: t,
      optional: optional ?? false,
    })),
  };
}

/** The ConfigurationElement types a formula object declares (Reactors use them when an entry gives no `type`). */
export function declaredTypes(formula: FormulaObject | undefined): Map<string, Element['type']> {
  return new Map((formula?.spec.configuration ?? []).map((element) => [element.name, element.type]));
}

function formulaReconcilerFor(vault: VaultClient, scope: Scope): Reconciler<FormulaObject> {
  const resource = Kinds[scope.kind];
  return {
    kind: scope.kind,
    resource,
    async reconcile(key, ctx) {
      const object = ctx.object;
      if (!object) return;
      const namespace = key.namespace;
      const id = object.metadata!.uid!;
      const tenantKey: ObjectKey[] =
        object.spec.tenantRef?.name && namespace
          ? [{ kind: 'Tenant', namespace, name: object.spec.tenantRef.name }]
          : [];
      ctx.references.set(tenantKey);
      return reportingFailures(ctx, object, async () => {
        if (object.metadata?.deletionTimestamp) {
          if (!object.metadata.finalizers?.includes(FINALIZER)) return;
          const tenantId = scope.tenantId(ctx, object, true);
          if (scope.kind === 'ClusterReactorFormula' || tenantId) {
            try {
              await vault.call('DELETE', `${scope.path}/${id}`, { tenantId, allowMissing: true });
            } catch (error) {
              if (!(error instanceof VaultRefused) || error.code !== 'TV_FORMULA_IN_USE') throw error;
              // Still used: requeue when one of the (Kubernetes) Reactors running it goes, and poll for the others.
              ctx.references.set([...tenantKey, ...reactorsUsing(ctx, scope.kind, namespace, key.name)]);
              await writeStatus(ctx, object, notReady('InUse', error.describe()));
              await ctx.event('Warning', 'InUse', error.describe());
              return { requeueAfterMs: 15_000 };
            }
          }
          await removeFinalizer(ctx, object);
          return;
        }
        await ensureFinalizer(ctx, object);
        const tenantId = scope.tenantId(ctx, object, false);
        const body = formulaBody(object, scope.type);
        const owner = managedBy(object);
        let current = await scope.get(vault, id, tenantId);
        if (!current) {
          try {
            current = await vault.call<Record<string, unknown>>('POST', scope.path, {
              tenantId,
              managedBy: owner,
              body: { ...body, id },
            });
            await ctx.event('Normal', 'Created', `Created reactor formula ${id}.`);
          } catch (error) {
            if (!(error instanceof VaultRefused) || error.status !== 409) throw error;
            current = await scope.get(vault, id, tenantId); // created by an earlier attempt that did not record it
            if (!current) throw error;
          }
        }
        if (differs(body, current!, FIELDS)) {
          await vault.call('PUT', `${scope.path}/${id}`, { tenantId, managedBy: owner, body });
          await ctx.event('Normal', 'Updated', `Updated reactor formula ${id}.`);
        }
        await writeStatus(ctx, object, Ready(), id);
      });
    },
  };
}

/** The Reactor objects (from the cache) whose formulaRef names this formula. */
function reactorsUsing(ctx: ReconcileContext, kind: string, namespace: string | undefined, name: string): ObjectKey[] {
  const reactors = ctx.list<VaultObject<{ formulaRef?: { kind?: string; name: string } }>>('Reactor', namespace);
  return reactors
    .filter((r) => r.spec?.formulaRef?.name === name && (r.spec.formulaRef.kind ?? 'ReactorFormula') === kind)
    .map((r) => ({ kind: 'Reactor', namespace: r.metadata!.namespace, name: r.metadata!.name! }));
}

/** A namespaced ReactorFormula: a private formula of the tenant its tenantRef names. */
export function formulaReconciler(vault: VaultClient): Reconciler<FormulaObject> {
  return formulaReconcilerFor(vault, {
    kind: 'ReactorFormula',
    type: 'private',
    path: '/reactor-formulas',
    tenantId(ctx, object, deleting) {
      const namespace = object.metadata!.namespace!;
      if (!deleting) return tenantIdOf(ctx, namespace, object.spec.tenantRef);
      // Deleting: a Tenant that is gone took (or kept, Retain) its data; nothing is left to do here.
      return ctx.get<VaultObject>('Tenant', namespace, object.spec.tenantRef?.name ?? '')?.status?.id;
    },
    get: (vault, id, tenantId) =>
      vault.call<Record<string, unknown>>('GET', `/reactor-formulas/${id}`, { tenantId, allowMissing: true }),
  });
}

/** A ClusterReactorFormula: an official formula, which every tenant sees. */
export function clusterFormulaReconciler(vault: VaultClient): Reconciler<FormulaObject> {
  return formulaReconcilerFor(vault, {
    kind: 'ClusterReactorFormula',
    type: 'official',
    path: '/admin/reactor-formulas',
    tenantId: () => undefined,
    // The admin routes have no GET by id: page through the official formulas (there are few).
    async get(vault, id) {
      for (let page = 1; page <= 100; page++) {
        const answer = await vault.call<{ data: Array<Record<string, unknown>>; pagination: { total_pages: number } }>(
          'GET',
          `/admin/reactor-formulas?page=${page}&size=100`,
        );
        const found = answer?.data.find((formula) => formula.id === id);
        if (found) return found;
        if (!answer || page >= answer.pagination.total_pages) return undefined;
      }
      throw new NotReadyYet('VaultRefused', 'Too many official formulas to find this one.', 60_000);
    },
  });
}
