// Every reconciler the controller runs, one per kind.
import type { Reconciler } from '../manager.js';
import type { VaultClient } from '../vault-client.js';
import { applicationReconciler } from './application.js';
import { clusterFormulaReconciler, formulaReconciler } from './formula.js';
import { proxyReconciler } from './proxy.js';
import { reactorReconciler } from './reactor.js';
import { tenantReconciler } from './tenant.js';

export function createReconcilers(vault: VaultClient): Reconciler<any>[] {
  return [
    tenantReconciler(vault),
    applicationReconciler(vault),
    formulaReconciler(vault),
    clusterFormulaReconciler(vault),
    reactorReconciler(vault),
    proxyReconciler(vault),
  ];
}
