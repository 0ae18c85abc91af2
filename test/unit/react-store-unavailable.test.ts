// A reactor invocation while etcd does not answer: the formula read alongside the reactor (its id known from an earlier
// call) fails after the store's deadline, and that is the answer. Reading the same formula again would make the
// caller wait a second deadline for its 503. The other collaborators are fakes; the real path is covered by
// test/integration/reactors.test.ts.
import { afterEach, expect, test } from '@jest/globals';
import type { TenantPrincipal } from '../../src/auth/principal.js';
import { Errors } from '../../src/errors/registry.js';
import type { FormulaService, Formula } from '../../src/domain/formulas/service.js';
import type { BtKeys } from '../../src/domain/reactors/bt-keys.js';
import { ReactorService } from '../../src/domain/reactors/service.js';
import type { Detokenizer } from '../../src/domain/tokens/detokenizer.js';
import type { DataCipher } from '../../src/domain/tokens/records.js';
import type { TokenService } from '../../src/domain/tokens/service.js';
import type { RuntimeRouter } from '../../src/runtime/client/router.js';
import { encode } from '../../src/store/codec.js';
import { keys } from '../../src/store/keys.js';
import { MemoryStore } from '../../src/store/memory.js';

const tenantId = '00000000-0000-4000-8000-00000000000a';
const reactorId = '00000000-0000-4000-8000-000000000001';
const formulaId = '00000000-0000-4000-8000-000000000002';

const cipher = {
  decrypt: async (_tenant: string, _aad: string, sealed: string) => Buffer.from(sealed, 'base64'),
} as unknown as DataCipher;

const principal: TenantPrincipal = {
  kind: 'application',
  tenantId,
  applicationId: 'app',
  applicationType: 'private',
  permissions: new Set(['token:use']),
  rules: [],
};

const formula: Formula = {
  id: formulaId,
  name: 'echo',
  type: 'private',
  status: 'verified',
  code: 'module.exports = async () => ({ raw: 1 });',
  configuration: [],
  request_parameters: [],
  created_at: new Date().toISOString(),
  created_by: 'app',
  tenant_id: tenantId,
};

let reactors: ReactorService | undefined;
afterEach(async () => {
  await reactors?.stop();
});

test('a formula read that failed with the store unavailable is not read again', async () => {
  const store = new MemoryStore();
  await store.put(
    keys.reactor(tenantId, reactorId),
    encode('reactor', {
      id: reactorId,
      tenant_id: tenantId,
      name: 'echo',
      formula_id: formulaId,
      sealed_configuration: Buffer.from('{}').toString('base64'),
      created_at: new Date().toISOString(),
      created_by: 'app',
    }),
  );
  let formulaReads = 0;
  let storeDown = false;
  const formulas = {
    cached: async () => {
      formulaReads++;
      if (storeDown) throw new Errors.StoreUnavailable();
      return formula;
    },
  } as unknown as FormulaService;
  const detokenizer = { read: async () => ({ use: async () => ({}) }) } as unknown as Detokenizer;
  const runtime = {
    clientFor: async () => ({ invoke: async () => ({ ok: true, result: { raw: 1 } }) }),
  } as unknown as RuntimeRouter;
  reactors = new ReactorService(store, cipher, formulas, {} as TokenService, detokenizer, runtime, {} as BtKeys, {
    perTenant: 0,
  });

  // The first call learns the reactor's formula id; the next one reads the formula alongside the reactor.
  expect(await reactors.react(principal, reactorId, {})).toEqual({ raw: 1 });
  storeDown = true;
  formulaReads = 0;
  await expect(reactors.react(principal, reactorId, {})).rejects.toBeInstanceOf(Errors.StoreUnavailable);
  expect(formulaReads).toBe(1);
});
