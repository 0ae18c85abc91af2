// A reactor created or changed (PUT, PATCH) while its formula or its application is deleted or changed: the write read
// them, then one changed before the write (through another request, or another replica whose watch event had not
// arrived). The reactor must not be left on a formula or an application that is gone, or with a configuration the
// formula no longer declares. The store here is the embedded one (MemoryStore) with the interleaving forced: the change
// comes right after the write's read. The token, runtime and key collaborators are fakes: writes do not use them.
import { afterEach, expect, test } from '@jest/globals';
import type { TenantPrincipal } from '../../src/auth/principal.js';
import type { ApplicationDirectory } from '../../src/domain/applications/directory.js';
import type { ApplicationRecord } from '../../src/domain/applications/service.js';
import type { FormulaBody } from '../../src/domain/formulas/schema.js';
import { FormulaService } from '../../src/domain/formulas/service.js';
import type { BtKeys } from '../../src/domain/reactors/bt-keys.js';
import { ReactorService } from '../../src/domain/reactors/service.js';
import type { Detokenizer } from '../../src/domain/tokens/detokenizer.js';
import type { DataCipher } from '../../src/domain/tokens/records.js';
import type { TokenService } from '../../src/domain/tokens/service.js';
import { toProblem, VaultError } from '../../src/errors/registry.js';
import type { RuntimeRouter } from '../../src/runtime/client/router.js';
import { decode, encode } from '../../src/store/codec.js';
import { keys } from '../../src/store/keys.js';
import { MemoryStore } from '../../src/store/memory.js';
import type { StoredAt } from '../../src/store/records.js';
import type { Entry, Store } from '../../src/store/store.js';

const tenantId = '00000000-0000-4000-8000-00000000000a';

const principal: TenantPrincipal = {
  kind: 'application',
  tenantId,
  applicationId: 'app',
  applicationType: 'management',
  permissions: new Set(['reactor:create', 'application:update']),
  rules: [],
};

const cipher = {
  encrypt: async (_tenant: string, _aad: string, plain: string) => Buffer.from(plain).toString('base64'),
  decrypt: async (_tenant: string, _aad: string, sealed: string) => Buffer.from(sealed, 'base64'),
} as unknown as DataCipher;

const formulaBody = (configuration: FormulaBody['configuration'] = []): FormulaBody => ({
  name: 'f',
  type: 'private',
  code: 'module.exports = async () => ({ raw: 1 });',
  configuration,
  request_parameters: [],
});

let services: Array<{ stop(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(services.map((s) => s.stop()));
  services = [];
});

/**
 * The store with a hook: the next read of `key` answers what is stored, and `then` runs (changing the formula)
 * before the reader sees the answer.
 */
function interleaving(store: MemoryStore) {
  let armed: { key: string; then: () => Promise<void> } | undefined;
  const hooked = new Proxy(store, {
    get(target, property, receiver) {
      if (property !== 'get') return Reflect.get(target, property, receiver) as unknown;
      return async (key: string): Promise<Entry | undefined> => {
        const entry = await target.get(key);
        if (armed?.key === key) {
          const { then } = armed;
          armed = undefined;
          await then();
        }
        return entry;
      };
    },
  }) as Store;
  return { store: hooked, afterReadOf: (key: string, then: () => Promise<void>) => (armed = { key, then }) };
}

function servicesOn(store: Store, applications?: ApplicationDirectory) {
  const formulas = new FormulaService(store, { perTenant: 0 });
  const reactors = new ReactorService(
    store,
    cipher,
    formulas,
    {} as TokenService,
    {} as Detokenizer,
    {} as RuntimeRouter,
    {} as BtKeys,
    { perTenant: 0, applications },
  );
  services.push(reactors, formulas);
  return { formulas, reactors };
}

const applicationId = '00000000-0000-4000-8000-0000000000a1';

/** A private application, written straight to the store; its key. */
async function putApplication(memory: MemoryStore): Promise<string> {
  const key = keys.application(tenantId, applicationId);
  await memory.put(
    key,
    encode('application', {
      id: applicationId,
      tenant_id: tenantId,
      name: 'attached',
      type: 'private',
      permissions: [],
      rules: [],
      keys: [],
      created_at: new Date().toISOString(),
      created_by: 'app',
    }),
  );
  return key;
}

const owner = { tenantId, actor: 'app' };

/**
 * The embedded store with the interleaving hook, the formula and reactor services on it (the reactors reading
 * applications through `applications` when given), and a formula that declares no configuration.
 */
async function setUp(applications?: ApplicationDirectory) {
  const memory = new MemoryStore();
  const { store, afterReadOf } = interleaving(memory);
  const { formulas, reactors } = servicesOn(store, applications);
  const formula = await formulas.create(owner, formulaBody());
  return { memory, afterReadOf, formulas, reactors, formula };
}

async function refusal(promise: Promise<unknown>): Promise<VaultError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(VaultError);
  return error as VaultError;
}

test('a reactor is not created on a formula deleted after the create read it', async () => {
  const { memory, afterReadOf, formulas, reactors, formula } = await setUp();

  afterReadOf(keys.formula(tenantId, formula.id), async () => {
    await formulas.delete(owner, formula.id, async () => undefined);
  });
  const error = await refusal(reactors.create(principal, { name: 'r', formula: { id: formula.id } }));
  expect(error.status).toBe(400);
  expect(JSON.stringify(toProblem(error))).toContain('no such reactor formula');
  expect(await memory.range(keys.reactors(tenantId))).toEqual([]);
  expect(await memory.range(keys.formulaRefs(formula.id))).toEqual([]);
});

test('a reactor is checked against the formula as it is when written, not as the create read it', async () => {
  const { memory, afterReadOf, formulas, reactors, formula } = await setUp();

  // The formula now requires a configuration value the create does not give.
  afterReadOf(keys.formula(tenantId, formula.id), async () => {
    await formulas.update(owner, formula.id, formulaBody([{ name: 'greeting', type: 'string' }]));
  });
  const error = await refusal(reactors.create(principal, { name: 'r', formula: { id: formula.id } }));
  expect(error.status).toBe(400);
  expect(JSON.stringify(toProblem(error))).toContain('is required by the formula');
  expect(await memory.range(keys.reactors(tenantId))).toEqual([]);

  // Given it, the same create succeeds, on the formula as it now is.
  const created = await reactors.create(principal, {
    name: 'r',
    formula: { id: formula.id },
    configuration: { greeting: 'hello' },
  });
  expect(created.configuration).toEqual({ greeting: 'hello' });
});

test('a reactor is not attached to an application deleted after the create read it', async () => {
  const { memory, afterReadOf, reactors, formula } = await setUp();
  const applicationKey = await putApplication(memory);

  afterReadOf(applicationKey, async () => void (await memory.delete(applicationKey)));
  const error = await refusal(
    reactors.create(principal, { name: 'r', formula: { id: formula.id }, application: { id: applicationId } }),
  );
  expect(error.status).toBe(400);
  expect(JSON.stringify(toProblem(error))).toContain('no such application');
  expect(await memory.range(keys.reactors(tenantId))).toEqual([]);
});

test('a PUT does not attach an application deleted after the PUT read it', async () => {
  const { memory, afterReadOf, reactors, formula } = await setUp();
  const reactor = await reactors.create(principal, { name: 'r', formula: { id: formula.id } });
  const applicationKey = await putApplication(memory);

  afterReadOf(applicationKey, async () => void (await memory.delete(applicationKey)));
  const error = await refusal(
    reactors.update(principal, reactor.id, {
      name: 'r',
      formula: { id: formula.id },
      application: { id: applicationId },
    }),
  );
  expect(error.status).toBe(400);
  expect(JSON.stringify(toProblem(error))).toContain('no such application');
  expect((await reactors.get(tenantId, reactor.id)).application).toBeUndefined();
});

test('a PATCH is checked against the formula as it is when written, not as the PATCH read it', async () => {
  const { memory, afterReadOf, formulas, reactors, formula } = await setUp();
  const reactor = await reactors.create(principal, { name: 'r', formula: { id: formula.id } });
  const applicationKey = await putApplication(memory);

  // The PATCH takes the formula from the cache and reads the application; right after, the formula comes to require
  // a configuration value the reactor does not have.
  afterReadOf(applicationKey, async () => {
    await formulas.update(owner, formula.id, formulaBody([{ name: 'greeting', type: 'string' }]));
  });
  const error = await refusal(reactors.patch(principal, reactor.id, { application: { id: applicationId } }));
  expect(error.status).toBe(400);
  expect(JSON.stringify(toProblem(error))).toContain('is required by the formula');
  expect((await reactors.get(tenantId, reactor.id)).application).toBeUndefined();

  // Given the value, the same change is made, on the formula as it now is.
  const patched = await reactors.patch(principal, reactor.id, {
    application: { id: applicationId },
    configuration: { greeting: 'hello' },
  });
  expect(patched.application?.id).toBe(applicationId);
  expect(patched.configuration).toEqual({ greeting: 'hello' });
});

test('a reactor is not attached to an application deleted on another replica, whose watch event has not arrived', async () => {
  // This replica's application cache, a watch event behind: it still holds the application as it was.
  const cached: { copy?: StoredAt<ApplicationRecord> } = {};
  const stale = { storedAt: async () => cached.copy } as unknown as ApplicationDirectory;
  const { memory, reactors, formula } = await setUp(stale);
  const applicationKey = await putApplication(memory);
  const stored = (await memory.get(applicationKey))!;
  cached.copy = {
    key: applicationKey,
    modRevision: stored.modRevision,
    value: decode<ApplicationRecord>('application', stored.value),
  };
  await memory.delete(applicationKey);

  const error = await refusal(
    reactors.create(principal, { name: 'r', formula: { id: formula.id }, application: { id: applicationId } }),
  );
  expect(error.status).toBe(400);
  expect(JSON.stringify(toProblem(error))).toContain('no such application');
  expect(await memory.range(keys.reactors(tenantId))).toEqual([]);
});
