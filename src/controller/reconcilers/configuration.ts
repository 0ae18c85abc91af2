// Reactor and Proxy `spec.configuration`: a map from name to `{value}` or `{valueFrom: {secretKeyRef}}`, with an
// optional `type` (Reactor only) saying which JSON type the text is sent as. Secret values are read live (the
// informer caches Secrets' metadata only) and never written to status, Events or logs; the Secrets are declared as
// references, so a change to one requeues the object and the vault gets the new value.
import type { ObjectKey, ReconcileContext } from '../manager.js';
import { NotReadyYet, SpecError, secretValue } from './common.js';

export type ConfigurationType = 'string' | 'number' | 'boolean';

export interface ConfigurationEntry {
  value?: string;
  type?: ConfigurationType;
  valueFrom?: { secretKeyRef: { name: string; key: string } };
}

export type ConfigurationSpec = Record<string, ConfigurationEntry>;
export type ConfigurationValues = Record<string, string | number | boolean>;

const NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$/;

/**
 * What a tenant's resource (reactor, proxy) references, so that a change to any of them requeues it: its Tenant, its
 * Application, the Secrets its configuration reads, and `more` of its own.
 */
export function tenantResourceReferences(
  namespace: string,
  spec: { tenantRef?: { name: string }; applicationRef?: { name: string }; configuration?: ConfigurationSpec },
  ...more: ObjectKey[]
): ObjectKey[] {
  const references: ObjectKey[] = [{ kind: 'Tenant', namespace, name: spec.tenantRef?.name ?? '' }];
  if (spec.applicationRef) references.push({ kind: 'Application', namespace, name: spec.applicationRef.name });
  return [...references, ...more, ...configurationSecrets(namespace, spec.configuration)];
}

/** The Secrets a configuration reads (for ctx.references). */
export function configurationSecrets(namespace: string, spec: ConfigurationSpec | undefined): ObjectKey[] {
  const names = new Set<string>();
  for (const entry of Object.values(spec ?? {})) {
    if (entry.valueFrom?.secretKeyRef?.name) names.add(entry.valueFrom.secretKeyRef.name);
  }
  return [...names].map((name) => ({ kind: 'Secret', namespace, name }));
}

/**
 * The values to send: inline text or the Secret's value, converted to the entry's `type`, else the type `typeOf`
 * gives for the name (the formula's declaration), else string. A missing Secret or key, or a text that is not of its
 * type, is NotReadyYet (the message names the entry, never the value).
 */
export async function resolveConfiguration(
  ctx: ReconcileContext,
  namespace: string,
  spec: ConfigurationSpec | undefined,
  typeOf: (name: string) => ConfigurationType | undefined = () => undefined,
): Promise<ConfigurationValues> {
  const values: ConfigurationValues = {};
  for (const [name, entry] of Object.entries(spec ?? {})) {
    const ref = entry.valueFrom?.secretKeyRef;
    let text: string;
    if (ref) text = await secretValue(ctx, namespace, ref);
    else if (entry.value !== undefined) text = entry.value;
    else throw new SpecError('InvalidSpec', `configuration.${name} has neither value nor valueFrom.`);
    values[name] = convert(name, text, entry.type ?? typeOf(name) ?? 'string', Boolean(ref));
  }
  return values;
}

function convert(name: string, text: string, type: ConfigurationType, fromSecret: boolean): string | number | boolean {
  const source = fromSecret ? `the Secret value of configuration.${name}` : `configuration.${name}`;
  if (type === 'number') {
    if (!NUMBER.test(text.trim()))
      throw new NotReadyYet('InvalidConfiguration', `${source} is not a JSON number (type number).`, 30_000);
    return Number(text.trim());
  }
  if (type === 'boolean') {
    const word = text.trim();
    if (word !== 'true' && word !== 'false')
      throw new NotReadyYet('InvalidConfiguration', `${source} is not "true" or "false" (type boolean).`, 30_000);
    return word === 'true';
  }
  return text;
}

/** Equal as JSON, object key order ignored (comparing what the vault has with what the spec wants). */
export function sameValue(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b);
}

function canonical(value: unknown): string {
  return JSON.stringify(value ?? null, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>)
            .filter(([, x]) => x !== undefined)
            .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)),
        )
      : v,
  );
}

/** Whether any of the fields differs between the desired body and the vault's resource (absent counts as null). */
export function differs(
  desired: Record<string, unknown>,
  current: Record<string, unknown>,
  fields: readonly string[],
): boolean {
  return fields.some((field) => !sameValue(desired[field], current[field]));
}
