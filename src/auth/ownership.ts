// Resources declared as Kubernetes objects are owned by them: the controller creates them with the operator key and
// names the object in BT-MANAGED-BY, and from then on the REST interface refuses to change or delete them with any
// other key (409 naming the object), so the cluster stays the single source of truth for what it declares.
import type { ManagedBy, TenantPrincipal } from './principal.js';
import { Errors } from '../errors/registry.js';

export type { ManagedBy };

const OBJECT =
  /^([A-Za-z][A-Za-z0-9]{0,62})\/(?:([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)\/)?([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)$/;

/** Parses `Kind/namespace/name` (or `Kind/name` for cluster-scoped kinds); undefined when malformed. */
export function parseManagedBy(value: string): ManagedBy | undefined {
  const match = OBJECT.exec(value);
  if (!match) return undefined;
  return match[2] === undefined
    ? { kind: match[1], name: match[4] }
    : { kind: match[1], namespace: match[2], name: match[4] };
}

export function describeObject(owner: ManagedBy): string {
  return `${owner.kind} ${owner.namespace ? `${owner.namespace}/` : ''}${owner.name}`;
}

/** What a create by this principal records as the resource's owner. */
export function managedByOf(
  principal: TenantPrincipal | { operator: true; managedBy?: ManagedBy },
): ManagedBy | undefined {
  return principal.operator ? principal.managedBy : undefined;
}

/** 409 when the resource belongs to a Kubernetes object and the caller is not the operator. */
export function assertMayChange(
  record: { managed_by?: ManagedBy },
  principal: { operator?: boolean },
  what: string,
): void {
  if (record.managed_by && !principal.operator) {
    throw new Errors.Conflict(
      `This ${what} is managed by the Kubernetes object ${describeObject(record.managed_by)}; change or delete that object instead.`,
    );
  }
}

/** The operator may choose a resource's id (the controller uses the object's uid, so a retried create cannot duplicate). */
export function chosenId(principal: { operator?: boolean }, id: string | undefined): string | undefined {
  if (id !== undefined && !principal.operator)
    throw new Errors.InvalidBody({ errors: { id: ['only the operator chooses ids'] } });
  return id;
}
