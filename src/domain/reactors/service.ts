// Reactors: a formula (or inline code) configured for a tenant, optionally with an application whose key the code
// gets as `bt`. Configuration is encrypted at rest. Invoking one runs invocation rules 1–10: detokenize the args,
// apply the formula's request parameters, run the code on a worker, tokenize what it asks to tokenize.
import { randomUUID } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { actorId, type TenantPrincipal } from '../../auth/principal.js';
import { Errors, ReactorFailure, VaultError, type FieldErrors } from '../../errors/registry.js';
import type { RuntimeRouter } from '../../runtime/client/router.js';
import type { InvocationFailure } from '../../runtime/contract.js';
import { allowedCustomStatus, customResponseHeaders, refusedCustomStatus } from '../../runtime/custom-response.js';
import { keys } from '../../store/keys.js';
import { getRecord, getRecordAt, type StoredAt } from '../../store/records.js';
import type { Compare, Store, TxnOp } from '../../store/store.js';
import { PrefixWatchedCache } from '../../store/watched-cache.js';
import { assertMayAttach, assertMayDelegate, assertMayRedirect, changedFields } from '../applications/delegation.js';
import { commitChange, type ChangeOptions } from '../audited-commit.js';
import { mergePatch } from '../merge-patch.js';
import type { ApplicationDirectory } from '../applications/directory.js';
import type { ApplicationRecord } from '../applications/service.js';
import { assertCompiles, codeHash } from '../formulas/code.js';
import type { Formula, FormulaService } from '../formulas/service.js';
import { CreationOrder, orderDelete, orderPut } from '../creation-order.js';
import { TenantLimit, type TenantLimitsSource } from '../tenant-limits.js';
import type { Page, PageRequest } from '../paging.js';
import type { Detokenizer } from '../tokens/detokenizer.js';
import type { DataCipher } from '../tokens/records.js';
import type { TokenService } from '../tokens/service.js';
import { tokenize } from '../tokens/tokenize.js';
import { applyParameters } from './arguments.js';
import { assertMayChange, chosenId, managedByOf, type ManagedBy } from '../../auth/ownership.js';
import type { BtKeys } from './bt-keys.js';
import { validateUpdateReactor, type ConfigurationValues, type ReactorBody } from './schema.js';
import { encode } from '../../store/codec.js';
import { actorOf, reactorEventData } from '../../webhooks/events.js';
import type { EventSink } from '../../webhooks/service.js';

interface ReactorRecord {
  id: string;
  tenant_id: string;
  name: string;
  formula_id?: string;
  code?: string;
  application_id?: string;
  /** Ciphertext of the configuration values. */
  sealed_configuration: string;
  /** Set when a Kubernetes Reactor object declares it; then only the operator may change it. */
  managed_by?: ManagedBy;
  created_at: string;
  created_by: string;
  modified_at?: string;
  modified_by?: string;
}

export interface Reactor {
  id: string;
  tenant_id: string;
  name: string;
  formula?: Formula;
  code?: string;
  configuration: ConfigurationValues;
  application?: { id: string };
  created_at: string;
  created_by: string;
  modified_at?: string;
  modified_by?: string;
}

export interface ReactResponse {
  tokens?: unknown;
  raw?: unknown;
}

/** What a failed invocation answers: a problem, or the code's own response (CustomHttpResponseError). */
export class CustomResponse extends Error {
  constructor(
    readonly status: number,
    readonly headers: Record<string, string>,
    readonly body: unknown,
  ) {
    // Thrown like an error so that it ends the invocation's path, and caught by the routes, which answer with it; the
    // message never carries the body (it may hold data).
    super(`a custom response with status ${status}`);
    this.name = 'CustomResponse';
  }
}

/** Reactor records kept for invocations, at most (count, and characters of inline code and configuration). */
const CACHED_REACTORS = 10_000;
const CACHED_REACTOR_CHARS = 32 * 1024 * 1024;

/**
 * `"formula_id":"<id>"` in a stored reactor record's JSON. A string value cannot hold that text (its quotes are
 * escaped) and the record's member names are fixed, so a match is the member itself. An id written with escapes is not
 * matched: no hint.
 */
const STORED_FORMULA_ID = /"formula_id":"([^"\\]*)"/;

/**
 * The formula id a stored reactor record names, found without decoding the record: every replica sees every reactor
 * put, and the record may carry 32 KiB of code. A hint only (see formulaIds).
 */
function storedFormulaId(stored: string): string | undefined {
  return STORED_FORMULA_ID.exec(stored)?.[1];
}

export class ReactorService {
  /**
   * Formula id by reactor key, remembered from earlier calls, from creating the reactor here, or from the watch's
   * events (a reactor's formula cannot change; `official` is unknown until a call found the formula). A hint only:
   * `react` checks it against the record it reads.
   */
  private readonly formulaIds = new LRUCache<string, { id: string; official?: boolean }>({ max: 10_000 });
  /** Decrypted configuration by reactor key, with the ciphertext it came from (a new version does not match). */
  private readonly configurations = new LRUCache<string, { sealed: string; values: ConfigurationValues }>({
    max: 10_000,
  });
  /** Reactor records invocations read, watched per tenant: a changed or deleted reactor applies at once everywhere. */
  private readonly records: PrefixWatchedCache<ReactorRecord>;

  /** Where changes are published as webhook events (outbox writes in the change's own transaction). */
  private events: EventSink = { ops: async () => [] };
  private readonly order: CreationOrder<ReactorRecord>;
  private readonly limit: TenantLimit;
  private readonly applications: ApplicationDirectory | undefined;

  constructor(
    private readonly store: Store,
    private readonly cipher: DataCipher,
    private readonly formulas: FormulaService,
    private readonly tokens: TokenService,
    private readonly detokenizer: Detokenizer,
    private readonly runtime: RuntimeRouter,
    private readonly btKeys: BtKeys,
    options: {
      cacheSeconds?: number;
      /** Reactors one tenant may have, 0: no limit (TOKENVAULT_REACTORS_PER_TENANT). */
      perTenant: number;
      /** The tenants' own limits (Tenant spec.limits): the TenantDirectory; without it, perTenant applies to all. */
      tenantLimits?: TenantLimitsSource;
      /** The watched application cache the attached applications are read from; without it, from the store. */
      applications?: ApplicationDirectory;
    },
  ) {
    this.applications = options.applications;
    this.order = new CreationOrder(store, 'reactors', 'reactor', keys.reactors, keys.reactor);
    this.limit = new TenantLimit(store, 'reactors', options.perTenant, keys.reactors, options.tenantLimits);
    this.records = new PrefixWatchedCache(store, {
      max: CACHED_REACTORS,
      maxSize: CACHED_REACTOR_CHARS,
      sizeOf: (record) => (record?.code?.length ?? 0) + (record?.sealed_configuration.length ?? 0) + 1024,
      ttlSeconds: options.cacheSeconds ?? 300,
      // A reactor created or replaced on another replica: its first call here reads the formula in the same round
      // trip as the reactor (see `react`). Only the id is kept, never the record.
      onEvent: (event) => {
        if (event.type !== 'put' || event.value === undefined) return;
        const formulaId = storedFormulaId(event.value);
        if (formulaId !== undefined && this.formulaIds.peek(event.key)?.id !== formulaId)
          this.formulaIds.set(event.key, { id: formulaId });
      },
    });
  }

  async stop(): Promise<void> {
    await this.records.stop();
  }

  publishEventsTo(events: EventSink): void {
    this.events = events;
  }

  async create(principal: TenantPrincipal, body: ReactorBody, options: ChangeOptions = {}): Promise<Reactor> {
    const tenantId = principal.tenantId;
    if ((body.formula === undefined) === (body.code === undefined)) {
      throw new Errors.InvalidBody({ errors: { formula: ['give exactly one of formula.id and code'] } });
    }
    assertMayDelegate(principal, body.application?.id, 'reactor');
    await this.limit.assertRoomFor(tenantId);
    // The formula comes from the watched cache (the operator creates thousands of reactors on a few formulas: this
    // saves each create a round trip), and the write compares its revision and the application's. A formula or an
    // application that changed or went since it was read (a cached formula may be a watch event behind) fails that
    // compare, and the create is made again once, on a fresh read of both.
    return this.onReferences((fresh) => this.createOn(principal, body, options, fresh));
  }

  /** The new reactor; undefined when its formula or its application changed (or went) since they were read. */
  private async createOn(
    principal: TenantPrincipal,
    body: ReactorBody,
    options: ChangeOptions,
    fresh: boolean,
  ): Promise<Reactor | undefined> {
    const tenantId = principal.tenantId;
    const { formula, application } = await this.referencesOf(tenantId, body.formula?.id, body.application?.id, fresh);
    const configuration = body.configuration ?? {};
    this.check(principal, body, formula?.value, application?.value, configuration);
    const id = chosenId(principal, body.id) ?? randomUUID();
    const managedBy = managedByOf(principal);
    const record: ReactorRecord = {
      id,
      tenant_id: tenantId,
      name: body.name,
      formula_id: formula?.value.id,
      code: body.code,
      application_id: body.application?.id,
      sealed_configuration: await this.sealConfiguration(tenantId, id, configuration),
      ...(managedBy ? { managed_by: managedBy } : {}),
      created_at: new Date().toISOString(),
      created_by: actorId(principal),
    };
    const ops: TxnOp[] = [
      { type: 'put', key: keys.reactor(tenantId, id), value: encode('reactor', record) },
      orderPut(tenantId, 'reactors', record),
    ];
    if (formula) ops.push({ type: 'put', key: keys.formulaRef(formula.value.id, tenantId, id), value: '' });
    ops.push(...(await this.events.ops(tenantId, 'reactor.created', reactorEventData(record, actorOf(principal)))));
    const compare = [{ key: keys.reactor(tenantId, id), modRevision: 0 }, ...comparesOf(formula, application)];
    if (!(await commitChange(this.store, id, { compare, success: ops }, options))) {
      if ((!formula && !application) || (await this.store.get(keys.reactor(tenantId, id)))) {
        throw new Errors.Conflict(`A reactor with the id ${id} already exists.`);
      }
      return undefined;
    }
    // The first call then reads the reactor and its formula in the same round trip (see `react`).
    if (formula) {
      const official = formula.value.type === 'official';
      this.formulaIds.set(keys.reactor(tenantId, id), { id: formula.value.id, official });
    }
    return this.toReactor(record, configuration, formula?.value);
  }

  /**
   * A write on the formula and application as read (cached), and once more on a fresh read when one of them changed or
   * went meanwhile (`write` answers undefined); 409 when they changed again.
   */
  private async onReferences(write: (fresh: boolean) => Promise<Reactor | undefined>): Promise<Reactor> {
    const written = (await write(false)) ?? (await write(true));
    if (written) return written;
    throw new Errors.Conflict(
      "The reactor's formula or application changed while the reactor was being written; retry.",
    );
  }

  async get(tenantId: string, id: string): Promise<Reactor> {
    const { value } = await this.load(tenantId, id);
    return this.toReactor(value, await this.openConfiguration(value));
  }

  async list(tenantId: string, paging: PageRequest, filter: { ids?: string[]; name?: string }): Promise<Page<Reactor>> {
    const name = filter.name?.toLowerCase();
    const page = await this.order.list(tenantId, paging, {
      ids: filter.ids,
      keep: name === undefined ? undefined : (r) => r.name.toLowerCase().includes(name),
    });
    return {
      ...page,
      data: await Promise.all(page.data.map(async (r) => this.toReactor(r, await this.openConfiguration(r)))),
    };
  }

  /** PUT: name, configuration and application are replaced; the formula cannot change. */
  async update(
    principal: TenantPrincipal,
    id: string,
    body: ReactorBody,
    options: ChangeOptions = {},
  ): Promise<Reactor> {
    return this.replace(principal, id, () => body, options);
  }

  /** JSON merge patch over name, configuration and application. */
  async patch(
    principal: TenantPrincipal,
    id: string,
    patch: Partial<ReactorBody>,
    options: ChangeOptions = {},
  ): Promise<Reactor> {
    return this.replace(
      principal,
      id,
      (current, configuration) => {
        const merged: ReactorBody = {
          name: patch.name ?? current.name,
          application: current.application_id ? { id: current.application_id } : undefined,
        };
        if (patch.application !== undefined) merged.application = patch.application;
        merged.configuration =
          patch.configuration === undefined
            ? configuration
            : patch.configuration === null
              ? {}
              : (mergePatch(configuration, patch.configuration) as ConfigurationValues);
        if (patch.formula) merged.formula = patch.formula;
        if (patch.code) merged.code = patch.code;
        // What a patch makes is held to what a PUT accepts: patches of 100 names each merged past the 100 a body may hold.
        return validateUpdateReactor(merged);
      },
      options,
    );
  }

  async delete(principal: TenantPrincipal, id: string, options: ChangeOptions = {}): Promise<void> {
    const tenantId = principal.tenantId;
    const current = await this.load(tenantId, id);
    assertMayChange(current.value, principal, 'reactor');
    const ops: TxnOp[] = [
      { type: 'delete', key: keys.reactor(tenantId, id) },
      orderDelete(tenantId, 'reactors', current.value),
    ];
    if (current.value.formula_id)
      ops.push({ type: 'delete', key: keys.formulaRef(current.value.formula_id, tenantId, id) });
    ops.push(
      ...(await this.events.ops(tenantId, 'reactor.deleted', reactorEventData(current.value, actorOf(principal)))),
    );
    const txn = { compare: [{ key: keys.reactor(tenantId, id), modRevision: current.modRevision }], success: ops };
    if (!(await commitChange(this.store, id, txn, options))) {
      throw new Errors.Conflict('The reactor was changed while it was being deleted; retry.');
    }
  }

  /** The reactor's name, or undefined when it no longer exists (formula deletion checks its users with this). */
  async nameOf(tenantId: string, id: string): Promise<string | undefined> {
    return (await getRecord<ReactorRecord>(this.store, 'reactor', keys.reactor(tenantId, id)))?.value.name;
  }

  /**
   * 403 when changing the formula's code would change code that runs with an application's rights (a reactor of the
   * caller's tenant with an application uses it) and the caller could not write such a reactor: it lacks
   * application:update, it expires before that application does, or the application is managed (assertMayAttach). Any
   * reactor that runs it needs application:update (assertMayRedirect): its code receives what the reactor's callers
   * detokenize.
   */
  async assertMayRewriteFormula(principal: TenantPrincipal, formulaId: string): Promise<void> {
    // The operator passes every check: no need to read the reactors.
    if (principal.operator) return;
    for (const usage of await this.formulas.usages(formulaId)) {
      if (usage.tenantId !== principal.tenantId) continue;
      const reactor = await getRecord<ReactorRecord>(
        this.store,
        'reactor',
        keys.reactor(usage.tenantId, usage.reactorId),
      );
      if (reactor === undefined) continue;
      const applicationId = reactor.value.application_id;
      // Without an application the code still receives what the reactor's callers detokenize.
      if (applicationId === undefined) {
        assertMayRedirect(principal, ['the code of a formula it runs'], 'reactor');
        continue;
      }
      assertMayDelegate(principal, applicationId, 'reactor');
      const application = await getRecord<ApplicationRecord>(
        this.store,
        'application',
        keys.application(usage.tenantId, applicationId),
      );
      if (application) assertMayAttach(principal, application.value, 'reactor');
    }
  }

  /**
   * Runs the reactor with `args`. `invoking` is called once the detokenized args are handed to the runtime (not when
   * the call is refused before: unknown reactor, bad args, no workers). `hold`, when given, is handed the release of
   * the result's bytes in the process's result budget (runtime/client/result-budget.ts), for the caller to call once
   * its answer is sent; without it they are released as the invocation returns.
   */
  async react(
    principal: TenantPrincipal,
    id: string,
    args: unknown,
    invoking?: () => void,
    hold?: (release: () => void) => void,
  ): Promise<ReactResponse> {
    const tenantId = principal.tenantId;
    // At most one store round trip on the hot path: the reactor and its formula come from the watched caches (or are
    // read in the same turn as the tokens the args name, which the store sends as one transaction). A reactor's
    // formula never changes, so the formula id seen on an earlier call (and where it was: private or official) is
    // read alongside; if the reactor was replaced by one with another formula, a second read follows.
    const reactorKey = keys.reactor(tenantId, id);
    const known = this.formulaIds.get(reactorKey);
    const [loaded, knownFormula, read] = await Promise.allSettled([
      this.records.get(
        keys.reactors(tenantId),
        reactorKey,
        async () => (await getRecord<ReactorRecord>(this.store, 'reactor', reactorKey))?.value,
      ),
      known
        ? this.formulaOf(() => this.formulas.cached(tenantId, known.id, known.official))
        : Promise.resolve(undefined),
      this.detokenizer.read(principal, args ?? {}),
    ]);
    // The reactor's own errors (404) come before the args' (400).
    if (loaded.status === 'rejected') throw loaded.reason;
    const record = loaded.value;
    if (!record) throw new Errors.NotFound('Reactor not found.');
    let formula: Formula | undefined;
    const formulaId = record.formula_id;
    if (formulaId !== undefined) {
      if (formulaId === known?.id) {
        // The formula read alongside is this reactor's, so its failure is the answer: a second read would give the
        // same one, and while etcd does not answer, only after a second store deadline.
        if (knownFormula.status === 'rejected') throw knownFormula.reason;
        formula = knownFormula.value;
      } else {
        formula = await this.formulaOf(() => this.formulas.cached(tenantId, formulaId));
        this.formulaIds.set(reactorKey, { id: formula.id, official: formula.type === 'official' });
      }
    }
    const code = formula?.code ?? record.code!;
    if (read.status === 'rejected') throw read.reason;

    // Where the invocation goes is settled before anything is opened for it: a refused one (no workers, a dedicated
    // worker URL outside TOKENVAULT_DEDICATED_WORKER_URLS) has decrypted no configuration, detokenized no argument
    // and minted no `bt` key that would live out its lease for nothing.
    const runtime = await this.runtime.clientFor(tenantId);
    if (!runtime) throw new Errors.RuntimeUnavailable('No reactor workers are configured (TOKENVAULT_WORKER_URL).');
    const configuration = await this.configurationFor(reactorKey, record);

    // Rules 6–10: detokenize first (≤ 100 tokens, token:use per container), then validate what came out.
    const detokenized = await read.value.use();
    const validated = formula ? applyParameters(detokenized, formula.request_parameters) : detokenized;
    const bt = record.application_id ? { apiKey: await this.btKeys.keyFor(tenantId, record.application_id) } : null;
    invoking?.();
    const result = await runtime.invoke(
      {
        tenantId,
        codeHash: codeHash(code),
        code,
        args: validated,
        configuration,
        bt,
        kind: 'reactor',
        contextKey: `reactor:${record.id}`,
      },
      { hold },
    );
    if (!result.ok) throw failureToError(result.error);
    const output = (result.result ?? {}) as { raw?: unknown; tokenize?: unknown };
    const response: ReactResponse = {};
    if (output.tokenize !== undefined && output.tokenize !== null) {
      // Created with the rights of the reactor's application, as the code could through `bt`, or without one with the
      // caller's own, never with rights of the reactor's own: otherwise a caller holding token:use alone could write
      // tokens (chosen ids too) into /pci/high/ through a reactor that passes its args on, and learn from
      // deduplication whether a card it cannot read exists.
      const creator = record.application_id
        ? await this.btKeys.principalFor(tenantId, record.application_id)
        : principal;
      response.tokens = await tokenize(this.tokens, creator, output.tokenize, 'wait');
    }
    if (output.raw !== undefined) response.raw = output.raw;
    return response;
  }

  /**
   * PUT and PATCH. Like a create, the write compares the revisions of the formula and the application it was checked
   * against: one that changed or went since it was read fails the compare, and the change is made again once on a
   * fresh read of everything (409 if they changed again meanwhile).
   */
  private async replace(
    principal: TenantPrincipal,
    id: string,
    next: (current: ReactorRecord, configuration: ConfigurationValues) => ReactorBody,
    options: ChangeOptions,
  ): Promise<Reactor> {
    return this.onReferences((fresh) => this.replaceOn(principal, id, next, options, fresh));
  }

  /** The reactor as written; undefined when its formula or its application changed (or went) since they were read. */
  private async replaceOn(
    principal: TenantPrincipal,
    id: string,
    next: (current: ReactorRecord, configuration: ConfigurationValues) => ReactorBody,
    options: ChangeOptions,
    fresh: boolean,
  ): Promise<Reactor | undefined> {
    const tenantId = principal.tenantId;
    const current = await this.load(tenantId, id);
    assertMayChange(current.value, principal, 'reactor');
    const before = { code: current.value.code, configuration: await this.openConfiguration(current.value) };
    const body = next(current.value, before.configuration);
    assertMayDelegate(principal, body.application?.id, 'reactor');
    if (body.formula && body.formula.id !== current.value.formula_id) {
      throw new Errors.InvalidBody({ errors: { 'formula.id': ['cannot be changed; create a new reactor'] } });
    }
    if (body.code !== undefined && current.value.formula_id)
      throw new Errors.InvalidBody({ errors: { code: ['this reactor runs a formula'] } });
    const { formula, application } = await this.referencesOf(
      tenantId,
      current.value.formula_id,
      body.application?.id,
      fresh,
    );
    const configuration = body.configuration ?? {};
    this.check(principal, body, formula?.value, application?.value, configuration);
    const code = formula ? undefined : (body.code ?? current.value.code);
    assertMayRedirect(principal, changedFields(before, { code, configuration }, ['code', 'configuration']), 'reactor');
    const record: ReactorRecord = {
      ...current.value,
      name: body.name,
      code,
      application_id: body.application?.id,
      sealed_configuration: await this.sealConfiguration(tenantId, id, configuration),
      modified_at: new Date().toISOString(),
      modified_by: actorId(principal),
    };
    const key = keys.reactor(tenantId, id);
    const written = await commitChange(
      this.store,
      id,
      {
        compare: [{ key, modRevision: current.modRevision }, ...comparesOf(formula, application)],
        success: [
          { type: 'put', key, value: encode('reactor', record) },
          ...(await this.events.ops(tenantId, 'reactor.updated', reactorEventData(record, actorOf(principal)))),
        ],
      },
      options,
    );
    if (written) return this.toReactor(record, configuration, formula?.value);
    if (!formula && !application) throw this.reactorChanged();
    const now = await this.store.get(key);
    if (now?.modRevision !== current.modRevision) throw this.reactorChanged();
    return undefined;
  }

  private reactorChanged(): VaultError {
    return new Errors.Conflict('The reactor was changed by another request; retry.');
  }

  /**
   * The formula (from the watched formula cache unless `fresh`) and the application a reactor is checked against, read
   * in one turn, each with its key and revision: what the reactor's write compares.
   */
  private async referencesOf(
    tenantId: string,
    formulaId: string | undefined,
    applicationId: string | undefined,
    fresh: boolean,
  ) {
    const [formula, application] = await Promise.all([
      formulaId ? this.formulaOf(() => this.formulas.reference(tenantId, formulaId, undefined, fresh)) : undefined,
      this.applicationOf(tenantId, applicationId, fresh),
    ]);
    return { formula, application };
  }

  /**
   * Configuration against the formula's contract, the application (as read; undefined when there is none), and inline
   * code that compiles.
   */
  private check(
    principal: TenantPrincipal,
    body: ReactorBody,
    formula: Formula | undefined,
    application: ApplicationRecord | undefined,
    configuration: ConfigurationValues,
  ): void {
    const errors: Record<string, string[]> = {};
    if (formula) {
      for (const element of formula.configuration) {
        const value = configuration[element.name];
        if (value === undefined) errors[`configuration.${element.name}`] = ['is required by the formula'];
        else if (typeof value !== element.type) errors[`configuration.${element.name}`] = [`must be a ${element.type}`];
      }
      for (const name of Object.keys(configuration)) {
        if (!formula.configuration.some((e) => e.name === name))
          errors[`configuration.${name}`] = ['is not declared by the formula'];
      }
    }
    if (body.application) {
      if (!application) errors['application.id'] = ['no such application'];
      else if (application.type === 'management')
        errors['application.id'] = ['must be a public or private application'];
      else assertMayAttach(principal, application, 'reactor');
    }
    if (Object.keys(errors).length > 0) throw new Errors.InvalidBody({ errors });
    if (body.code !== undefined) assertCompiles(body.code);
  }

  /**
   * The application a reactor is attached to, as stored, with its key and revision (what its write compares): from the
   * watched application cache unless `fresh`.
   */
  private async applicationOf(tenantId: string, applicationId: string | undefined, fresh: boolean) {
    if (applicationId === undefined) return undefined;
    if (this.applications && !fresh) return this.applications.storedAt(tenantId, applicationId);
    return getRecordAt<ApplicationRecord>(this.store, 'application', keys.application(tenantId, applicationId));
  }

  /** A formula read by `read`; one that does not exist is the body's error (400 naming formula.id), not a 404. */
  private async formulaOf<T>(read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (error) {
      if (error instanceof VaultError && error.status === 404) {
        throw new Errors.InvalidBody({ errors: { 'formula.id': ['no such reactor formula'] } });
      }
      throw error;
    }
  }

  private async load(tenantId: string, id: string) {
    const found = await getRecord<ReactorRecord>(this.store, 'reactor', keys.reactor(tenantId, id));
    if (!found) throw new Errors.NotFound('Reactor not found.');
    return found;
  }

  private async sealConfiguration(tenantId: string, id: string, configuration: ConfigurationValues): Promise<string> {
    return this.cipher.encrypt(tenantId, `reactor:${tenantId}:${id}`, JSON.stringify(configuration));
  }

  /** The configuration to invoke with: decrypted once per stored version, not on every invocation. */
  private async configurationFor(reactorKey: string, record: ReactorRecord): Promise<ConfigurationValues> {
    const cached = this.configurations.get(reactorKey);
    if (cached?.sealed === record.sealed_configuration) return cached.values;
    const values = await this.openConfiguration(record);
    this.configurations.set(reactorKey, { sealed: record.sealed_configuration, values });
    return values;
  }

  private async openConfiguration(record: ReactorRecord): Promise<ConfigurationValues> {
    const plaintext = await this.cipher.decrypt(
      record.tenant_id,
      `reactor:${record.tenant_id}:${record.id}`,
      record.sealed_configuration,
    );
    return JSON.parse(plaintext.toString('utf8')) as ConfigurationValues;
  }

  private async toReactor(
    record: ReactorRecord,
    configuration: ConfigurationValues,
    formula?: Formula,
  ): Promise<Reactor> {
    // Through the watched formula cache, as invocations read it: a GET or a page of reactors (and the operator's
    // resync, a GET per Reactor object) reads no formula from etcd once the tenant's formulas are cached.
    const resolved =
      formula ??
      (record.formula_id
        ? await this.formulas.cached(record.tenant_id, record.formula_id).catch(() => undefined)
        : undefined);
    return {
      id: record.id,
      tenant_id: record.tenant_id,
      name: record.name,
      ...(resolved ? { formula: resolved } : {}),
      ...(record.code !== undefined ? { code: record.code } : {}),
      configuration,
      ...(record.application_id ? { application: { id: record.application_id } } : {}),
      created_at: record.created_at,
      created_by: record.created_by,
      modified_at: record.modified_at,
      modified_by: record.modified_by,
    };
  }
}

/** How a failed invocation is answered (docs/api.md, "Reactor errors"). */
/** What a reactor's write compares of the records it was checked against: each as it was read. */
function comparesOf(...read: Array<StoredAt<unknown> | undefined>): Compare[] {
  return read.flatMap((r) => (r ? [{ key: r.key, modRevision: r.modRevision }] : []));
}

export function failureToError(failure: InvocationFailure): VaultError | CustomResponse {
  if (failure.kind === 'custom_response') {
    // Checked again where the frame is written: the API does not rely on the worker for it (custom-response.ts).
    if (!allowedCustomStatus(failure.status)) {
      const refused = refusedCustomStatus(failure.status);
      return new ReactorFailure(refused.status, refused.title, refused.detail, refused.errors);
    }
    return new CustomResponse(failure.status, customResponseHeaders(failure.headers), failure.body);
  }
  // Limits of the runtime, not the code's own errors: answered with their registry codes, which name the limit.
  if (failure.kind === 'result_too_large')
    return new Errors.ReactorResultTooLarge({ detail: failure.detail, errors: failure.errors as FieldErrors });
  if (failure.kind === 'host_limit')
    return new Errors.SandboxHostLimit({ detail: failure.detail, errors: failure.errors as FieldErrors });
  return new ReactorFailure(failure.status, failure.title, failure.detail, failure.errors);
}
