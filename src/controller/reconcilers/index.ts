// Every reconciler the controller runs, one per kind.
import type { Reconciler } from '../manager.js';
import type { VaultClient } from '../vault-client.js';
import { applicationReconciler } from './application.js';
import { FINALIZER } from './common.js';
import { clusterFormulaReconciler, formulaReconciler } from './formula.js';
import { proxyReconciler } from './proxy.js';
import { reactorReconciler } from './reactor.js';
import type { RuntimeDefaults } from './runtime.js';
import { tenantReconciler } from './tenant.js';

/** `runtime`: the dedicated workers' defaults (TOKENVAULT_WORKER_IMAGE, and the API URL they call). */
export function createReconcilers(vault: VaultClient, runtime: RuntimeDefaults = {}): Reconciler[] {
  const reconcilers: Reconciler[] = [
    tenantReconciler(vault, runtime),
    applicationReconciler(vault),
    formulaReconciler(vault),
    clusterFormulaReconciler(vault),
    reactorReconciler(vault),
    proxyReconciler(vault),
  ];
  // Every kind's reconcile adds FINALIZER (ensureFinalizer) and goes on: that write must not queue the object again.
  return reconcilers.map((reconciler) => ({ ...reconciler, finalizer: FINALIZER }));
}
