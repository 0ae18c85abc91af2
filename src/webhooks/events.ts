// The events a webhook can subscribe to, and what each carries. An event names what changed and who changed it, never
// token data: a token event carries the token's id, type, containers, metadata and timestamps (metadata is, by the
// platform's definition, not sensitive); a reactor event carries the reactor's id, name and formula/application ids,
// never its configuration or code. Shapes follow the platform's "Webhook Event Data" (docs/api.md, "Webhooks").

import { actorId, type Principal } from '../auth/principal.js';

export const EVENT_TYPES = [
  'token.created',
  'token.updated',
  'token.deleted',
  'reactor.created',
  'reactor.updated',
  'reactor.deleted',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** The official SDKs' examples spell event types with a colon (`token:created`); the API's own docs with a dot. */
export function normalizeEventType(name: string): string {
  return name.replace(':', '.');
}

export function isEventType(name: string): name is EventType {
  return (EVENT_TYPES as readonly string[]).includes(name);
}

export interface Actor {
  id: string;
  /** application, session, operator (changes made in its name), or system (the expiry sweep). */
  type: string;
}

/** Who made a change: the key's application or session, or the operator acting in the tenant. */
export function actorOf(principal: Principal): Actor {
  const type = principal.kind === 'operator' || principal.operator ? 'operator' : principal.kind;
  return { id: actorId(principal), type };
}

/** Changes nobody asked for (the expiry sweep). */
export const SYSTEM_ACTOR: Actor = { id: 'system', type: 'system' };

/** What changed: the event-specific object under its own name (`token`, `reactor`), and the actor. */
export type EventData = Record<string, unknown> & { actor: Actor };

/** An event as it is kept in the outbox and sent, inside the delivery's envelope. */
export interface WebhookEvent {
  id: string;
  type: EventType;
  timestamp: string;
  tenant_id: string;
  data: EventData;
}

/** The fields of a token an event carries (no data, mask, fingerprint or search indexes). */
export interface TokenFacts {
  id: string;
  type: string;
  containers?: string[];
  metadata?: Record<string, string>;
  expires_at?: string;
  created_at: string;
  created_by?: string;
  modified_at?: string;
  modified_by?: string;
}

export function tokenEventData(token: TokenFacts, actor: Actor): EventData {
  return {
    token: {
      id: token.id,
      type: token.type,
      ...(token.containers ? { containers: token.containers } : {}),
      ...(token.metadata ? { metadata: token.metadata } : {}),
      ...(token.expires_at ? { expires_at: token.expires_at } : {}),
      created_at: token.created_at,
      ...(token.created_by ? { created_by: token.created_by } : {}),
      ...(token.modified_at ? { modified_at: token.modified_at } : {}),
      ...(token.modified_by ? { modified_by: token.modified_by } : {}),
    },
    actor,
  };
}

/** The fields of a reactor an event carries (no configuration, no code). */
export interface ReactorFacts {
  id: string;
  name: string;
  formula_id?: string;
  application_id?: string;
  created_at: string;
  created_by?: string;
  modified_at?: string;
  modified_by?: string;
}

export function reactorEventData(reactor: ReactorFacts, actor: Actor): EventData {
  return {
    reactor: {
      id: reactor.id,
      name: reactor.name,
      ...(reactor.formula_id ? { formula: { id: reactor.formula_id } } : {}),
      ...(reactor.application_id ? { application: { id: reactor.application_id } } : {}),
      created_at: reactor.created_at,
      ...(reactor.created_by ? { created_by: reactor.created_by } : {}),
      ...(reactor.modified_at ? { modified_at: reactor.modified_at } : {}),
      ...(reactor.modified_by ? { modified_by: reactor.modified_by } : {}),
    },
    actor,
  };
}
