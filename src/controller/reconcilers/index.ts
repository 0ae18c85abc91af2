// Every reconciler the controller runs, one per kind.
import type { Reconciler } from '../manager.js';
import type { VaultClient } from '../vault-client.js';
import { applicationReconciler } from './application.js';
import { clusterFormulaReconciler, formulaReconciler } from './formula.js';
import { proxyReconciler } from './proxy.js';
import { reactorReconciler } from './reactor.js';
import type { RuntimeDefaults } from './runtime.js';
import { tenantReconciler } from './tenant.js';

/** `runtime`: the dedicated workers' defaults (TOKENVAULT_WORKER_IMAGE, and the API URL they call). */
export function createReconcilers(vault: VaultClient, runtime: RuntimeDefaults = {}): Reconciler[] {
  return [
    tenantReconciler(vault, runtime),
    applicationReconciler(vault),
    formulaReconciler(vault),
    clusterFormulaReconciler(vault),
    reactorReconciler(vault),
    proxyReconciler(vault),
  ];
}
